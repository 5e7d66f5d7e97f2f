// Internal pieces of the tokenizer shared by vocab.cpp, bpe.cpp, spm.cpp and
// pretokenize.cpp. Not part of the public interface (vocab.h).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace guild::tok {

// llama.cpp's token attributes (a bit set; load-time fixups combine them).
enum Attr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
};

// Token text -> id (views into the vocabulary's own strings).
using TokenMap = std::unordered_map<std::string_view, int32_t>;

inline int32_t find_token(const TokenMap& map, std::string_view text) {
  auto it = map.find(text);
  return it == map.end() ? -1 : it->second;
}

// ---------------------------------------------------------------------------
// Pre-tokenizers (pretokenize.cpp). A pre-tokenizer is a list of stages; each
// stage splits every current segment further, exactly like llama.cpp's
// unicode_regex_split applies its list of regexes. Stages named after a regex
// emulate std::regex on llama.cpp's "collapsed" text (non-ASCII code points
// replaced by one byte per category) or on the wide text, whichever llama.cpp
// uses for that regex; Gpt2 and Llama3 are llama.cpp's hand-written splitters.
enum class Stage : uint8_t {
  Gpt2,            // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  Llama3,          // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Qwen2,           // as Llama3 with \p{N} (one digit per piece)
  Qwen35,          // as Qwen2 with [\p{L}\p{M}]+ words and marks excluded from punctuation runs
  SeedCoder,       // as Qwen2 without [\r\n]* after punctuation runs
  Llama3AnyDigits, // as Llama3 with \p{N}+ (minicpm5, after Number3)
  Qwen2NoContractions,  // as Qwen2 without the contraction alternative (ufakzeka)
  Gpt4o,           // o200k: case-aware words with optional contractions, \p{N}{1,3}, [\r\n/]* tails
  Tekken,          // as Gpt4o without contractions and with \p{N}
  NewlineRuns,     // [^\n]+|[\n]+
  NewlineEach,     // [\r\n]
  SpaceLetters,    // \s?\p{L}+
  SpacePunct,      // \s?\p{P}+
  CjkHangul,       // [一-龥ࠀ-一가-퟿]+
  CjkKana,         // [一-龥぀-ゟ゠-ヿ]+
  NumberEach,      // \p{N}
  NumberRun,       // \p{N}+
  Number3,         // \p{N}{1,3}
  DsLlmLetters,    // \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ (DeepSeek LLM's cased-letter class)
  DsLlmPunct,      // \s?[!-/:-~！-／：-～‘-‟　-。]+
  TrailingSpace,   // \s+$
  DsV3Main,        // DeepSeek-V3's main regex
  PunctSymRun,     // [\p{P}\$\+<=>\^~\|]+
  PunctSymRunTick, // [\p{P}\$\+<=>\^~\|`]+
  AsciiDigits3,    // [0-9][0-9][0-9]
};

// Code points of one text fragment -> exclusive end offsets of its words.
void pretokenize(const std::vector<Stage>& stages, const std::vector<uint32_t>& cps,
                 std::vector<uint32_t>* word_ends);

// ---------------------------------------------------------------------------
// Byte-level BPE (bpe.cpp).

// Working memory of one tokenize() call, reused across its words.
struct BpeScratch {
  struct Symbol {
    int32_t id;            // string id (token id when < n_tokens), -1 if unknown
    uint32_t start, len;   // raw bytes of the word
    int32_t prev, next;    // neighbours, -1 at the ends
  };
  struct Bigram {
    int32_t rank, left, right, left_id, right_id, result;
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
  std::string encoded;  // byte-level text of a word or symbol
};

class BpeModel {
 public:
  // merges: "left right" strings in rank order. Returns false + *error on a
  // vocabulary that cannot work (no byte-level symbols at all).
  // byte_encode: GPT-2 byte-level symbols (else UTF-8 characters with <0xXX>
  // byte fallback, gemma4-style). ignore_merges: a word that is a token is
  // taken whole; newline_words: the same for words made of '\n' only (gemma4).
  bool build(const std::vector<std::string>& texts, const TokenMap& token_map,
             const std::vector<std::string_view>& merges, bool ignore_merges, bool byte_encode,
             bool newline_words, std::string* error);

  // Appends the ids of one pre-token: `bytes` are the word's raw bytes.
  void encode_word(std::string_view bytes, BpeScratch& scratch, std::vector<int32_t>& out) const;

  // Byte-level alphabet: raw byte <-> the UTF-8 of the code point GPT-2 maps it to.
  static const std::string& byte_to_utf8(uint8_t b);
  static int byte_from_cp(uint32_t cp);  // -1 if cp is not one of the 256

  int32_t find_string(std::string_view s) const;  // string id, -1 if unknown

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // string id of the concatenation
  };
  int32_t intern(std::string_view s);

  const TokenMap* token_map_ = nullptr;
  int32_t n_tokens_ = 0;
  bool ignore_merges_ = false;
  bool byte_encode_ = true;
  bool newline_words_ = false;
  int32_t byte_token_[256];                           // <0xXX> tokens (byte_encode_ off)
  std::deque<std::string> extra_;                     // ids >= n_tokens_ (stable addresses)
  std::unordered_map<std::string_view, int32_t> extra_map_;
  std::unordered_map<uint64_t, Merge> merges_;        // (left id << 32 | right id)
  int32_t byte_sym_[256];                             // string id of each byte's symbol, -1 if none
};

// ---------------------------------------------------------------------------
// SentencePiece BPE ("llama" model, spm.cpp).
class SpmModel {
 public:
  void build(const std::vector<float>* scores, const TokenMap* token_map, int32_t unk_id);
  // `text` is already whitespace-escaped (' ' -> U+2581). Appends ids.
  void encode(std::string_view text, std::vector<int32_t>& out) const;
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }

 private:
  const std::vector<float>* scores_ = nullptr;
  const TokenMap* token_map_ = nullptr;
  int32_t byte_token_[256];  // <0xXX>, else the 1-byte token, else unk (-1 if none)
};

}  // namespace guild::tok
