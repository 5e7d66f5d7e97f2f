// The tokenizer: immutable vocabulary data built once from GGUF metadata
// (tokenizer.ggml.*), plus per-call scratch state inside tokenize(). Supports
// byte-level BPE (model "gpt2") with the pre-tokenizers named by
// tokenizer.ggml.pre, its UTF-8 variant (model "gemma4"), and SentencePiece
// (model "llama"). Reproduces llama.cpp's llama_tokenize / llama_token_to_piece
// / llama_detokenize; see docs/TOKENIZER.md. All const methods are safe to
// call from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace guild {
namespace gguf { class ModelFiles; }

// GGUF tokenizer.ggml.token_type values.
enum class TokenKind : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

class Vocab {
 public:
  // Null plus *error (one line) if the metadata is missing or inconsistent,
  // or the tokenizer model / pre-tokenizer is unsupported.
  static std::unique_ptr<Vocab> from_gguf(const gguf::ModelFiles& files, std::string* error);
  virtual ~Vocab() = default;

  virtual int32_t n_tokens() const = 0;
  virtual std::string_view model_name() const = 0;  // "gpt2", "llama", "gemma4"
  virtual std::string_view pre_name() const = 0;    // tokenizer.ggml.pre ("" if absent)

  // add_special: BOS (and EOS) as the vocab's add_bos/add_eos say.
  // parse_special: control / unknown-type token texts in `text` become those
  // tokens. User-defined token texts always do (as in llama.cpp).
  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                        bool parse_special) const = 0;
  // The bytes a token stands for (llama_token_to_piece, lstrip 0). Control and
  // unknown-type tokens render as their text only when render_special is set
  // (else empty); user-defined tokens always as their text; byte tokens as the
  // byte; unused / undefined tokens as nothing. Out-of-range ids give "".
  virtual std::string token_to_piece(int32_t id, bool render_special) const = 0;
  // llama_detokenize semantics: remove_special drops a leading BOS / trailing
  // EOS that add_special would have added; unparse_special renders control tokens.
  virtual std::string detokenize(std::span<const int32_t> ids, bool remove_special,
                                 bool unparse_special) const = 0;

  virtual std::string_view token_text(int32_t id) const = 0;
  virtual TokenKind token_kind(int32_t id) const = 0;
  virtual int32_t bos() const = 0;  // -1 if none
  virtual int32_t eos() const = 0;
  virtual int32_t eot() const = 0;
  virtual int32_t unk() const = 0;
  virtual int32_t pad() const = 0;
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // Id of the token whose text is exactly `text`, -1 if none.
  virtual int32_t token_id(std::string_view text) const = 0;
  // tokenizer.chat_template ("" if absent).
  virtual std::string_view chat_template() const = 0;
  // End of generation: eos, eot, and other end tokens the metadata names
  // (e.g. <|im_end|>, <|endoftext|>, </s>).
  virtual bool is_eog(int32_t id) const = 0;
};

}  // namespace guild
