#include "artifact/synth_model.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <unordered_set>

#include "artifact/gguf_writer.h"
#include "artifact/synth_arch.h"
#include "artifact/weight_quant.h"
#include "core/tensor_type.h"

namespace guild::synth {
namespace {

// ---- random numbers ---------------------------------------------------------------

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256**, seeded through splitmix64.
struct Rng {
  uint64_t s[4];
  explicit Rng(uint64_t seed) {
    for (auto& v : s) v = splitmix64(seed);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((next() >> 32) * n >> 32); }
  // Uniform in (0, 1].
  float unit() { return (static_cast<float>(next() >> 40) + 1.0f) * (1.0f / 16777216.0f); }
};

// n samples of N(0, sigma) by the Box-Muller transform.
void fill_normal(Rng& rng, float sigma, float* out, int64_t n) {
  constexpr float kTwoPi = 6.283185307179586f;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const float r = sigma * std::sqrt(-2.0f * std::log(rng.unit()));
    const float a = kTwoPi * rng.unit();
    out[i] = r * std::cos(a);
    out[i + 1] = r * std::sin(a);
  }
  if (i < n) out[i] = sigma * std::sqrt(-2.0f * std::log(rng.unit())) * std::cos(kTwoPi * rng.unit());
}

uint64_t row_seed(uint64_t seed, size_t tensor, int64_t row) {
  uint64_t s = seed ^ (0xA0761D6478BD642Full * (tensor + 1));
  s = splitmix64(s) ^ static_cast<uint64_t>(row);
  return splitmix64(s);
}

// ---- tensors ----------------------------------------------------------------------

// The type a tensor of rows of n_in gets: the configured one when its block
// divides n_in, else llama-quantize's fallback for that type.
uint32_t storable_type(uint32_t type, int64_t n_in) {
  uint64_t row = 0;
  if (tensor_row_bytes(type, static_cast<uint64_t>(n_in), &row)) return type;
  switch (static_cast<TensorType>(type)) {
    case TensorType::Q4_K: return static_cast<uint32_t>(TensorType::Q5_0);
    case TensorType::Q5_K: return static_cast<uint32_t>(TensorType::Q5_1);
    case TensorType::Q6_K: return static_cast<uint32_t>(TensorType::Q8_0);
    default: break;
  }
  if (tensor_type_info(type).block_elems != 256) return type;
  const uint32_t iq4_nl = static_cast<uint32_t>(TensorType::IQ4_NL);
  return weight_quant_supported(iq4_nl) ? iq4_nl : static_cast<uint32_t>(TensorType::Q4_0);
}

struct Tensors {
  std::vector<TensorSpec> specs;     // types after the fallbacks
  std::vector<uint32_t> configured;  // the types the architecture asked for
};

Tensors tensor_specs(const SynthArch& arch, const MoeModelConfig& c) {
  Tensors t;
  t.specs = arch.tensors(c);
  for (TensorSpec& s : t.specs) {
    t.configured.push_back(s.type);
    s.type = storable_type(s.type, s.ne[0]);
  }
  return t;
}

uint64_t tensor_bytes(const TensorSpec& s) {
  uint64_t row = 0;
  tensor_row_bytes(s.type, static_cast<uint64_t>(s.ne[0]), &row);
  uint64_t rows = 1;
  for (size_t d = 1; d < s.ne.size(); ++d) rows *= static_cast<uint64_t>(s.ne[d]);
  return row * rows;
}

uint64_t elems(const TensorSpec& s) {
  uint64_t n = 1;
  for (int64_t d : s.ne) n *= static_cast<uint64_t>(d);
  return n;
}

std::string lower(std::string_view s) {
  std::string out;
  for (char ch : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// ---- tokenizer --------------------------------------------------------------------

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
// others for code points 256, 257, ... in byte order.
std::vector<std::string> byte_texts() {
  std::vector<std::string> out(256);
  uint32_t extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    append_utf8(out[b], printable ? static_cast<uint32_t>(b) : extra++);
  }
  return out;
}

}  // namespace

SynthVocab make_vocab(int n_vocab, uint64_t seed) {
  SynthVocab v;
  const int n_special = 3;
  const int n_regular = std::max(256, n_vocab - n_special);
  v.tokens = byte_texts();
  v.types.assign(256, 1);
  // Merge material: letters, and a leading space ('Ġ', byte 0x20) so merged
  // tokens look like the words and word starts of a real vocabulary (the
  // qwen2 pre-tokenizer splits digits and punctuation apart anyway).
  std::vector<int32_t> word_start, word_part;  // ids usable at the start / inside a word
  for (int b = 'a'; b <= 'z'; ++b) { word_start.push_back(b); word_part.push_back(b); }
  for (int b = 'A'; b <= 'Z'; ++b) { word_start.push_back(b); word_part.push_back(b); }
  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  std::vector<size_t> byte_len(256, 1);
  Rng rng(seed ^ 0x70C0FFEEull);
  const std::string space = v.tokens[' '];
  // First the space-prefixed letters, as real vocabularies have them early.
  for (int b = 'a'; b <= 'z' && static_cast<int>(v.tokens.size()) < n_regular; ++b) {
    const std::string text = space + v.tokens[b];
    v.merges.push_back(space + " " + v.tokens[b]);
    v.tokens.push_back(text);
    v.types.push_back(1);
    seen.insert(text);
    byte_len.push_back(2);
    word_start.push_back(static_cast<int32_t>(v.tokens.size() - 1));
  }
  while (static_cast<int>(v.tokens.size()) < n_regular) {
    // Prefer recent (longer) tokens on the left, short parts on the right.
    const bool recent = (rng.next() & 3) != 0 && word_start.size() > 64;
    const size_t ls = word_start.size();
    const int32_t a = recent ? word_start[ls - 1 - rng.below(static_cast<uint32_t>(std::min<size_t>(ls, 4096)))]
                             : word_start[rng.below(static_cast<uint32_t>(ls))];
    const size_t ps = word_part.size();
    const int32_t b = (rng.next() & 1) ? word_part[rng.below(static_cast<uint32_t>(std::min<size_t>(ps, 52)))]
                                       : word_part[rng.below(static_cast<uint32_t>(ps))];
    if (byte_len[a] + byte_len[b] > 16) continue;
    std::string text = v.tokens[a] + v.tokens[b];
    if (!seen.insert(text).second) continue;
    v.merges.push_back(v.tokens[a] + " " + v.tokens[b]);
    v.tokens.push_back(std::move(text));
    v.types.push_back(1);
    byte_len.push_back(byte_len[a] + byte_len[b]);
    const int32_t id = static_cast<int32_t>(v.tokens.size() - 1);
    word_start.push_back(id);
    if (v.tokens[a].rfind(space, 0) != 0) word_part.push_back(id);  // no leading space: usable inside words
  }
  v.endoftext = static_cast<int32_t>(v.tokens.size());
  v.tokens.push_back("<|endoftext|>");
  v.im_start = v.endoftext + 1;
  v.tokens.push_back("<|im_start|>");
  v.im_end = v.endoftext + 2;
  v.tokens.push_back("<|im_end|>");
  v.types.insert(v.types.end(), {3, 3, 3});
  return v;
}

// ---- shared helpers of the architecture files ---------------------------------------

std::string blk(int l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

Scales::Scales(const MoeModelConfig& c)
    : block(1.0f / std::sqrt(2.0f * static_cast<float>(c.n_layer))), in_e(1.0f / std::sqrt(static_cast<float>(c.n_embd))) {}

float Scales::out(int64_t width) const { return block / std::sqrt(static_cast<float>(width)); }

float Scales::down(int64_t width) const { return block / (0.6f * std::sqrt(static_cast<float>(width))); }

void add_attention(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, const AttentionTensors& a, Role role) {
  const Scales s(c);
  const int64_t E = c.n_embd;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  t.push_back({blk(l, "attn_norm.weight"), c.norm_type, {E}, 0.0f, 1.0f, role});
  const struct { const char* w; const char* b; int64_t n_out; } qkv[3] = {
      {"attn_q.weight", "attn_q.bias", q_dim}, {"attn_k.weight", "attn_k.bias", kv_dim}, {"attn_v.weight", "attn_v.bias", kv_dim}};
  for (const auto& m : qkv) {
    t.push_back({blk(l, m.w), c.dense_type, {E, m.n_out}, s.in_e, 1.0f, role});
    if (a.qkv_bias) t.push_back({blk(l, m.b), c.norm_type, {m.n_out}, a.bias_sigma, 1.0f, role});
  }
  t.push_back({blk(l, "attn_output.weight"), c.dense_type, {q_dim, E}, s.out(q_dim), 1.0f, role});
  if (a.out_bias) t.push_back({blk(l, "attn_output.bias"), c.norm_type, {E}, a.bias_sigma * s.block, 1.0f, role});
  if (a.qk_norm) {
    t.push_back({blk(l, "attn_q_norm.weight"), c.norm_type, {c.head_dim}, 0.0f, 1.0f, role});
    t.push_back({blk(l, "attn_k_norm.weight"), c.norm_type, {c.head_dim}, 0.0f, 1.0f, role});
  }
}

void add_routed_experts(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, bool router_bias, bool biases,
                        Role router_role) {
  const Scales s(c);
  const int64_t E = c.n_embd, F = c.n_ff_exp, X = c.n_expert;
  t.push_back({blk(l, "ffn_gate_inp.weight"), c.router_type, {E, X}, s.in_e, 1.0f, router_role});
  if (router_bias) t.push_back({blk(l, "ffn_gate_inp.bias"), c.norm_type, {X}, 0.1f, 1.0f, router_role});
  const Role role = router_role == Role::Nextn ? Role::Nextn : Role::Experts;
  t.push_back({blk(l, "ffn_gate_exps.weight"), c.expert_type, {E, F, X}, s.in_e, 1.0f, role});
  if (biases) t.push_back({blk(l, "ffn_gate_exps.bias"), c.norm_type, {F, X}, 0.1f, 1.0f, role});
  t.push_back({blk(l, "ffn_up_exps.weight"), c.expert_type, {E, F, X}, s.in_e, 1.0f, role});
  if (biases) t.push_back({blk(l, "ffn_up_exps.bias"), c.norm_type, {F, X}, 0.1f, 1.0f, role});
  t.push_back({blk(l, "ffn_down_exps.weight"), c.expert_down_type, {F, E, X}, s.down(F), 1.0f, role});
  if (biases) t.push_back({blk(l, "ffn_down_exps.bias"), c.norm_type, {E, X}, 0.1f * s.block, 1.0f, role});
}

void add_embedding(std::vector<TensorSpec>& t, const MoeModelConfig& c) {
  t.push_back({"token_embd.weight", c.embd_type, {c.n_embd, c.n_vocab}, 1.0f, 1.0f, Role::Embedding});
}

void add_head(std::vector<TensorSpec>& t, const MoeModelConfig& c) {
  const Scales s(c);
  t.push_back({"output_norm.weight", c.norm_type, {c.n_embd}, 0.0f, 1.0f});
  t.push_back({"output.weight", c.output_type, {c.n_embd, c.n_vocab}, 3.0f * s.in_e, 1.0f, Role::Output});
}

void add_common_keys(const MoeModelConfig& c, int n_blocks, int ff_length, gguf::GgufWriter& w) {
  const std::string a = c.arch;
  w.add_u32(a + ".block_count", static_cast<uint32_t>(n_blocks));
  w.add_u32(a + ".context_length", static_cast<uint32_t>(c.n_ctx_train));
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  if (ff_length > 0) w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(ff_length));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.add_f32(a + ".rope.freq_base", c.rope_base);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_u32(a + ".expert_count", static_cast<uint32_t>(c.n_expert));
  w.add_u32(a + ".expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  w.add_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
}

std::string glm4moe_fields_set(const MoeModelConfig& c) {
  std::string set;
  auto note = [&](bool on, const char* what) {
    if (on) set += (set.empty() ? "" : ", ") + std::string(what);
  };
  note(c.n_dense_lead != 0, "leading dense layers");
  note(c.n_expert_shared != 0 || c.n_ff_shexp != 0, "shared experts");
  note(c.n_nextn != 0, "nextn blocks");
  note(c.rope_dims != 0 && c.rope_dims != c.head_dim, "partial rope");
  return set.empty() ? "" : c.arch + " has no " + set + " (glm4moe only)";
}

namespace {
const SynthArch* const kArchs[] = {&kQwen3MoeSynth, &kGptOssSynth, &kGlm4MoeSynth};
}  // namespace

const SynthArch* find_synth_arch(const std::string& name) {
  for (const SynthArch* a : kArchs)
    if (name == a->name) return a;
  return nullptr;
}

// ---- config -----------------------------------------------------------------------

void set_shape(const MoeShape& s, MoeModelConfig* c) {
  c->n_layer = s.n_layer;
  c->n_embd = s.n_embd;
  c->n_head = s.n_head;
  c->n_head_kv = s.n_head_kv;
  c->head_dim = s.head_dim;
  c->n_expert = s.n_expert;
  c->n_expert_used = s.n_expert_used;
  c->n_ff_exp = s.n_ff_exp;
  c->n_vocab = s.n_vocab;
}

bool apply_preset(const std::string& name, MoeModelConfig* c) {
  for (const SynthArch* a : kArchs) {
    MoeModelConfig candidate = *c;
    if (a->apply_preset(name, &candidate)) {
      *c = candidate;
      return true;
    }
  }
  return false;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const SynthArch* a : kArchs)
    for (std::string& n : a->presets()) out.push_back(std::move(n));
  return out;
}

bool parse_type(const std::string& name, uint32_t* type_id) {
  const std::string want = lower(name);
  for (uint32_t id = 0; id < kTensorTypeIdLimit; ++id) {
    const std::string tn = lower(tensor_type_info(id).name);
    if (!tn.empty() && tn == want && weight_quant_supported(id)) {
      *type_id = id;
      return true;
    }
  }
  return false;
}

std::string validate(const MoeModelConfig& c) {
  const SynthArch* arch = find_synth_arch(c.arch);
  if (!arch) return "unknown architecture '" + c.arch + "' (qwen3moe, gpt-oss, glm4moe)";
  auto positive = [](int v) { return v > 0; };
  if (!positive(c.n_layer) || !positive(c.n_embd) || !positive(c.n_head) || !positive(c.n_head_kv) ||
      !positive(c.head_dim) || !positive(c.n_expert) || !positive(c.n_expert_used) || !positive(c.n_ff_exp) ||
      !positive(c.n_ctx_train))
    return "every size must be positive";
  if (c.n_head % c.n_head_kv != 0) return "heads must be a multiple of kv-heads";
  if (c.n_expert_used > c.n_expert) return "experts-used exceeds experts";
  if (c.head_dim % 2 != 0) return "head-dim must be even (rope)";
  if (c.n_vocab < 256 + 3 + 26) return "vocab must be at least 285 (256 byte tokens, merges, 3 control tokens)";
  const std::string problem = arch->validate(c);
  if (!problem.empty()) return problem;
  const Tensors t = tensor_specs(*arch, c);
  for (size_t i = 0; i < t.specs.size(); ++i) {
    const TensorSpec& s = t.specs[i];
    if (!weight_quant_supported(s.type)) return s.name + ": type " + std::string(tensor_type_name(s.type)) + " has no quantizer";
    uint64_t row = 0;
    if (!tensor_row_bytes(s.type, static_cast<uint64_t>(s.ne[0]), &row)) {
      const uint32_t want = t.configured[i];
      std::string msg = s.name + ": row length " + std::to_string(s.ne[0]) + " is not a multiple of the " +
                        std::string(tensor_type_name(want)) + " block (" + std::to_string(tensor_type_info(want).block_elems) + ")";
      if (s.type != want)
        msg += " nor of its fallback " + std::string(tensor_type_name(s.type)) + "'s (" +
               std::to_string(tensor_type_info(s.type).block_elems) + ")";
      return msg;
    }
  }
  return "";
}

ParamCounts count_params(const MoeModelConfig& c) {
  ParamCounts p;
  const SynthArch* arch = find_synth_arch(c.arch);
  if (!arch) return p;
  for (const TensorSpec& s : tensor_specs(*arch, c).specs) {
    const uint64_t n = elems(s);
    p.total += n;
    p.file_bytes += tensor_bytes(s);
    switch (s.role) {
      case Role::Dense: p.active += n; break;
      case Role::Experts: p.active += n / static_cast<uint64_t>(c.n_expert) * static_cast<uint64_t>(c.n_expert_used); break;
      case Role::Embedding: p.active += static_cast<uint64_t>(c.n_embd); break;
      case Role::Output: p.active += n; p.output += n; break;
      case Role::Nextn: p.nextn += n; break;
    }
  }
  return p;
}

std::vector<std::string> type_fallbacks(const MoeModelConfig& c) {
  std::vector<std::string> out;
  const SynthArch* arch = find_synth_arch(c.arch);
  if (!arch) return out;
  const Tensors t = tensor_specs(*arch, c);
  std::vector<std::pair<std::string, int>> kinds;  // "<name>: a -> b", count (first-seen order)
  for (size_t i = 0; i < t.specs.size(); ++i) {
    if (t.specs[i].type == t.configured[i]) continue;
    std::string name = t.specs[i].name;
    if (name.rfind("blk.", 0) == 0) name = name.substr(name.find('.', 4) + 1);  // the name within a block
    const std::string kind = name + ": " + std::string(tensor_type_name(t.configured[i])) + " -> " +
                             std::string(tensor_type_name(t.specs[i].type));
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) kinds.emplace_back(kind, 1);
    else ++it->second;
  }
  for (const auto& [kind, n] : kinds) out.push_back(kind + " (x" + std::to_string(n) + ")");
  return out;
}

bool write_moe_model(const MoeModelConfig& c, const std::string& path, int n_threads, std::string* error,
                     void (*progress)(const char* msg)) {
  const std::string problem = validate(c);
  if (!problem.empty()) {
    if (error) *error = problem;
    return false;
  }
  const SynthArch& arch = *find_synth_arch(c.arch);
  const std::vector<TensorSpec> specs = tensor_specs(arch, c).specs;
  const SynthVocab vocab = make_vocab(c.n_vocab, c.seed);

  gguf::GgufWriter w;
  w.add_string("general.architecture", c.arch);
  w.add_string("general.name", c.name);
  w.add_string("general.description", "random weights from guild-gen-model (seed " + std::to_string(c.seed) + ")");
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.alignment", 32);
  arch.metadata(c, w);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "qwen2");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add("tokenizer.ggml.token_type", gguf::GgufValue::i32_array(vocab.types));
  w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.im_end));
  w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.endoftext));
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.endoftext));
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_string("tokenizer.chat_template",
               "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
               "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}");

  for (const TensorSpec& s : specs)
    if (!w.add_tensor_streamed(s.name, s.type, s.ne, error)) return false;

  std::atomic<uint64_t> done_bytes{0};
  uint64_t total_bytes = 0;
  for (const TensorSpec& s : specs) total_bytes += tensor_bytes(s);
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> last_pct{-1};

  auto produce = [&](size_t ti, int64_t row0, int64_t n_rows, uint8_t* dst) {
    const TensorSpec& s = specs[ti];
    const int64_t n_in = s.ne[0];
    uint64_t row_bytes = 0;
    tensor_row_bytes(s.type, static_cast<uint64_t>(n_in), &row_bytes);
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_rows; ++r) {
      if (s.sigma > 0.0f) {
        Rng rng(row_seed(c.seed, ti, row0 + r));
        fill_normal(rng, s.sigma, row.data(), n_in);
      } else {
        std::fill(row.begin(), row.end(), s.value);
      }
      if (!quantize_weight_row(s.type, row.data(), n_in, dst + static_cast<uint64_t>(r) * row_bytes)) return false;
    }
    const uint64_t done = done_bytes.fetch_add(static_cast<uint64_t>(n_rows) * row_bytes) + static_cast<uint64_t>(n_rows) * row_bytes;
    if (progress && total_bytes > 0) {
      const int pct = static_cast<int>(done * 100 / total_bytes);
      int prev = last_pct.load();
      if (pct / 5 > prev / 5 && last_pct.compare_exchange_strong(prev, pct)) {
        const double s_el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char msg[128];
        std::snprintf(msg, sizeof msg, "%3d%%  %.2f of %.2f GiB  %.1f s", pct, done / 1073741824.0, total_bytes / 1073741824.0, s_el);
        progress(msg);
      }
    }
    return true;
  };
  const int threads = n_threads > 0 ? n_threads : std::max(1u, std::thread::hardware_concurrency());
  return w.write_streamed(path, produce, threads, 4u << 20, error);
}

}  // namespace guild::synth
