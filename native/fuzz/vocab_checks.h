// What every harness that holds a Vocab does with it: tokenize a text both
// ways (with and without special tokens), check that every id is a token of
// the vocabulary, and render the ids back (token_to_piece, detokenize in its
// four modes). Used on fixed vocabularies with fuzzed text (fuzz_tokenizer)
// and on fuzzed vocabularies with fixed texts (fuzz_gguf_reader).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace guild::fuzz {

// Flag bits: which tokenize / detokenize options to use.
enum VocabFlags : uint8_t {
  kAddSpecial = 1 << 0,
  kParseSpecial = 1 << 1,
  kRemoveSpecial = 1 << 2,
  kUnparseSpecial = 1 << 3,
  kRenderSpecial = 1 << 4,
};

// The ids tokenize() gave (after the range checks), for callers that check more.
std::vector<int32_t> exercise_vocab(const Vocab& vocab, std::string_view text, uint8_t flags);

// The metadata accessors and a bounded walk over the token table (first and
// last `max_ids` ids): token_text, token_kind, token_to_piece, token_id of
// the text must give back an id with that text, is_eog.
void exercise_token_table(const Vocab& vocab, int32_t max_ids);

}  // namespace guild::fuzz
