#include "vocab_checks.h"

#include <string>

#include "fuzz_check.h"

namespace guild::fuzz {

std::vector<int32_t> exercise_vocab(const Vocab& vocab, std::string_view text, uint8_t flags) {
  const int32_t n = vocab.n_tokens();
  std::vector<int32_t> ids = vocab.tokenize(text, flags & kAddSpecial, flags & kParseSpecial);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n, "tokenize gave id %d of a %d-token vocabulary", id, n);
  size_t piece_bytes = 0;
  for (int32_t id : ids) {
    (void)vocab.token_to_piece(id, flags & kRenderSpecial);
    piece_bytes += vocab.token_to_piece(id, flags & kUnparseSpecial).size();
  }
  // detokenize joins the same pieces and only ever drops bytes (BOS / EOS,
  // the SentencePiece leading space, the clean-up of spaces).
  const std::string text_out = vocab.detokenize(ids, flags & kRemoveSpecial, flags & kUnparseSpecial);
  FUZZ_CHECK(text_out.size() <= piece_bytes, "detokenize gave %zu bytes from %zu piece bytes", text_out.size(),
             piece_bytes);
  // Ids outside the vocabulary render as nothing.
  const int32_t stray[] = {-1, n, INT32_MIN, INT32_MAX};
  FUZZ_CHECK(vocab.detokenize(stray, false, true).empty(), "ids outside the vocabulary rendered text");
  return ids;
}

void exercise_token_table(const Vocab& vocab, int32_t max_ids) {
  const int32_t n = vocab.n_tokens();
  FUZZ_CHECK(n > 0, "a loaded vocabulary with %d tokens", n);
  for (int32_t special : {vocab.bos(), vocab.eos(), vocab.eot(), vocab.unk(), vocab.pad()})
    FUZZ_CHECK(special >= -1 && special < n, "special token id %d of a %d-token vocabulary", special, n);
  (void)vocab.model_name();
  (void)vocab.pre_name();
  (void)vocab.chat_template();
  auto visit = [&](int32_t id) {
    const std::string_view text = vocab.token_text(id);
    FUZZ_CHECK(!text.empty(), "token %d has an empty text", id);
    const int32_t back = vocab.token_id(text);
    FUZZ_CHECK(back == id, "token %d's text maps back to id %d", id, back);
    (void)vocab.token_kind(id);
    (void)vocab.token_to_piece(id, true);
    (void)vocab.token_to_piece(id, false);
    (void)vocab.is_eog(id);
  };
  for (int32_t id = 0; id < n && id < max_ids; ++id) visit(id);
  for (int32_t id = n - 1; id >= max_ids && id >= n - max_ids; --id) visit(id);
  for (int32_t id : {-1, n, INT32_MAX}) {
    FUZZ_CHECK(vocab.token_text(id).empty(), "token_text(%d) outside the vocabulary is not empty", id);
    FUZZ_CHECK(vocab.token_to_piece(id, true).empty(), "token_to_piece(%d) outside the vocabulary is not empty", id);
  }
}

}  // namespace guild::fuzz
