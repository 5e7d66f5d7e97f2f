// Fuzz target: the tokenizer (tokenizer/vocab.h) on fuzzed text against fixed,
// real vocabularies (tokenizer_vocabs.h: the demo model's, the fixtures'
// Qwen3 and SentencePiece ones where installed, and a variant per
// pre-tokenizer and tokenizer model). Input layout:
//   byte 0   which vocabulary (modulo their number)
//   byte 1   VocabFlags (vocab_checks.h): add/parse/remove/unparse/render special
//   rest     the text (any bytes: invalid UTF-8 is part of the contract)
// Beyond not crashing: every id is in range, detokenize never grows the
// pieces, and where the vocabulary guarantees it the text round-trips
// exactly through tokenize and detokenize.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "verbose.h"
#include "tokenizer_vocabs.h"
#include "vocab_checks.h"

using namespace guild;
using namespace guild::fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const auto& table = fuzz_vocabularies();
  std::fprintf(stderr, "fuzz_tokenizer: %zu vocabularies\n", table.size());
  return 0;
}

namespace {

std::string hex_prefix(std::string_view s) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(s[i]));
    out += buf;
  }
  return out;
}

// Whether cutting the text into characters by their lead byte (llama.cpp's
// unicode_len_utf8) consumes only continuation bytes after each lead.
bool utf8_cuts_align(std::string_view s) {
  static const uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  for (size_t i = 0; i < s.size();) {
    const size_t n = kLen[static_cast<uint8_t>(s[i]) >> 4];
    for (size_t k = 1; k < n && i + k < s.size(); ++k)
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& table = fuzz_vocabularies();
  const FuzzVocab& v = table[data[0] % table.size()];
  const uint8_t flags = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const size_t n_ids = exercise_vocab(*v.vocab, text, flags).size();
  FUZZ_LOG("%s: %zu bytes -> %zu ids", v.label.c_str(), text.size(), n_ids);

  const bool parse = flags & kParseSpecial;
  const bool check_round_trip =
      (v.round_trip == RoundTrip::Always || (v.round_trip == RoundTrip::PlainText && !parse)) &&
      (!v.utf8_symbols || (text.find("\xE2\x96\x81") == std::string_view::npos && utf8_cuts_align(text)));
  if (check_round_trip) {
    const std::vector<int32_t> ids = v.vocab->tokenize(text, false, parse);
    const std::string back = v.vocab->detokenize(ids, false, parse);
    FUZZ_CHECK(back == text, "%s: round trip (parse_special %d) changed the text: %zu -> %zu bytes; in %s, out %s",
               v.label.c_str(), parse, text.size(), back.size(), hex_prefix(text).c_str(), hex_prefix(back).c_str());
  }
  return 0;
}
