// Writes the seed corpora of the fuzz harnesses (native/fuzz/corpus/<name>/)
// from real inputs: tiny models and vocabularies written with the project's
// GGUF writer around the demo model's tokenizer, the build's package
// manifests, a small .gkpkg packed with the package tool's pack function, and
// tokenizer texts with Unicode edge cases. Deterministic: the same sources
// give the same bytes. Usage (docs/FUZZING.md):
//   fuzz_make_seeds DEMO_MODEL.gguf BUILD_PACKAGES_DIR OUT_CORPUS_DIR
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "artifact/weight_quant.h"
#include "core/json.h"
#include "core/tensor_type.h"
#include "packages/archive.h"
#include "packages/manifest.h"
#include "packages/sha256.h"

namespace fs = std::filesystem;
using namespace guild;
using namespace guild::gguf;

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz_make_seeds: %s\n", msg.c_str());
  std::exit(1);
}

void write_bytes(const fs::path& p, const void* data, size_t n) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) die(p.string() + ": cannot write");
  std::printf("%8zu  %s\n", n, p.c_str());
}
void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) { write_bytes(p, b.data(), b.size()); }
void write_text(const fs::path& p, const std::string& s) { write_bytes(p, s.data(), s.size()); }

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------------------
// Vocabularies: the first n tokens of the demo vocabulary (3 specials, the
// 256 byte-level symbols, then merge results in rank order) and the merges
// that build them.

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::vector<float> scores;  // SentencePiece only
  std::string model = "gpt2", pre = "qwen2";
};

Vocab demo_prefix(const ModelFiles& demo, size_t n) {
  Vocab v;
  const MetaArray* tokens = demo.get_array("tokenizer.ggml.tokens");
  const MetaArray* types = demo.get_array("tokenizer.ggml.token_type");
  const MetaArray* merges = demo.get_array("tokenizer.ggml.merges");
  if (!tokens || !types || !merges || tokens->count < n || n < 259) die("the demo model's tokenizer is not as expected");
  for (size_t i = 0; i < n; ++i) {
    v.tokens.emplace_back(tokens->strings[i]);
    int64_t t = 1;
    types->get_i64(i, &t);
    v.types.push_back(static_cast<int32_t>(t));
  }
  for (size_t i = 0; i + 259 < n; ++i) v.merges.emplace_back(merges->strings[i]);
  return v;
}

// A SentencePiece vocabulary: <unk> <s> </s>, the byte tokens, a few pieces.
Vocab spm_vocab() {
  Vocab v;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](std::string t, int32_t type, float score) {
    v.tokens.push_back(std::move(t));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", 2, 0);
  add("<s>", 3, 0);
  add("</s>", 3, 0);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, 6, 0);
  }
  const char* pieces[] = {"\xE2\x96\x81", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "in", "er", "an", "\xE2\x96\x81" "a",
                          "e", "t", "a", "o", "n", "h", "r", "i", "s", "\xE4\xBD\xA0", "\xE5\xA5\xBD"};
  float score = -1;
  for (const char* p : pieces) add(p, 1, score--);
  return v;
}

void add_vocab(GgufWriter& w, const Vocab& v, bool chat_template) {
  w.add_string("tokenizer.ggml.model", v.model);
  w.add_string("tokenizer.ggml.pre", v.pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  w.add("tokenizer.ggml.token_type", GgufValue::i32_array(v.types));
  if (!v.scores.empty()) w.add("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
  if (!v.merges.empty()) w.add_string_array("tokenizer.ggml.merges", v.merges);
  if (v.model == "llama") {
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_u32("tokenizer.ggml.unknown_token_id", 0);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
  } else {
    w.add_u32("tokenizer.ggml.bos_token_id", 0);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_u32("tokenizer.ggml.padding_token_id", 0);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
  }
  if (chat_template)
    w.add_string("tokenizer.chat_template",
                 "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
}

// ---------------------------------------------------------------------------
// Tiny models of the three runners (qwen3moe, qwen3, llama), every tensor the
// standard decoder binds, random weights in the types asked for.

struct ModelSpec {
  std::string arch = "qwen3moe";
  int n_layer = 1, n_embd = 32, n_head = 4, n_head_kv = 2, head_dim = 8;
  int n_expert = 4, n_expert_used = 2, n_ff_exp = 32, n_ff = 32;
  std::vector<bool> dense_layer;  // per layer: dense FFN even with experts
  uint32_t weight_type = 8;       // Q8_0
  uint32_t embd_type = 8;
  uint32_t norm_type = 0;         // F32
  bool tied_output = false;
  uint32_t alignment = 0;         // 0 = default (32)
  std::string rope_scaling;       // "", "linear", "yarn"
  uint64_t seed = 1;
};

struct Rng {
  uint64_t s;
  float next() {  // uniform in [-1, 1)
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
  }
};

void add_weight(GgufWriter& w, Rng& rng, const std::string& name, uint32_t type, std::vector<int64_t> ne, float scale) {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  uint64_t row_bytes = 0;
  if (!tensor_row_bytes(type, static_cast<uint64_t>(ne[0]), &row_bytes)) die(name + ": bad row");
  std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
  std::vector<float> row(static_cast<size_t>(ne[0]));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = scale == 0 ? 1.0f : rng.next() * scale;
    if (!quantize_weight_row(type, row.data(), ne[0], bytes.data() + r * row_bytes)) die(name + ": cannot quantize");
  }
  std::string err;
  if (!w.add_tensor(name, type, ne, bytes, &err)) die(err);
}

std::vector<uint8_t> tiny_model(const ModelSpec& m, const Vocab& v) {
  GgufWriter w;
  std::string err;
  if (m.alignment && !w.set_alignment(m.alignment, &err)) die(err);
  const std::string a = m.arch + ".";
  w.add_string("general.architecture", m.arch);
  w.add_string("general.name", "fuzz-seed-" + m.arch);
  w.add_u32(a + "block_count", static_cast<uint32_t>(m.n_layer));
  w.add_u32(a + "context_length", 256);
  w.add_u32(a + "embedding_length", static_cast<uint32_t>(m.n_embd));
  w.add_u32(a + "attention.head_count", static_cast<uint32_t>(m.n_head));
  w.add_u32(a + "attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  w.add_u32(a + "attention.key_length", static_cast<uint32_t>(m.head_dim));
  w.add_u32(a + "attention.value_length", static_cast<uint32_t>(m.head_dim));
  w.add_u32(a + "rope.dimension_count", static_cast<uint32_t>(m.head_dim));
  w.add_f32(a + "rope.freq_base", 10000.0f);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  const bool llama = m.arch == "llama";
  if (m.n_expert > 0) {
    w.add_u32(a + "expert_count", static_cast<uint32_t>(m.n_expert));
    w.add_u32(a + "expert_used_count", static_cast<uint32_t>(m.n_expert_used));
    if (!llama) w.add_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(m.n_ff_exp));
  }
  // llama + experts: the expert width is feed_forward_length.
  w.add_u32(a + "feed_forward_length", static_cast<uint32_t>(llama && m.n_expert > 0 ? m.n_ff_exp : m.n_ff));
  if (!m.rope_scaling.empty()) {
    w.add_string(a + "rope.scaling.type", m.rope_scaling);
    w.add_f32(a + "rope.scaling.factor", 2.0f);
    w.add_u32(a + "rope.scaling.original_context_length", 128);
    if (m.rope_scaling == "yarn") {
      w.add_f32(a + "rope.scaling.yarn_ext_factor", 1.0f);
      w.add_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
      w.add_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
    }
  }
  add_vocab(w, v, true);

  Rng rng{m.seed};
  const int64_t E = m.n_embd, V = static_cast<int64_t>(v.tokens.size());
  const int64_t q = int64_t(m.n_head) * m.head_dim, kv = int64_t(m.n_head_kv) * m.head_dim;
  add_weight(w, rng, "token_embd.weight", m.embd_type, {E, V}, 0.5f);
  add_weight(w, rng, "output_norm.weight", m.norm_type, {E}, 0);
  if (!m.tied_output) add_weight(w, rng, "output.weight", m.weight_type, {E, V}, 0.3f);
  for (int l = 0; l < m.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add_weight(w, rng, b + "attn_norm.weight", m.norm_type, {E}, 0);
    add_weight(w, rng, b + "attn_q.weight", m.weight_type, {E, q}, 0.3f);
    add_weight(w, rng, b + "attn_k.weight", m.weight_type, {E, kv}, 0.3f);
    add_weight(w, rng, b + "attn_v.weight", m.weight_type, {E, kv}, 0.3f);
    add_weight(w, rng, b + "attn_output.weight", m.weight_type, {q, E}, 0.3f);
    add_weight(w, rng, b + "ffn_norm.weight", m.norm_type, {E}, 0);
    if (!llama) {
      add_weight(w, rng, b + "attn_q_norm.weight", m.norm_type, {m.head_dim}, 0);
      add_weight(w, rng, b + "attn_k_norm.weight", m.norm_type, {m.head_dim}, 0);
    }
    const bool dense = m.n_expert == 0 || (l < static_cast<int>(m.dense_layer.size()) && m.dense_layer[l]);
    if (dense) {
      add_weight(w, rng, b + "ffn_gate.weight", m.weight_type, {E, m.n_ff}, 0.3f);
      add_weight(w, rng, b + "ffn_up.weight", m.weight_type, {E, m.n_ff}, 0.3f);
      add_weight(w, rng, b + "ffn_down.weight", m.weight_type, {m.n_ff, E}, 0.3f);
    } else {
      add_weight(w, rng, b + "ffn_gate_inp.weight", 0, {E, m.n_expert}, 0.3f);
      add_weight(w, rng, b + "ffn_gate_exps.weight", m.weight_type, {E, m.n_ff_exp, m.n_expert}, 0.3f);
      add_weight(w, rng, b + "ffn_up_exps.weight", m.weight_type, {E, m.n_ff_exp, m.n_expert}, 0.3f);
      add_weight(w, rng, b + "ffn_down_exps.weight", m.weight_type, {m.n_ff_exp, E, m.n_expert}, 0.3f);
    }
  }
  return w.to_bytes();
}

// ---------------------------------------------------------------------------
// GGUF reader seeds beyond models: every value type, nested arrays, tensor
// types and shapes, small alignments, a file without data padding, v2.

std::vector<uint8_t> all_value_types() {
  GgufWriter w;
  std::string err;
  if (!w.set_alignment(64, &err)) die(err);
  w.add_u8("t.u8", 200);
  w.add_i8("t.i8", -100);
  w.add_u16("t.u16", 65000);
  w.add_i16("t.i16", -30000);
  w.add_u32("t.u32", 4000000000u);
  w.add_i32("t.i32", -2000000000);
  w.add_f32("t.f32", 1.5f);
  w.add_bool("t.bool", true);
  w.add_string("t.string", "caf\xC3\xA9 \xF0\x9F\x98\x80");
  w.add_u64("t.u64", 18000000000000000000ull);
  w.add_i64("t.i64", -9000000000000000000ll);
  w.add_f64("t.f64", -2.25);
  const uint8_t u8s[] = {1, 2, 255};
  w.add("t.a.u8", GgufValue::u8_array(u8s));
  const int16_t i16s[] = {-1, 2};
  w.add("t.a.i16", GgufValue::i16_array(i16s));
  const float f32s[] = {0.5f, -0.0f, 1e30f};
  w.add("t.a.f32", GgufValue::f32_array(f32s));
  const uint64_t u64s[] = {0, ~0ull};
  w.add("t.a.u64", GgufValue::u64_array(u64s));
  const double f64s[] = {3.25};
  w.add("t.a.f64", GgufValue::f64_array(f64s));
  w.add("t.a.bool", GgufValue::bool_array({true, false, true}));
  const std::string strs[] = {"", "a", "\xFF\xFE"};
  w.add("t.a.string", GgufValue::string_array(std::span<const std::string>(strs)));
  w.add("t.a.empty", GgufValue::array_of(ValueType::I32, {}));
  const GgufValue inner[] = {GgufValue::u8_array(u8s), GgufValue::f32_array(f32s)};
  const GgufValue mid[] = {GgufValue::array_of(ValueType::ARRAY, inner)};
  w.add("t.a.nested", GgufValue::array_of(ValueType::ARRAY, mid));
  w.add_u32("split.count", 1);
  w.add_u16("split.no", 0);
  // Tensors of several types and shapes, an empty one among them.
  Rng rng{9};
  add_weight(w, rng, "f32.vec", 0, {4}, 0.5f);
  add_weight(w, rng, "f16.mat", 1, {8, 2}, 0.5f);
  add_weight(w, rng, "bf16.3d", 30, {2, 2, 2}, 0.5f);
  add_weight(w, rng, "q8_0.4d", 8, {32, 1, 2, 1}, 0.5f);
  add_weight(w, rng, "q4_K.row", 12, {256}, 0.5f);
  add_weight(w, rng, "q6_K.row", 14, {256}, 0.5f);
  add_weight(w, rng, "q5_1.row", 7, {32}, 0.5f);
  if (!w.add_tensor("empty", 0, std::vector<int64_t>{0, 3}, {}, &err)) die(err);
  return w.to_bytes();
}

std::vector<uint8_t> small_alignment(uint32_t alignment) {
  GgufWriter w;
  std::string err;
  if (!w.set_alignment(alignment, &err)) die(err);
  w.add_string("general.architecture", "qwen3moe");
  Rng rng{3};
  add_weight(w, rng, "a", 0, {3}, 0.5f);
  add_weight(w, rng, "b", 2, {32}, 0.5f);  // Q4_0
  add_weight(w, rng, "c", 1, {5}, 0.5f);
  return w.to_bytes();
}

// A vocabulary-only file as llama.cpp's tools write them: no tensors, and the
// file ends right after the metadata (no padding to the alignment).
std::vector<uint8_t> vocab_only(const Vocab& v, bool strip_padding) {
  GgufWriter w;
  w.add_string("general.architecture", "qwen3moe");
  w.add_u32("qwen3moe.context_length", 512);
  add_vocab(w, v, v.model != "llama");
  std::vector<uint8_t> b = w.to_bytes();
  if (strip_padding)
    while (!b.empty() && b.back() == 0) b.pop_back();
  return b;
}

// ---------------------------------------------------------------------------
// Package seeds.

std::vector<fs::path> build_manifests(const fs::path& packages_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(packages_dir, ec))
    for (const auto& f : fs::directory_iterator(d.path(), ec))
      if (f.path().extension() == packages::kManifestSuffix) out.push_back(f.path());
  std::sort(out.begin(), out.end());
  if (out.empty()) die(packages_dir.string() + ": no package manifests (build guild_kernel_packages first)");
  return out;
}

// A package directory with a tiny library (the archive reader never opens
// the library: any bytes do) and `manifest` retargeted at it.
void make_package_dir(const fs::path& dir, json::Value manifest, const std::string& library_bytes) {
  fs::create_directories(dir);
  const std::string lib_name = "libtiny.so";
  std::ofstream(dir / lib_name, std::ios::binary) << library_bytes;
  manifest.set("library", lib_name);
  manifest.set("sha256", packages::sha256_hex(library_bytes.data(), library_bytes.size()));
  std::ofstream(dir / (manifest["name"].as_string() + packages::kManifestSuffix), std::ios::binary)
      << json::serialize(manifest, true) << "\n";
}

// ---------------------------------------------------------------------------
// Tokenizer seeds: [vocabulary selector][flags][text] (fuzz_tokenizer.cpp).

const char* const kTokenizerTexts[] = {
    "Hello world! It's a test, isn't it? They'll say we've done 12345 things.",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n\treturn x**2  # comment\r\n\r\n    if a != b: print(\"\\u00e9\")",
    "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82 \xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF "
    "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98\xEC\x84\xB8\xEC\x9A\x94 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
    "e\xCC\x81 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xF0\x9F\x98\x80\xF0\x9F\x8F\xBD "
    "\xE2\x80\x8B\xEF\xBB\xBF zero-width",
    "\xFF\xFE\xC3\x28 \xE2\x82 \xF0\x9F\x98 \xED\xA0\x80 \xC0\xAF \xF8\x88\x80\x80\x80 invalid utf-8",
    "   leading spaces and trailing   \n\n\n\t\t \xC2\xA0\xE3\x80\x80",
    "\xE2\x96\x81 U+2581 and <0x41> and <unk> <s></s> [EMPTY_0] <mask>",
    "1234567890 3.14159 1e10 0x1F \xD9\xA1\xD9\xA2\xD9\xA3 \xE2\x85\xA0\xE2\x85\xA1",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!????????........",
    "A'S I'M YOU'RE WE'VE HE'LL SHE'D 'tis ''quoted''",
    "",
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DEMO_MODEL.gguf BUILD_PACKAGES_DIR OUT_CORPUS_DIR\n", argv[0]);
    return 2;
  }
  std::string err;
  auto demo = ModelFiles::open(argv[1], &err);
  if (!demo) die(err);
  const fs::path packages_dir = argv[2];
  const fs::path out = argv[3];

  const Vocab small = demo_prefix(*demo, 272);  // 3 specials + 256 bytes + 13 merges
  const Vocab spm = spm_vocab();

  // fuzz_model_load: tiny models of each runner and the loader's variants.
  const fs::path ml = out / "model_load";
  ModelSpec qmoe;
  write_bytes(ml / "qwen3moe-q8_0.gguf", tiny_model(qmoe, small));
  ModelSpec qdense;
  qdense.arch = "qwen3";
  qdense.n_expert = 0;
  qdense.weight_type = 1;  // F16
  qdense.tied_output = true;
  qdense.seed = 2;
  write_bytes(ml / "qwen3-f16-tied.gguf", tiny_model(qdense, small));
  ModelSpec ldense;
  ldense.arch = "llama";
  ldense.n_expert = 0;
  ldense.weight_type = ldense.embd_type = 2;  // Q4_0
  ldense.rope_scaling = "yarn";
  ldense.tied_output = true;
  ldense.seed = 3;
  write_bytes(ml / "llama-q4_0-yarn.gguf", tiny_model(ldense, small));
  ModelSpec lmoe;
  lmoe.arch = "llama";
  lmoe.n_head_kv = 4;
  lmoe.rope_scaling = "linear";
  lmoe.tied_output = true;
  lmoe.seed = 4;
  write_bytes(ml / "llama-moe-q8_0-linear.gguf", tiny_model(lmoe, spm));
  ModelSpec mixed;
  mixed.n_layer = 2;
  mixed.dense_layer = {true, false};
  mixed.weight_type = 6;  // Q5_0
  mixed.embd_type = 3;    // Q4_1
  mixed.norm_type = 30;   // BF16
  mixed.tied_output = true;
  mixed.seed = 5;
  write_bytes(ml / "qwen3moe-mixed-q5_0.gguf", tiny_model(mixed, small));
  ModelSpec align1 = qmoe;  // tensors misaligned for their blocks: the binder copies them
  align1.alignment = 1;
  align1.tied_output = true;
  align1.n_expert = 2;
  align1.n_expert_used = 1;
  align1.seed = 6;
  write_bytes(ml / "qwen3moe-q8_0-align1.gguf", tiny_model(align1, small));

  // fuzz_gguf_reader: the format's features, vocabularies, one model.
  const fs::path gr = out / "gguf_reader";
  write_bytes(gr / "all-value-types.gguf", all_value_types());
  write_bytes(gr / "alignment-1.gguf", small_alignment(1));
  write_bytes(gr / "alignment-8.gguf", small_alignment(8));
  write_bytes(gr / "vocab-gpt2-no-padding.gguf", vocab_only(small, true));
  write_bytes(gr / "vocab-spm.gguf", vocab_only(spm, false));
  {
    Vocab gemma = spm;
    gemma.model = "gemma4";
    gemma.scores.clear();
    gemma.merges = {"\xE2\x96\x81 t", "h e", "i n", "\xE2\x96\x81t he"};
    write_bytes(gr / "vocab-gemma4.gguf", vocab_only(gemma, false));
    Vocab llama3 = small;
    llama3.pre = "llama3";
    write_bytes(gr / "vocab-llama3.gguf", vocab_only(llama3, false));
  }
  {
    std::vector<uint8_t> v2 = small_alignment(32);
    v2[4] = 2;  // version 2: the same layout
    write_bytes(gr / "version-2.gguf", v2);
  }
  write_bytes(gr / "model-llama-q4_0.gguf", tiny_model(ldense, small));

  // fuzz_manifest: the build's manifests and variants of one.
  const fs::path mf = out / "manifest";
  const std::vector<fs::path> manifests = build_manifests(packages_dir);
  for (const fs::path& p : manifests) write_text(mf / p.filename(), read_text(p));
  const std::string base_text = read_text(manifests.front());
  auto base = json::parse(base_text, &err);
  if (!base) die(manifests.front().string() + ": " + err);
  {
    json::Value m = *base;
    m.set("name", "gpu-x");
    m.set("description", "\"quoted\" \\ \xC3\xA9 \xF0\x9F\x98\x80 \\u0041");
    json::Value prov = json::Value::array();
    json::Value op = json::Value::object();
    op.set("op", "decoder");
    op.set("types", json::Value::array({"Q8_0", "q4_K", "F16"}));
    op.set("device", "cuda");
    prov.push_back(op);
    m.set("provides", prov);
    json::Value req = json::Value::object();
    req.set("cpu_features", json::Value::array({"avx2", "fma", "f16c"}));
    req.set("cuda_compute_capability", "8.0");
    req.set("cuda_driver", "12.0");
    m.set("requires", req);
    write_text(mf / "cuda-variant.gkmetadata", json::serialize(m, false));
  }
  write_text(mf / "json-edge-cases.json",
             "{\"a\": [1, -0, 1.5e300, 9223372036854775807, 9223372036854775808, -1E-7, 0.1],"
             " \"s\": \"\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\/\", \"n\": null, \"t\": true, \"f\": false,"
             " \"o\": {\"\": {}, \"x\": [[[]]]}, \"dup\": 1, \"dup\": 2}\n");

  // fuzz_gkpkg_archive: archives packed from package directories.
  const fs::path ar = out / "gkpkg_archive";
  const fs::path tmp = fs::temp_directory_path() / ("guild-fuzz-seeds-" + std::to_string(::getpid()));
  {
    json::Value tiny = *base;
    tiny.set("name", "cpu-tiny");
    make_package_dir(tmp / "cpu-tiny", tiny, std::string("\x7f" "ELF tiny library bytes for the archive seed", 44));
    json::Value m = *base;
    m.set("name", "cpu-tiny2");
    m.set("version", "2.0.0-rc.1+build");
    json::Value req = json::Value::object();
    req.set("cpu_features", json::Value::array({"avx512f", "sse4.2"}));
    m.set("requires", req);
    make_package_dir(tmp / "cpu-tiny2", m, std::string(1, '\0'));
    for (const char* name : {"cpu-tiny", "cpu-tiny2"}) {
      const fs::path gk = ar / (std::string(name) + ".gkpkg");
      fs::create_directories(ar);
      if (!packages::pack_package_dir((tmp / name).string(), gk.string(), &err)) die(err);
      std::printf("%8llu  %s\n", static_cast<unsigned long long>(fs::file_size(gk)), gk.c_str());
    }
    fs::remove_all(tmp);
  }

  // fuzz_tokenizer: each text once, spread over the vocabularies and flags;
  // plus raw NULs and one long mixed text.
  const fs::path tk = out / "tokenizer";
  uint8_t selector = 0;
  int index = 0;
  for (const char* text : kTokenizerTexts) {
    for (int rep = 0; rep < 3; ++rep) {
      std::string seed;
      seed += static_cast<char>(selector);
      seed += static_cast<char>((index * 7 + rep * 3) & 0x1f);  // VocabFlags
      seed += text;
      char name[32];
      std::snprintf(name, sizeof name, "text-%02d-%d", index, rep);
      write_text(tk / name, seed);
      selector = static_cast<uint8_t>(selector + 1);
    }
    ++index;
  }
  write_text(tk / "nul-bytes", std::string("\x05\x03" "a\0b\0\0c <|im_end|>\0", 19));
  return 0;
}
