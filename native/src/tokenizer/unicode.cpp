#include "tokenizer/unicode.h"

#include <algorithm>

namespace guild::unicode {

namespace {

uint8_t lookup(uint32_t cp) {
  if (cp >= 0x110000) return kUndefined;
  const FlagRange* end = kFlagRanges + kFlagRangeCount;
  const FlagRange* it = std::upper_bound(kFlagRanges, end, cp,
                                         [](uint32_t c, const FlagRange& r) { return c < r.first; });
  return (it - 1)->flag;  // kFlagRanges[0].first == 0
}

struct Latin1 {
  uint8_t flag[256];
  Latin1() {
    for (uint32_t c = 0; c < 256; ++c) flag[c] = lookup(c);
  }
};

}  // namespace

uint8_t flags(uint32_t cp) {
  static const Latin1 latin1;
  return cp < 256 ? latin1.flag[cp] : lookup(cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  return std::binary_search(kWhitespace, kWhitespace + kWhitespaceCount, cp);
}

size_t decode_one(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const uint8_t b0 = b(0);
  if (b0 < 0x80) { *cp = b0; return 1; }
  if ((b0 & 0x40) == 0) { *cp = 0xFFFD; return 1; }  // stray continuation byte
  if ((b0 & 0x20) == 0) {
    if (!cont(1)) { *cp = 0xFFFD; return 1; }
    *cp = (uint32_t(b0 & 0x1F) << 6) | (b(1) & 0x3F);
    return 2;
  }
  if ((b0 & 0x10) == 0) {
    if (!cont(1) || !cont(2)) { *cp = 0xFFFD; return 1; }
    *cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return 3;
  }
  if ((b0 & 0x08) == 0) {
    if (!cont(1) || !cont(2) || !cont(3)) { *cp = 0xFFFD; return 1; }
    *cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(b(1) & 0x3F) << 12) | (uint32_t(b(2) & 0x3F) << 6) |
          (b(3) & 0x3F);
    return 4;
  }
  *cp = 0xFFFD;
  return 1;
}

void decode(std::string_view text, std::vector<uint32_t>* cps, std::vector<uint32_t>* offsets) {
  cps->clear();
  offsets->clear();
  cps->reserve(text.size());
  offsets->reserve(text.size() + 1);
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    size_t n = decode_one(text, i, &cp);
    cps->push_back(cp);
    offsets->push_back(static_cast<uint32_t>(i));
    i += n;
  }
  offsets->push_back(static_cast<uint32_t>(text.size()));
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace guild::unicode
