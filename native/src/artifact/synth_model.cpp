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

struct TensorSpec {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> ne;
  float sigma = 0.0f;  // N(0, sigma) entries; 0 = every entry is `value`
  float value = 1.0f;
};

std::string blk(int l, const char* name) { return "blk." + std::to_string(l) + "." + name; }

// Weight scales. Block inputs are RMS-normed (RMS 1), so a matrix with
// entries N(0, 1/sqrt(n_in)) keeps RMS 1. Each attention and FFN block adds
// about RMS 1/sqrt(2 n_layer) to the residual stream, so after all layers
// the stream's RMS stays near sqrt(2) whatever the depth; the output head's
// logits have a standard deviation of about 3.
std::vector<TensorSpec> tensor_specs(const MoeModelConfig& c) {
  const int64_t E = c.n_embd, V = c.n_vocab, F = c.n_ff_exp, X = c.n_expert;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  const float block = 1.0f / std::sqrt(2.0f * static_cast<float>(c.n_layer));
  const float in_e = 1.0f / std::sqrt(static_cast<float>(E));
  // silu(g) * u for g, u ~ N(0, 1) has RMS ~0.6: the down projection makes up for it.
  const float down = block / (0.6f * std::sqrt(static_cast<float>(F)));
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", c.embd_type, {E, V}, 1.0f});
  for (int l = 0; l < c.n_layer; ++l) {
    t.push_back({blk(l, "attn_norm.weight"), c.norm_type, {E}, 0.0f, 1.0f});
    t.push_back({blk(l, "attn_q.weight"), c.dense_type, {E, q_dim}, in_e});
    t.push_back({blk(l, "attn_k.weight"), c.dense_type, {E, kv_dim}, in_e});
    t.push_back({blk(l, "attn_v.weight"), c.dense_type, {E, kv_dim}, in_e});
    t.push_back({blk(l, "attn_output.weight"), c.dense_type, {q_dim, E}, block / std::sqrt(static_cast<float>(q_dim))});
    t.push_back({blk(l, "attn_q_norm.weight"), c.norm_type, {c.head_dim}, 0.0f, 1.0f});
    t.push_back({blk(l, "attn_k_norm.weight"), c.norm_type, {c.head_dim}, 0.0f, 1.0f});
    t.push_back({blk(l, "ffn_norm.weight"), c.norm_type, {E}, 0.0f, 1.0f});
    t.push_back({blk(l, "ffn_gate_inp.weight"), c.router_type, {E, X}, in_e});
    t.push_back({blk(l, "ffn_gate_exps.weight"), c.expert_type, {E, F, X}, in_e});
    t.push_back({blk(l, "ffn_up_exps.weight"), c.expert_type, {E, F, X}, in_e});
    t.push_back({blk(l, "ffn_down_exps.weight"), c.expert_down_type, {F, E, X}, down});
  }
  t.push_back({"output_norm.weight", c.norm_type, {E}, 0.0f, 1.0f});
  t.push_back({"output.weight", c.output_type, {E, V}, 3.0f * in_e});
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

bool apply_preset(const std::string& name, MoeModelConfig* c) {
  if (name == "qwen3-30b-a3b") {
    c->name = "synthetic-qwen3-30b-a3b";
    c->n_layer = 48;
    c->n_embd = 2048;
    c->n_head = 32;
    c->n_head_kv = 4;
    c->head_dim = 128;
    c->n_expert = 128;
    c->n_expert_used = 8;
    c->n_ff_exp = 768;
    c->n_vocab = 151936;
    c->n_ctx_train = 40960;
    c->expert_type = c->embd_type = static_cast<uint32_t>(TensorType::Q4_K);
    c->expert_down_type = c->expert_type;
    c->dense_type = c->output_type = static_cast<uint32_t>(TensorType::Q6_K);
    c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
    return true;
  }
  if (name == "bench-1b") {
    // 18 x (64 experts x 3 x 1024 x 256) = 906 M expert parameters, 47 M
    // attention, 66 M embedding + head: 1.02 B in all; per token 8 experts
    // (113 M) + attention + head = 0.19 B.
    c->name = "synthetic-bench-1b";
    c->n_layer = 18;
    c->n_embd = 1024;
    c->n_head = 16;
    c->n_head_kv = 4;
    c->head_dim = 64;
    c->n_expert = 64;
    c->n_expert_used = 8;
    c->n_ff_exp = 256;
    c->n_vocab = 32000;
    c->n_ctx_train = 4096;
    c->expert_type = c->embd_type = static_cast<uint32_t>(TensorType::Q4_K);
    c->expert_down_type = c->expert_type;
    c->dense_type = static_cast<uint32_t>(TensorType::Q8_0);
    c->output_type = static_cast<uint32_t>(TensorType::Q6_K);
    c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
    return true;
  }
  return false;
}

bool parse_type(const std::string& name, uint32_t* type_id) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (uint32_t id = 0; id < kTensorTypeIdLimit; ++id) {
    std::string tn(tensor_type_info(id).name);
    for (char& ch : tn) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!tn.empty() && tn == lower && weight_quant_supported(id)) {
      *type_id = id;
      return true;
    }
  }
  return false;
}

std::string validate(const MoeModelConfig& c) {
  auto positive = [](int v) { return v > 0; };
  if (!positive(c.n_layer) || !positive(c.n_embd) || !positive(c.n_head) || !positive(c.n_head_kv) ||
      !positive(c.head_dim) || !positive(c.n_expert) || !positive(c.n_expert_used) || !positive(c.n_ff_exp) ||
      !positive(c.n_ctx_train))
    return "every size must be positive";
  if (c.n_head % c.n_head_kv != 0) return "heads must be a multiple of kv-heads";
  if (c.n_expert_used > c.n_expert) return "experts-used exceeds experts";
  if (c.head_dim % 2 != 0) return "head-dim must be even (rope)";
  if (c.n_vocab < 256 + 3 + 26) return "vocab must be at least 285 (256 byte tokens, merges, 3 control tokens)";
  for (const TensorSpec& s : tensor_specs(c)) {
    if (!weight_quant_supported(s.type)) return s.name + ": type " + std::string(tensor_type_name(s.type)) + " has no quantizer";
    uint64_t row = 0;
    if (!tensor_row_bytes(s.type, static_cast<uint64_t>(s.ne[0]), &row))
      return s.name + ": row length " + std::to_string(s.ne[0]) + " is not a multiple of the " +
             std::string(tensor_type_name(s.type)) + " block (" + std::to_string(tensor_type_info(s.type).block_elems) + ")";
  }
  return "";
}

ParamCounts count_params(const MoeModelConfig& c) {
  ParamCounts p;
  for (const TensorSpec& s : tensor_specs(c)) {
    const uint64_t n = elems(s);
    p.total += n;
    p.file_bytes += tensor_bytes(s);
    if (s.ne.size() == 3) p.active += n / static_cast<uint64_t>(c.n_expert) * static_cast<uint64_t>(c.n_expert_used);
    else if (s.name == "token_embd.weight") p.active += static_cast<uint64_t>(c.n_embd);
    else p.active += n;
  }
  return p;
}

bool write_moe_model(const MoeModelConfig& c, const std::string& path, int n_threads, std::string* error,
                     void (*progress)(const char* msg)) {
  const std::string problem = validate(c);
  if (!problem.empty()) {
    if (error) *error = problem;
    return false;
  }
  const std::vector<TensorSpec> specs = tensor_specs(c);
  const SynthVocab vocab = make_vocab(c.n_vocab, c.seed);

  gguf::GgufWriter w;
  const std::string a = "qwen3moe";
  w.add_string("general.architecture", a);
  w.add_string("general.name", c.name);
  w.add_string("general.description", "random weights from guild-gen-model (seed " + std::to_string(c.seed) + ")");
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.alignment", 32);
  w.add_u32(a + ".block_count", static_cast<uint32_t>(c.n_layer));
  w.add_u32(a + ".context_length", static_cast<uint32_t>(c.n_ctx_train));
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff_exp * c.n_expert_used));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.add_f32(a + ".rope.freq_base", c.rope_base);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_u32(a + ".expert_count", static_cast<uint32_t>(c.n_expert));
  w.add_u32(a + ".expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  w.add_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
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
