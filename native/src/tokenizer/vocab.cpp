// Vocabulary loading (GGUF tokenizer.ggml.*), special-token handling,
// token_to_piece and detokenize, following llama.cpp's llama-vocab.cpp rules
// (docs/TOKENIZER.md lists them). The tokenizer algorithms themselves live in
// bpe.cpp, spm.cpp and pretokenize.cpp.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <unordered_set>

#include "artifact/gguf.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace guild {

namespace {

using namespace tok;

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// C isspace in the "C" locale (what llama.cpp's lstrip / rstrip use).
bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
    out.append(s, pos, hit - pos).append(to);
  out.append(s, pos);
  s.swap(out);
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// What tokenizer.ggml.pre selects for a BPE vocabulary (llama-vocab.cpp).
struct PreConfig {
  std::vector<Stage> stages;
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_default_bos = false;
  bool escape_whitespaces = false;  // spaces -> U+2581 before BPE (gemma4, sarvam-moe)
  bool byte_encode = true;          // GPT-2 byte-level symbols
  bool force_bos = false;           // add_bos even when the metadata says false (gemma4)
  bool newline_words = false;       // an all-'\n' word that is a token is taken whole (gemma4)
};

bool pre_config(std::string_view pre, PreConfig* c) {
  using S = Stage;
  const auto set = [&](std::vector<Stage> st, bool clean = true) {
    c->stages = std::move(st);
    c->clean_spaces = clean;
    return true;
  };
  if (pre.empty() || pre == "default") return set({S::PunctSymRun, S::Gpt2, S::NumberRun, S::AsciiDigits3});
  if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                   "jina-v5-nano"})) {
    c->ignore_merges = true;
    c->add_bos = true;
    return set({S::Llama3});
  }
  if (one_of(pre, {"dbrx", "smaug-bpe"})) return set({S::Llama3});
  if (one_of(pre, {"glm4", "chatglm-bpe"})) {
    c->no_default_bos = true;
    return set({S::Llama3});
  }
  if (pre == "minicpm5") {
    c->ignore_merges = true;
    return set({S::Number3, S::Llama3AnyDigits});
  }
  if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2",
                   "bailingmoe", "bailingmoe2", "llada-moe"}))
    return set({S::Qwen2}, false);
  if (one_of(pre, {"megrez", "stablelm2"})) return set({S::Qwen2});
  if (pre == "qwen35") return set({S::Qwen35}, false);
  if (pre == "ufakzeka") return set({S::Qwen2NoContractions}, false);
  if (pre == "laguna") return set({S::NewlineRuns, S::Qwen2}, false);
  if (one_of(pre, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) return set({S::Gpt4o}, false);
  if (one_of(pre, {"gemma4", "granite-embed-multi-311m", "sarvam-moe"})) {
    c->escape_whitespaces = true;
    c->byte_encode = false;
    c->force_bos = c->newline_words = pre != "sarvam-moe";
    return set({S::NewlineRuns}, pre != "sarvam-moe");
  }
  if (pre == "tekken") {
    c->ignore_merges = true;
    c->add_bos = true;
    return set({S::Tekken}, false);
  }
  if (pre == "seed-coder") return set({S::SeedCoder}, false);
  if (pre == "deepseek-llm")
    return set({S::NewlineEach, S::DsLlmLetters, S::DsLlmPunct, S::TrailingSpace, S::CjkHangul, S::NumberRun}, false);
  if (pre == "deepseek-coder")
    return set({S::NewlineEach, S::SpaceLetters, S::SpacePunct, S::CjkHangul, S::NumberEach}, false);
  if (one_of(pre, {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}))
    return set({S::Number3, S::CjkKana, S::DsV3Main}, false);
  if (pre == "falcon") return set({S::PunctSymRunTick, S::Gpt2, S::AsciiDigits3});
  if (one_of(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                   "mellum", "modern-bert", "exaone4", "mpt", "olmo", "jais"}))
    return set({S::Gpt2});
  if (one_of(pre, {"trillion", "granite-docling"})) return set({S::Gpt2}, false);
  if (one_of(pre, {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}))
    return set({S::NumberEach, S::Gpt2});
  if (one_of(pre, {"command-r", "smollm"})) return set({S::NumberEach, S::Gpt2}, false);
  return false;
}

// Texts llama.cpp recognises as special when the metadata does not name them.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                                  "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                                  "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};

class VocabImpl final : public Vocab {
 public:
  bool load(const gguf::ModelFiles& f, std::string* error);

  int32_t n_tokens() const override { return static_cast<int32_t>(texts_.size()); }
  std::string_view model_name() const override { return model_name_; }
  std::string_view pre_name() const override { return pre_name_; }
  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(int32_t id, bool render_special) const override;
  std::string detokenize(std::span<const int32_t> ids, bool remove_special, bool unparse_special) const override;
  std::string_view token_text(int32_t id) const override { return valid(id) ? std::string_view(texts_[id]) : ""; }
  TokenKind token_kind(int32_t id) const override;
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  int32_t eot() const override { return eot_; }
  int32_t unk() const override { return unk_; }
  int32_t pad() const override { return pad_; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const override { return add_eos_; }
  int32_t token_id(std::string_view text) const override { return find_token(map_, text); }
  std::string_view chat_template() const override { return chat_template_; }
  bool is_eog(int32_t id) const override { return eog_.count(id) != 0; }

 private:
  struct Fragment {
    int32_t token;  // >= 0: a special token; -1: raw text [offset, offset + length)
    size_t offset, length;
  };

  bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
  bool read_tokens(const gguf::ModelFiles& f, std::string* error);
  void read_special_ids(const gguf::ModelFiles& f);
  void detect_special_tokens(const gguf::ModelFiles& f);
  std::string piece_for_cache(int32_t id) const;
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void tokenize_bpe(std::string_view text, std::vector<int32_t>& out) const;

  bool spm_ = false;  // else byte-level BPE
  std::string model_name_, pre_name_, chat_template_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<uint32_t> attrs_;
  TokenMap map_;
  std::vector<std::string> pieces_;      // token_to_piece(id, special = true)
  std::vector<int32_t> special_order_;   // control / user-defined / unknown, longest text first
  std::unordered_set<int32_t> eog_;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1, sep_ = -1, mask_ = -1;
  int32_t fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1, fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, clean_spaces_ = false;
  bool escape_whitespaces_ = false;
  std::vector<Stage> stages_;
  BpeModel bpe_;
  SpmModel spm_model_;
};

bool VocabImpl::load(const gguf::ModelFiles& f, std::string* error) {
  const auto fail = [&](std::string msg) {
    if (error) *error = "tokenizer: " + msg;
    return false;
  };
  std::string err;
  const auto model = f.get_string("tokenizer.ggml.model", &err);
  if (!model) return fail(err.empty() ? "tokenizer.ggml.model is missing" : err);
  model_name_ = std::string(*model);
  pre_name_ = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));
  if (auto t = f.get_string("tokenizer.chat_template")) chat_template_ = std::string(*t);

  PreConfig pre;
  if (model_name_ == "llama") {
    spm_ = true;
    bos_ = 1, eos_ = 2, unk_ = 0;
    add_space_prefix_ = true;
    add_bos_ = true;
  } else if (model_name_ == "gpt2" || model_name_ == "gemma4") {
    if (model_name_ == "gemma4") pre_name_ = "gemma4";  // llama.cpp ignores the file's value
    if (!pre_config(pre_name_, &pre)) return fail("unsupported pre-tokenizer '" + pre_name_ + "'");
    if (model_name_ == "gpt2") bos_ = pre.no_default_bos ? -1 : 11, eos_ = 11;
    clean_spaces_ = pre.clean_spaces;
    add_bos_ = pre.add_bos;
    escape_whitespaces_ = pre.escape_whitespaces;
    stages_ = pre.stages;
  } else {
    return fail("unsupported tokenizer model '" + model_name_ + "'");
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) add_space_prefix_ = *v;

  if (!read_tokens(f, error)) return false;
  read_special_ids(f);
  if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) add_bos_ = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) add_eos_ = *v;
  if (pre.force_bos) add_bos_ = true;
  if (add_bos_ && bos_ < 0) return fail("tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (add_eos_ && eos_ < 0) return fail("tokenizer.ggml.add_eos_token is true but there is no EOS token");
  detect_special_tokens(f);

  if (spm_) {
    spm_model_.build(&scores_, &map_, unk_);
  } else {
    const gguf::MetaArray* merges = f.get_array("tokenizer.ggml.merges", &err);
    if (!merges || merges->elem_type != gguf::ValueType::STRING)
      return fail(err.empty() ? "tokenizer.ggml.merges is missing or not a string array" : err);
    if (!bpe_.build(texts_, map_, merges->strings, pre.ignore_merges, pre.byte_encode,
                    pre.newline_words, &err))
      return fail(err);
  }
  return true;
}

bool VocabImpl::read_tokens(const gguf::ModelFiles& f, std::string* error) {
  const auto fail = [&](std::string msg) {
    if (error) *error = "tokenizer: " + msg;
    return false;
  };
  const gguf::MetaArray* tokens = f.get_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->elem_type != gguf::ValueType::STRING)
    return fail("tokenizer.ggml.tokens is missing or not a string array");
  const size_t n = tokens->strings.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) return fail("tokenizer.ggml.tokens has a bad size");

  const gguf::MetaArray* scores = f.get_array("tokenizer.ggml.scores");
  if (scores && scores->elem_type != gguf::ValueType::F32 && scores->elem_type != gguf::ValueType::I32)
    return fail("tokenizer.ggml.scores must be an f32 or i32 array");
  if (scores && scores->count < n) return fail("tokenizer.ggml.scores has fewer entries than tokens");
  const gguf::MetaArray* types = f.get_array("tokenizer.ggml.token_type");
  if (types && types->elem_type != gguf::ValueType::I32) return fail("tokenizer.ggml.token_type must be an i32 array");
  if (types && types->count < n) return fail("tokenizer.ggml.token_type has fewer entries than tokens");

  texts_.resize(n);
  scores_.assign(n, 0.0f);
  attrs_.assign(n, kAttrNormal);
  map_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& t = texts_[i];
    t = std::string(tokens->strings[i]);
    if (t.empty()) t = "[EMPTY_" + std::to_string(i) + "]";
    if (scores) {
      if (scores->elem_type == gguf::ValueType::F32) {
        std::memcpy(&scores_[i], scores->raw + 4 * i, 4);
      } else {
        int32_t v;
        std::memcpy(&v, scores->raw + 4 * i, 4);
        scores_[i] = static_cast<float>(v);
      }
    }
    if (types) {
      int32_t ty;
      std::memcpy(&ty, types->raw + 4 * i, 4);
      switch (ty) {
        case 1: attrs_[i] = kAttrNormal; break;
        case 2: attrs_[i] = kAttrUnknown; break;
        case 3: attrs_[i] = kAttrControl; break;
        case 4: attrs_[i] = kAttrUserDefined; break;
        case 5: attrs_[i] = kAttrUnused; break;
        case 6: attrs_[i] = kAttrByte; break;
        default: attrs_[i] = kAttrUndefined; break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    auto [it, fresh] = map_.emplace(texts_[i], static_cast<int32_t>(i));
    if (!fresh)
      return fail("duplicate token '" + texts_[i] + "' (ids " + std::to_string(it->second) + " and " +
                  std::to_string(i) + ")");
  }
  return true;
}

void VocabImpl::read_special_ids(const gguf::ModelFiles& f) {
  const struct {
    const char* key;
    int32_t* id;
  } keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},        {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},        {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},    {"tokenizer.ggml.seperator_token_id", &sep_},
      {"tokenizer.ggml.padding_token_id", &pad_},    {"tokenizer.ggml.mask_token_id", &mask_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_}, {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_}, {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_}, {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},  {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (const auto& k : keys) {
    if (*k.id >= n_tokens()) *k.id = -1;  // a default outside the vocabulary
    if (auto v = f.get_int(k.key); v && *v >= 0 && *v < n_tokens()) *k.id = static_cast<int32_t>(*v);
  }
}

// llama.cpp's load-time fixups: special tokens found by their text (forced to
// CONTROL), the end-of-generation set, the gpt-oss / o200k / gemma4 attribute
// overrides, the special-token order for partitioning, the piece cache, and
// the per-model lstrip / rstrip attributes.
void VocabImpl::detect_special_tokens(const gguf::ModelFiles& f) {
  const auto make_control = [&](int32_t id) { attrs_[id] |= kAttrControl; };
  // The first token (in the order of `texts`) found in the vocabulary.
  const auto detect = [&](int32_t& slot, std::span<const std::string_view> texts) {
    if (slot >= 0) return;
    for (std::string_view t : texts) {
      if (int32_t id = find_token(map_, t); id >= 0) {
        slot = id;
        make_control(id);
        return;
      }
    }
  };
  detect(eot_, kEotTexts);
  detect(eom_, kEomTexts);
  detect(fim_pre_, kFimPreTexts);
  detect(fim_suf_, kFimSufTexts);
  detect(fim_mid_, kFimMidTexts);
  detect(fim_pad_, kFimPadTexts);
  detect(fim_rep_, kFimRepTexts);
  detect(fim_sep_, kFimSepTexts);

  for (int32_t id = 0; id < n_tokens(); ++id)
    if ((attrs_[id] & kAttrControl) && texts_[id].find("unused") != std::string::npos) attrs_[id] |= kAttrUnused;

  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_})
    if (id >= 0) eog_.insert(id);
  for (std::string_view t : kEogTexts) {
    if (int32_t id = find_token(map_, t); id >= 0) {
      eog_.insert(id);
      make_control(id);
    }
  }
  for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})  // gpt-oss
    if (int32_t id = find_token(map_, t); id >= 0) attrs_[id] = kAttrUserDefined;
  for (int32_t id : {eos_, eot_, eom_})
    if (id >= 0) eog_.insert(id);
  const auto eog_text = [&](std::string_view t) {
    int32_t id = find_token(map_, t);
    return id >= 0 && eog_.count(id) ? id : -1;
  };
  // o200k_harmony / solar-open: <|end|> is not an end of generation there.
  const int32_t end_id = eog_text("<|end|>");
  const bool has_call = eog_text("<|call|>") >= 0 || eog_text("<|calls|>") >= 0;
  if (end_id >= 0 && has_call && (eog_text("<|return|>") >= 0 || eog_text("<|flush|>") >= 0)) {
    eog_.erase(end_id);
    attrs_[end_id] = kAttrUserDefined;
  }
  // gemma4 / paddleocr: </s> is not an end of generation there.
  if (const int32_t s_id = eog_text("</s>"); s_id >= 0 && eog_text("<|tool_response>") >= 0) {
    eog_.erase(s_id);
    attrs_[s_id] = kAttrNormal;
  }

  for (int32_t id = 0; id < n_tokens(); ++id)
    if (attrs_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_order_.push_back(id);
  std::stable_sort(special_order_.begin(), special_order_.end(),
                   [&](int32_t a, int32_t b) { return texts_[a].size() > texts_[b].size(); });

  pieces_.resize(texts_.size());
  for (int32_t id = 0; id < n_tokens(); ++id) pieces_[id] = piece_for_cache(id);

  std::string name(f.get_string("general.name").value_or(""));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string arch(f.get_string("general.architecture").value_or(""));
  const auto contains_any = [](std::string_view s, std::initializer_list<std::string_view> subs) {
    for (std::string_view x : subs)
      if (s.find(x) != std::string_view::npos) return true;
    return false;
  };
  const auto set_attr = [&](std::string_view text, uint32_t attr, bool on) {
    if (int32_t id = find_token(map_, text); id >= 0) attrs_[id] = on ? (attrs_[id] | attr) : (attrs_[id] & ~attr);
  };
  if (contains_any(pre_name_, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (int32_t id : special_order_) attrs_[id] |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRstrip, false);
  } else if (contains_any(name, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
}

std::string VocabImpl::piece_for_cache(int32_t id) const {
  const uint32_t attr = attrs_[id];
  const std::string& text = texts_[id];
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    if (spm_ || escape_whitespaces_) {
      std::string s = text;
      replace_all(s, kSpaceMark, " ");
      return s;
    }
    // Byte-level text back to bytes (llama.cpp's llama_decode_text).
    std::string out;
    for (size_t i = 0; i < text.size();) {
      uint32_t cp;
      const size_t n = unicode::decode_one(text, i, &cp);
      i += n;
      const int b = BpeModel::byte_from_cp(cp);
      if (b >= 0) {
        out += static_cast<char>(b);
        continue;
      }
      std::string utf8;
      unicode::append_utf8(utf8, cp);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) {
        static const char* hex = "0123456789abcdef";
        out += hex[c >> 4];
        out += hex[c & 15];
      }
      out += text + "]";
    }
    return out;
  }
  if (attr & kAttrByte) {
    const std::string hex = text.size() > 3 ? text.substr(3, 2) : std::string();
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return "";
}

TokenKind VocabImpl::token_kind(int32_t id) const {
  if (!valid(id)) return TokenKind::Undefined;
  const uint32_t a = attrs_[id];
  if (a & kAttrControl) return TokenKind::Control;
  if (a & kAttrUserDefined) return TokenKind::UserDefined;
  if (a & kAttrUnknown) return TokenKind::Unknown;
  if (a & kAttrByte) return TokenKind::Byte;
  if (a & kAttrUnused) return TokenKind::Unused;
  if (a & kAttrNormal) return TokenKind::Normal;
  return TokenKind::Undefined;
}

// llama.cpp's tokenizer_st_partition: for each special token, longest first,
// every remaining raw-text fragment is split at each occurrence of its text.
// Control and unknown-type tokens take part only with parse_special.
std::vector<VocabImpl::Fragment> VocabImpl::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags, next;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  for (int32_t id : special_order_) {
    const uint32_t attr = attrs_[id];
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tt = texts_[id];
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = fr.offset;
      const size_t end = fr.offset + fr.length;
      for (;;) {
        const size_t hit = text.substr(0, end).find(tt, pos);
        if (hit == std::string_view::npos) break;
        size_t left_len = hit - pos;
        if (attr & kAttrLstrip)
          while (left_len > 0 && c_isspace(text[pos + left_len - 1])) --left_len;
        if (left_len > 0) next.push_back({-1, pos, left_len});
        next.push_back({id, 0, 0});
        pos = hit + tt.size();
        if (attr & kAttrRstrip)
          while (pos < end && c_isspace(text[pos])) ++pos;
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

void VocabImpl::tokenize_bpe(std::string_view text, std::vector<int32_t>& out) const {
  std::string escaped;
  if (escape_whitespaces_) {
    escaped.assign(text);
    replace_all(escaped, " ", kSpaceMark);
    text = escaped;
  }
  std::vector<uint32_t> cps, offsets, ends;
  unicode::decode(text, &cps, &offsets);
  pretokenize(stages_, cps, &ends);
  BpeScratch scratch;
  uint32_t begin = 0;
  for (uint32_t end : ends) {
    // Words keep their raw bytes, so even invalid UTF-8 round-trips.
    bpe_.encode_word(text.substr(offsets[begin], offsets[end] - offsets[begin]), scratch, out);
    begin = end;
  }
}

std::vector<int32_t> VocabImpl::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  const std::vector<Fragment> frags = partition(text, parse_special);
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  bool prev_special = true;  // SPM: a space is prefixed to text at the start or after a special token
  std::string buf;
  for (const Fragment& fr : frags) {
    if (fr.token >= 0) {
      out.push_back(fr.token);
      prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(fr.offset, fr.length);
    if (spm_) {
      buf.clear();
      if (add_space_prefix_ && prev_special) buf += ' ';
      buf.append(piece);
      replace_all(buf, " ", kSpaceMark);
      spm_model_.encode(buf, out);
      prev_special = false;
    } else {
      tokenize_bpe(piece, out);
    }
  }
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string VocabImpl::token_to_piece(int32_t id, bool render_special) const {
  if (!valid(id)) return "";
  if (!render_special && (attrs_[id] & (kAttrUnknown | kAttrControl))) return "";
  return pieces_[id];
}

std::string VocabImpl::detokenize(std::span<const int32_t> ids, bool remove_special, bool unparse_special) const {
  bool remove_space = add_space_prefix_;  // SPM: drop the space the tokenizer prefixed
  if (remove_special && add_bos_ && !ids.empty() && ids.front() == bos_) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && add_eos_ && !ids.empty() && ids.back() == eos_) ids = ids.subspan(0, ids.size() - 1);

  std::string text;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, unparse_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    remove_space = false;
    text += piece;
  }
  if (!clean_spaces_ || text.empty()) return text;

  // llama.cpp's clean_up_tokenization_spaces, three in-place passes.
  size_t total = 1;
  for (size_t i = 1; i < text.size(); ++i) {  // " ?", " !", " .", " ," lose the space
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  const size_t total2 = total;
  total = 1;
  for (size_t i = 1; i < total2; ++i) {  // " ' " -> "'"
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  const size_t total3 = total;
  total = 1;
  for (size_t i = 1; i < total3; ++i) {  // " 's", " 'm", " 're", " 've" lose the space
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  text.resize(total);
  return text;
}

}  // namespace

std::unique_ptr<Vocab> Vocab::from_gguf(const gguf::ModelFiles& files, std::string* error) {
  auto v = std::make_unique<VocabImpl>();
  if (!v->load(files, error)) return nullptr;
  return v;
}

}  // namespace guild
