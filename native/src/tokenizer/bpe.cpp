// Byte-level BPE (GPT-2 style), as llama.cpp's llm_tokenizer_bpe_session does
// it: a pre-token's bytes become one symbol each (the symbol's text is the
// GPT-2 byte-to-code-point mapping of the byte); adjacent pairs are merged by
// merge rank, lowest first, ties to the leftmost pair; the final symbols are
// looked up in the vocabulary, and a symbol that is not a token falls back to
// the single-byte strings of its text. The gemma4 variant (byte_encode off)
// starts from UTF-8 characters and falls back to <0xXX> byte tokens.
//
// Strings are interned: every token text has its token id, and merge sides or
// results that are not tokens get ids from n_tokens up. A merge is then a hash
// lookup on a pair of ints.
#include <algorithm>
#include <array>
#include <cstdio>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace guild::tok {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order.
struct ByteAlphabet {
  std::array<std::string, 256> utf8;
  std::array<int16_t, 324> byte_of_cp;  // code points 0..323
  ByteAlphabet() {
    byte_of_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      unicode::append_utf8(utf8[b], cp);
      byte_of_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// Min-heap order: lower rank first, then the leftmost pair.
bool heap_less(const BpeScratch::Bigram& a, const BpeScratch::Bigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

const std::string& BpeModel::byte_to_utf8(uint8_t b) { return alphabet().utf8[b]; }

int BpeModel::byte_from_cp(uint32_t cp) { return cp < 324 ? alphabet().byte_of_cp[cp] : -1; }

int32_t BpeModel::find_string(std::string_view s) const {
  int32_t id = find_token(*token_map_, s);
  if (id >= 0) return id;
  auto it = extra_map_.find(s);
  return it == extra_map_.end() ? -1 : it->second;
}

int32_t BpeModel::intern(std::string_view s) {
  int32_t id = find_string(s);
  if (id >= 0) return id;
  extra_.emplace_back(s);
  id = n_tokens_ + static_cast<int32_t>(extra_.size()) - 1;
  extra_map_.emplace(extra_.back(), id);
  return id;
}

bool BpeModel::build(const std::vector<std::string>& texts, const TokenMap& token_map,
                     const std::vector<std::string_view>& merges, bool ignore_merges, bool byte_encode,
                     bool newline_words, std::string* error) {
  token_map_ = &token_map;
  n_tokens_ = static_cast<int32_t>(texts.size());
  ignore_merges_ = ignore_merges;
  byte_encode_ = byte_encode;
  newline_words_ = newline_words;
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    // llama.cpp splits at the first space after the first byte.
    std::string_view m = merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string_view::npos) continue;
    const std::string_view left = m.substr(0, sp), right = m.substr(sp + 1);
    const int32_t a = intern(left), b = intern(right);
    joined.assign(left).append(right);
    const int32_t result = intern(joined);
    merges_.emplace(pair_key(a, b), Merge{static_cast<int32_t>(rank), result});  // first rank wins
  }
  int known = 0;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    byte_token_[b] = find_token(token_map, hex);
    byte_sym_[b] = find_string(byte_to_utf8(static_cast<uint8_t>(b)));
    known += byte_sym_[b] >= 0;
  }
  if (byte_encode && known == 0) {
    if (error) *error = "BPE vocabulary has none of the 256 byte-level symbols";
    return false;
  }
  return true;
}

void BpeModel::encode_word(std::string_view bytes, BpeScratch& sc, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  const auto encode_bytes = [&](std::string_view raw) {
    sc.encoded.clear();
    for (char c : raw) sc.encoded += byte_to_utf8(static_cast<uint8_t>(c));
    return std::string_view(sc.encoded);
  };
  const bool only_newlines = bytes.find_first_not_of('\n') == std::string_view::npos;
  if (ignore_merges_ || (newline_words_ && only_newlines)) {
    const int32_t id = find_token(*token_map_, byte_encode_ ? encode_bytes(bytes) : bytes);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  auto& syms = sc.symbols;
  syms.clear();
  for (size_t i = 0; i < bytes.size();) {
    // One symbol per byte (byte-level), or per UTF-8 character as llama.cpp
    // cuts them (length from the lead byte).
    size_t n = 1;
    int32_t id;
    if (byte_encode_) {
      id = byte_sym_[static_cast<uint8_t>(bytes[i])];
    } else {
      static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
      n = std::min<size_t>(kLen[static_cast<uint8_t>(bytes[i]) >> 4], bytes.size() - i);
      id = find_string(bytes.substr(i, n));
    }
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({id, static_cast<uint32_t>(i), static_cast<uint32_t>(n), idx - 1,
                    i + n < bytes.size() ? idx + 1 : -1});
    i += n;
  }
  auto& heap = sc.heap;
  heap.clear();
  const auto add_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
    auto it = merges_.find(pair_key(syms[l].id, syms[r].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, r, syms[l].id, syms[r].id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), heap_less);
  };
  for (size_t i = 1; i < syms.size(); ++i) add_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_less);
    const BpeScratch::Bigram bg = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& l = syms[bg.left];
    BpeScratch::Symbol& r = syms[bg.right];
    // Stale: one side was merged away or has grown since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.id != bg.left_id || r.id != bg.right_id) continue;
    l.id = bg.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    add_pair(l.prev, bg.left);
    add_pair(bg.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const BpeScratch::Symbol& s = syms[i];
    if (s.id >= 0 && s.id < n_tokens_) {
      out.push_back(s.id);
      continue;
    }
    if (!byte_encode_) {  // not a token: <0xXX> byte tokens
      for (char c : bytes.substr(s.start, s.len))
        if (byte_token_[static_cast<uint8_t>(c)] >= 0) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
      continue;
    }
    // Not a token: llama.cpp tries each byte of the symbol's text alone.
    const std::string_view text = encode_bytes(bytes.substr(s.start, s.len));
    for (char c : text) {
      const int32_t id = find_token(*token_map_, std::string_view(&c, 1));
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace guild::tok
