// The fixed vocabularies fuzz_tokenizer tokenizes with: the demo model's
// (assets/models, always present), the real Qwen3 and SentencePiece
// vocabularies of the reference fixtures where they are installed, and
// variants built from the demo vocabulary that select every pre-tokenizer
// and tokenizer model the runtime supports (written as GGUF with the
// project's writer and loaded through the normal path, Vocab::from_gguf).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "tokenizer/vocab.h"

namespace guild::fuzz {

// Whether detokenize(tokenize(text)) must give the text back (with
// add_special / remove_special off): byte-level vocabularies that have every
// byte and clean no spaces do, for every input.
enum class RoundTrip {
  None,              // not guaranteed (space clean-up, SentencePiece prefixes, partial vocabularies)
  Always,            // with and without parse_special
  PlainText,         // only without parse_special (special tokens change the spacing)
};

struct FuzzVocab {
  std::string label;  // for messages: "demo", "pre=llama3", ...
  std::unique_ptr<gguf::ModelFiles> files;  // kept: the vocabulary was read from it
  std::unique_ptr<Vocab> vocab;
  RoundTrip round_trip = RoundTrip::None;
  // The text is cut into UTF-8 characters by their lead byte and spaces are
  // written as U+2581 (SentencePiece, raw-byte BPE), as in llama.cpp. The
  // round trip then holds only for a text without U+2581 (it reads back as
  // a space) whose cuts stay aligned: a truncated sequence swallows the next
  // character's first bytes, which come back through byte tokens unescaped
  // (" \xE2\x82 " reads back as " \xE2\x82\xE2\x96\x81").
  bool utf8_symbols = false;
};

// Builds the table once (aborts with a message when the demo model is
// missing: the harness would test nothing). The order is fixed: an input's
// first byte selects an entry, modulo the size. Fixture vocabularies that are
// not installed are replaced by the demo vocabulary, so an input means the
// same everywhere except for which real vocabulary it meets.
const std::vector<FuzzVocab>& fuzz_vocabularies();

}  // namespace guild::fuzz
