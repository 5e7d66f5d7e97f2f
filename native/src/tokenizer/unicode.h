// Unicode helpers for the tokenizer: code point classes (generated tables in
// unicode_tables.cpp) and UTF-8 decoding with llama.cpp's error behaviour.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace guild::unicode {

// One class per code point (general category collapsed, see
// native/tools/gen_unicode_tables.py). Whitespace is a separate property.
enum Flag : uint8_t {
  kUndefined = 1 << 0,  // Cn, and anything above U+10FFFF
  kNumber = 1 << 1,     // N*
  kLetter = 1 << 2,     // L*
  kSeparator = 1 << 3,  // Z*
  kMark = 1 << 4,       // M*
  kPunct = 1 << 5,      // P*
  kSymbol = 1 << 6,     // S*
  kControl = 1 << 7,    // Cc Cf Cs Co
};

struct FlagRange {
  uint32_t first;
  uint8_t flag;
};
extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangeCount;
extern const uint32_t kWhitespace[];
extern const size_t kWhitespaceCount;

uint8_t flags(uint32_t cp);
bool is_whitespace(uint32_t cp);

inline bool is_letter(uint32_t cp) { return flags(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return flags(cp) & kNumber; }

// Decodes one code point at s[i] the way llama.cpp does (lead byte decides the
// length, continuation bytes checked, no overlong / surrogate / range checks);
// an invalid sequence yields U+FFFD and consumes one byte. Returns the length.
size_t decode_one(std::string_view s, size_t i, uint32_t* cp);

// Code points of `text` plus, for each, the byte offset where it starts
// (offsets has one extra entry: text.size()).
void decode(std::string_view text, std::vector<uint32_t>* cps, std::vector<uint32_t>* offsets);

// UTF-8 of a code point (up to 4 bytes; values above U+10FFFF give "").
void append_utf8(std::string& out, uint32_t cp);

}  // namespace guild::unicode
