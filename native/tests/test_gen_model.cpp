// The synthetic-model generator (artifact/synth_model.h, guild-gen-model):
// weight quantizers against the reference dequantizers (MXFP4 also against
// llama.cpp's own blocks), the streaming GGUF writer against the in-memory
// one, determinism across thread counts, the presets' parameter counts
// against the real models' published totals, tiny generated qwen3moe, gpt-oss
// and glm4moe files against llama.cpp's fixture files (keys, tensor names,
// shapes and types), and each loading and generating with the real runtime.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "artifact/inspect.h"
#include "artifact/synth_model.h"
#include "artifact/weight_quant.h"
#include "check.h"
#include "cpu/weights/quantize_weight_iq.h"
#include "core/json.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;

namespace {

synth::MoeModelConfig tiny_config() {
  synth::MoeModelConfig c;
  synth::set_shape({.n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_expert = 8,
                    .n_expert_used = 2, .n_ff_exp = 256, .n_vocab = 1200},
                   &c);
  c.seed = 7;
  return c;
}

std::string tmp_path(const std::string& name) { return check::tmp_dir() + "/" + name; }

// A fixture model's path, or "" (and a note) when GUILD_FIXTURES is not set:
// the comparisons with llama.cpp's files are skipped, the rest still runs.
std::string fixture_model(const char* file) {
  const char* env = std::getenv("GUILD_FIXTURES");
  const std::string path = std::string(env ? env : "") + "/models/" + file;
  if (env && std::filesystem::exists(path)) return path;
  std::printf("  (no fixture %s: GUILD_FIXTURES not set; comparison skipped)\n", file);
  return "";
}

struct LogitStats {
  bool finite = true;
  double mean = 0, sd = 0;
};

LogitStats logit_stats(const std::vector<float>& logits) {
  LogitStats st;
  double sum = 0, sq = 0;
  for (float v : logits) {
    st.finite = st.finite && std::isfinite(v);
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  st.mean = sum / logits.size();
  st.sd = std::sqrt(sq / logits.size() - st.mean * st.mean);
  return st;
}

// "<arch>.*" keys with their values, and "name type [ne]" per tensor, sorted:
// what must agree between a generated file and llama.cpp's.
std::vector<std::string> structure(const gguf::ModelFiles& f) {
  std::vector<std::string> out;
  const std::string arch = std::string(*f.get_string("general.architecture")) + ".";
  for (const auto& [key, value] : f.primary().metadata())
    if (key.rfind(arch, 0) == 0)
      out.push_back("key " + std::string(key) + " = " + json::serialize(metadata_value_json(value)));
  for (const auto& t : f.tensors()) {
    std::string line = "tensor " + std::string(t.name) + " " + std::string(tensor_type_name(t.type)) + " [";
    for (uint32_t d = 0; d < t.n_dims; ++d) line += (d ? ", " : "") + std::to_string(t.ne[d]);
    out.push_back(line + "]");
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A generated file has exactly the keys, tensors and types of the fixture file.
void check_same_structure(const std::string& generated, const char* fixture) {
  const std::string ref_path = fixture_model(fixture);
  if (ref_path.empty()) return;
  std::string err;
  auto mine = gguf::ModelFiles::open(generated, &err);
  auto ref = gguf::ModelFiles::open(ref_path, &err);
  REQUIRE(mine && ref);
  const std::vector<std::string> a = structure(*mine), b = structure(*ref);
  for (const std::string& line : a)
    CHECK_MSG(std::binary_search(b.begin(), b.end(), line), "generated, not in %s: %s", fixture, line.c_str());
  for (const std::string& line : b)
    CHECK_MSG(std::binary_search(a.begin(), a.end(), line), "in %s, not generated: %s", fixture, line.c_str());
  std::printf("  %s: %zu keys and tensors compared\n", fixture, b.size());
}

// Opens and validates the file like `guild inspect` (artifact/inspect.h):
// its parameter count is the generator's, its type mix the expected one.
json::Value inspect_generated(const std::string& path, const synth::MoeModelConfig& c) {
  std::string err;
  auto files = gguf::ModelFiles::open(path, &err);
  CHECK_MSG(files != nullptr, "open: %s", err.c_str());
  if (!files) return json::Value();
  json::Value j = inspect_model(*files);
  const synth::ParamCounts p = synth::count_params(c);
  CHECK(j["architecture"].as_string() == c.arch);
  CHECK(static_cast<uint64_t>(j["parameter_count"].as_int()) == p.total);
  CHECK(static_cast<uint64_t>(j["tensor_bytes"].as_int()) == p.file_bytes);
  CHECK(j["vocab_size"].as_int() == c.n_vocab);
  return j;
}

std::unique_ptr<GuildModel> load_generated(const std::string& path, int n_ctx) {
  LoadOptions opt;
  opt.n_threads = 2;
  opt.n_ctx = n_ctx;
  std::string err;
  auto model = GuildModel::load(path, opt, &err);
  CHECK_MSG(model != nullptr, "load %s: %s", path.c_str(), err.c_str());
  return model;
}

// Greedy generation of n tokens, with (Mtp) or without drafts.
GenerateResult greedy(GuildModel& m, const std::vector<int32_t>& prompt, int n, DraftMode mode = DraftMode::None) {
  std::string err;
  auto s = GuildSession::create(m, 256, &err);
  GenerateResult r;
  if (!s) {
    r.stop = StopReason::Error;
    r.error = err;
    return r;
  }
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = n;
  req.ignore_eog = true;
  req.speculative.mode = mode;
  req.speculative.by_cost = false;  // draft whenever the head is confident enough (min_p 0: always)
  return s->generate(req);
}

// Logits of the prompt: finite, with a spread of a few units.
void check_logits(GuildModel& m, const std::vector<int32_t>& ids) {
  std::string err;
  auto session = GuildSession::create(m, 256, &err);
  REQUIRE(session);
  std::vector<float> logits(ids.size() * static_cast<size_t>(m.hparams().n_vocab));
  REQUIRE(session->eval(ids, true, logits.data(), &err));
  const LogitStats st = logit_stats(logits);
  std::printf("  %s logits: mean %.3f, sd %.3f\n", m.hparams().arch.c_str(), st.mean, st.sd);
  CHECK(st.finite);
  CHECK(st.sd > 0.5 && st.sd < 10.0);
}

// gpt-oss-20b cut to the fixture gptoss-a's shapes (2 layers, 16 experts).
synth::MoeModelConfig tiny_gpt_oss() {
  synth::MoeModelConfig c;
  CHECK(synth::apply_preset("gpt-oss-20b", &c));
  synth::set_shape({.n_layer = 2, .n_embd = 256, .n_head = 8, .n_head_kv = 2, .head_dim = 64, .n_expert = 16,
                    .n_expert_used = 4, .n_ff_exp = 64, .n_vocab = 2560},
                   &c);
  c.sliding_window = 16;
  c.seed = 11;
  return c;
}

// glm4.5-air cut to the fixture glm4moe-a's shapes (1 dense + 2 MoE layers, 1 nextn block).
synth::MoeModelConfig tiny_glm4moe() {
  synth::MoeModelConfig c;
  CHECK(synth::apply_preset("glm4.5-air", &c));
  synth::set_shape({.n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_expert = 8,
                    .n_expert_used = 3, .n_ff_exp = 32, .n_vocab = 2048},
                   &c);
  c.rope_dims = 32;
  c.qk_norm = true;
  c.n_ff = 256;
  c.n_ff_shexp = 32;
  c.expert_weights_scale = 2.5f;
  c.n_ctx_train = 4096;
  c.seed = 12;
  return c;
}

}  // namespace

// Each quantizer's output, dequantized by the reference kernels, is close to
// its input: the relative RMS error stays under the format's step size.
TEST(weight_quantizers_round_trip) {
  // The grid types' quantizers need the kernels' codebooks: absent until registered.
  CHECK(!weight_quant_supported(static_cast<uint32_t>(TensorType::IQ2_XXS)));
  register_grid_weight_quantizers();
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const int64_t n = 4096;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = nd(rng);
  struct Case { TensorType t; double max_rel_rms; };
  const Case cases[] = {{TensorType::F32, 0.0},    {TensorType::F16, 1e-3},  {TensorType::BF16, 5e-3},
                        {TensorType::Q8_0, 0.01},  {TensorType::Q6_K, 0.04}, {TensorType::Q5_K, 0.07},
                        {TensorType::Q5_0, 0.07},  {TensorType::Q5_1, 0.07}, {TensorType::Q4_K, 0.14},
                        {TensorType::Q4_0, 0.14},  {TensorType::Q4_1, 0.14}, {TensorType::MXFP4, 0.16},
                        {TensorType::Q2_K, 0.36},  {TensorType::IQ2_XXS, 0.46}};
  for (const Case& c : cases) {
    const uint32_t id = static_cast<uint32_t>(c.t);
    uint64_t bytes = 0;
    REQUIRE(tensor_row_bytes(id, n, &bytes));
    std::vector<uint8_t> q(bytes);
    REQUIRE(weight_quant_supported(id));
    REQUIRE(quantize_weight_row(id, x.data(), n, q.data()));
    cpu_kernels_generic().types[id].dequant_row(q.data(), y.data(), n);
    double err = 0, ref = 0, mean = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
      ref += x[i] * static_cast<double>(x[i]);
      mean += y[i];
    }
    const double rel = std::sqrt(err / ref);
    std::printf("  %-5s relative rms error %.4f, mean %.2e\n", std::string(tensor_type_name(id)).c_str(), rel, mean / n);
    CHECK_MSG(rel <= c.max_rel_rms, "%s: relative rms error %.4f > %.4f", std::string(tensor_type_name(id)).c_str(), rel,
              c.max_rel_rms);
    CHECK(std::fabs(mean / n) < 2e-3);  // zero-mean input stays (nearly) zero-mean
  }
  CHECK(!weight_quant_supported(static_cast<uint32_t>(TensorType::IQ1_S)));
  CHECK(!quantize_weight_row(static_cast<uint32_t>(TensorType::Q4_K), x.data(), 100, y.data()));  // partial block
}

// write_streamed gives byte for byte the file write() gives for the same bytes.
TEST(streamed_writer_equals_in_memory_writer) {
  const int64_t ne_a[2] = {64, 7}, ne_b[3] = {256, 3, 5};
  auto fill = [](size_t tensor, int64_t row, uint8_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(tensor * 31 + row * 7 + i);
  };
  const uint32_t q8 = static_cast<uint32_t>(TensorType::Q8_0), q4k = static_cast<uint32_t>(TensorType::Q4_K);
  const size_t row_a = 64 / 32 * 34, row_b = 144;
  std::vector<uint8_t> a(row_a * 7), b(row_b * 15), small(12, 9);
  for (int64_t r = 0; r < 7; ++r) fill(0, r, a.data() + r * row_a, row_a);
  for (int64_t r = 0; r < 15; ++r) fill(2, r, b.data() + r * row_b, row_b);
  std::string err;
  gguf::GgufWriter mem, str;
  for (gguf::GgufWriter* w : {&mem, &str}) {
    w->add_string("general.architecture", "test");
    w->add_u32("test.value", 5);
  }
  const int64_t ne_s[1] = {3};
  REQUIRE(mem.add_tensor("a", q8, ne_a, a, &err));
  REQUIRE(mem.add_tensor("small", 0, ne_s, small, &err));
  REQUIRE(mem.add_tensor("b", q4k, ne_b, b, &err));
  REQUIRE(str.add_tensor_streamed("a", q8, ne_a, &err));
  REQUIRE(str.add_tensor("small", 0, ne_s, small, &err));
  REQUIRE(str.add_tensor_streamed("b", q4k, ne_b, &err));
  CHECK(!str.add_tensor_streamed("bad", q4k, ne_a, &err));  // 64 is not a whole Q4_K block
  CHECK(str.to_bytes().empty());
  CHECK(!str.write(tmp_path("streamed-bad.gguf"), &err));
  const std::string p1 = tmp_path("mem.gguf"), p2 = tmp_path("streamed.gguf");
  REQUIRE(mem.write(p1, &err));
  // Tiny chunks: many ranges per tensor, out of order across 3 threads.
  REQUIRE(str.write_streamed(
      p2,
      [&](size_t tensor, int64_t row0, int64_t n_rows, uint8_t* dst) {
        const size_t rb = tensor == 0 ? row_a : row_b;
        for (int64_t r = 0; r < n_rows; ++r) fill(tensor, row0 + r, dst + r * rb, rb);
        return true;
      },
      3, 100, &err));
  CHECK(check::read_file(p1) == check::read_file(p2));
  // A failing producer fails the write and leaves no file.
  const std::string p3 = tmp_path("streamed-fail.gguf");
  CHECK(!str.write_streamed(p3, [](size_t, int64_t, int64_t, uint8_t*) { return false; }, 2, 100, &err));
  CHECK(!std::filesystem::exists(p3) && !std::filesystem::exists(p3 + ".partial"));
}

// The same config gives the same file whatever the thread count.
TEST(generator_is_deterministic) {
  synth::MoeModelConfig c = tiny_config();
  c.n_layer = 1;
  std::string err;
  const std::string a = tmp_path("det-1.gguf"), b = tmp_path("det-3.gguf");
  REQUIRE(synth::write_moe_model(c, a, 1, &err));
  REQUIRE(synth::write_moe_model(c, b, 3, &err));
  CHECK(check::read_file(a) == check::read_file(b));
  c.seed = 8;
  REQUIRE(synth::write_moe_model(c, b, 2, &err));
  CHECK(check::read_file(a) != check::read_file(b));
  // Shapes the block sizes cannot hold are refused with the reason.
  c.n_ff_exp = 100;
  CHECK(!synth::write_moe_model(c, b, 2, &err));
  CHECK(err.find("ffn_down_exps") != std::string::npos);
}

TEST(presets_have_the_documented_shapes) {
  synth::MoeModelConfig c;
  REQUIRE(synth::apply_preset("qwen3-30b-a3b", &c));
  CHECK(c.n_layer == 48 && c.n_embd == 2048 && c.n_head == 32 && c.n_head_kv == 4 && c.head_dim == 128);
  CHECK(c.n_expert == 128 && c.n_expert_used == 8 && c.n_ff_exp == 768 && c.n_vocab == 151936);
  CHECK(c.expert_type == static_cast<uint32_t>(TensorType::Q4_K) && c.dense_type == static_cast<uint32_t>(TensorType::Q6_K));
  CHECK(synth::validate(c).empty());
  const synth::ParamCounts p = synth::count_params(c);
  std::printf("  qwen3-30b-a3b: %.2f B parameters, %.2f B active, %.2f GiB\n", p.total / 1e9, p.active / 1e9,
              p.file_bytes / 1073741824.0);
  CHECK(p.total > 30.0e9 && p.total < 31.0e9);
  CHECK(p.file_bytes > 16.0 * 1073741824.0 && p.file_bytes < 16.7 * 1073741824.0);  // the anchors' 16.33 GiB
  REQUIRE(synth::apply_preset("bench-1b", &c));
  const synth::ParamCounts q = synth::count_params(c);
  std::printf("  bench-1b: %.3f B parameters, %.3f B active\n", q.total / 1e9, q.active / 1e9);
  CHECK(q.total > 0.95e9 && q.total < 1.05e9);
  CHECK(q.active > 0.1e9 && q.active < 0.3e9);
  CHECK(!synth::apply_preset("nope", &c));
  register_grid_weight_quantizers();
  uint32_t id = 0;
  CHECK(synth::parse_type("Q4_K", &id) && id == static_cast<uint32_t>(TensorType::Q4_K));
  CHECK(synth::parse_type("q8_0", &id) && id == static_cast<uint32_t>(TensorType::Q8_0));
  CHECK(synth::parse_type("iq2_xxs", &id) && id == static_cast<uint32_t>(TensorType::IQ2_XXS));  // registered above
  CHECK(!synth::parse_type("iq1_s", &id));  // no quantizer
}

TEST(synthetic_vocab_is_byte_level_bpe) {
  const synth::SynthVocab v = synth::make_vocab(3000, 1);
  CHECK(v.tokens.size() == 3000 && v.types.size() == 3000);
  CHECK(v.merges.size() == 3000 - 256 - 3);
  CHECK(v.tokens[v.im_start] == "<|im_start|>" && v.tokens[v.im_end] == "<|im_end|>" &&
        v.tokens[v.endoftext] == "<|endoftext|>");
  CHECK(v.types[v.im_end] == 3 && v.types[0] == 1);
  std::vector<std::string> sorted = v.tokens;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // unique texts
}

// A generated model loads, its tokenizer round-trips text, and greedy
// generation runs with finite logits of a few units' spread.
TEST(generated_model_loads_and_generates) {
  const synth::MoeModelConfig c = tiny_config();
  const std::string path = tmp_path("tiny-qwen3moe.gguf");
  std::string err;
  REQUIRE(synth::write_moe_model(c, path, 2, &err));
  inspect_generated(path, c);
  auto model = load_generated(path, 256);
  REQUIRE(model);
  const ModelHparams& hp = model->hparams();
  CHECK(hp.arch == "qwen3moe" && hp.n_layer == 3 && hp.n_embd == 256 && hp.n_expert == 8 && hp.n_expert_used == 2);
  CHECK(hp.n_vocab == 1200 && hp.head_dim_k == 64 && hp.n_head_kv == 2 && hp.n_ff_exp == 256);

  const Vocab& vocab = model->vocab();
  CHECK(vocab.model_name() == "gpt2" && vocab.pre_name() == "qwen2");
  const std::string text = "hello world, the quick brown fox 42!";
  const std::vector<int32_t> ids = vocab.tokenize(text, false, false);
  CHECK(!ids.empty() && ids.size() < text.size());  // merges apply
  CHECK(vocab.detokenize(ids, false, false) == text);
  const std::vector<int32_t> special = vocab.tokenize("<|im_start|>user", false, true);
  CHECK(!special.empty() && special[0] == vocab.token_id("<|im_start|>"));
  CHECK(vocab.is_eog(vocab.token_id("<|im_end|>")));

  check_logits(*model, ids);
  const GenerateResult r = greedy(*model, ids, 24);
  CHECK(r.stop == StopReason::Length);
  CHECK(r.tokens.size() == 24);
  for (int32_t t : r.tokens) CHECK(t >= 0 && t < hp.n_vocab);
}

// A mixed file like the low-bit downloads (IQ2_XXS gate/up experts, Q2_K down
// experts): its tensors have those types, it loads and its logits are finite.
TEST(mixed_low_bit_model_loads_and_evaluates) {
  register_grid_weight_quantizers();
  synth::MoeModelConfig c = tiny_config();
  c.expert_type = static_cast<uint32_t>(TensorType::IQ2_XXS);
  c.expert_down_type = static_cast<uint32_t>(TensorType::Q2_K);
  const std::string path = tmp_path("tiny-mixed-low-bit.gguf");
  std::string err;
  REQUIRE(synth::write_moe_model(c, path, 2, &err));
  auto files = gguf::ModelFiles::open(path, &err);
  REQUIRE(files);
  int iq2 = 0, q2k = 0;
  for (const auto& t : files->tensors()) {
    const bool gate_up = t.name.find("ffn_gate_exps") != std::string::npos || t.name.find("ffn_up_exps") != std::string::npos;
    if (gate_up) iq2 += t.type == static_cast<uint32_t>(TensorType::IQ2_XXS);
    if (t.name.find("ffn_down_exps") != std::string::npos) q2k += t.type == static_cast<uint32_t>(TensorType::Q2_K);
  }
  CHECK(iq2 == 2 * c.n_layer && q2k == c.n_layer);
  LoadOptions opt;
  opt.n_threads = 2;
  opt.n_ctx = 64;
  auto model = GuildModel::load(path, opt, &err);
  CHECK_MSG(model != nullptr, "load: %s", err.c_str());
  REQUIRE(model);
  auto session = GuildSession::create(*model, 64, &err);
  REQUIRE(session);
  const std::vector<int32_t> ids = model->vocab().tokenize("the quick brown fox", false, false);
  std::vector<float> logits(ids.size() * static_cast<size_t>(model->hparams().n_vocab));
  REQUIRE(session->eval(ids, true, logits.data(), &err));
  bool finite = true;
  for (float v : logits) finite = finite && std::isfinite(v);
  CHECK(finite);
}

// MXFP4 blocks in the runtime's layout (core/quant_blocks.h): the E8M0 byte
// puts the block's largest magnitude in [4, 8) scale units, element j is the
// low nibble of qs[j] and j + 16 the high one, code bit 3 the sign; values on
// the E2M1 grid come back exactly through the runtime's own dequantizer.
TEST(mxfp4_blocks_decode_with_the_runtime_dequant) {
  const uint32_t id = static_cast<uint32_t>(TensorType::MXFP4);
  REQUIRE(weight_quant_supported(id));
  const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float x[32], y[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * grid[j % 8] * (j >= 16 ? -1.0f : 1.0f);  // scale 2^-2
  BlockMXFP4 b;
  REQUIRE(quantize_weight_row(id, x, 32, &b));
  CHECK(b.e == 127 - 2);  // amax 1.5 = 6 * 2^-2: floor(log2 1.5) - 2 = -2
  for (int j = 0; j < 16; ++j) {
    CHECK((b.qs[j] & 0xF) == j % 8);                       // element j, positive: code = grid index
    CHECK((b.qs[j] >> 4) == (j % 8 == 0 ? 0 : 8 + j % 8));  // element j + 16, negative (-0 stays code 0)
  }
  cpu_kernels_generic().types[id].dequant_row(&b, y, 32);
  for (int j = 0; j < 32; ++j) CHECK_MSG(y[j] == x[j], "element %d: %g != %g", j, y[j], x[j]);
  // Rounding: nearest, ties to the even code; 6..8 units saturate at 6.
  float r[32] = {15.0f, 0.75f, 1.25f, 2.5f, 5.0f, 7.9f, 0.2f, -2.6f};  // amax 15: e = 127 + 1, unit 2
  REQUIRE(quantize_weight_row(id, r, 32, &b));
  CHECK(b.e == 128);
  cpu_kernels_generic().types[id].dequant_row(&b, y, 32);
  const float want[8] = {12.0f, 1.0f, 1.0f, 2.0f, 4.0f, 8.0f, 0.0f, -3.0f};
  for (int j = 0; j < 8; ++j) CHECK_MSG(y[j] == want[j], "rounded element %d: %g != %g", j, y[j], want[j]);
  // A zero block: exponent byte 0, all codes 0.
  const float zeros[32] = {};
  REQUIRE(quantize_weight_row(id, zeros, 32, &b));
  CHECK(b.e == 0);
  for (uint8_t q : b.qs) CHECK(q == 0);
}

// llama.cpp's MXFP4 blocks (the fixture's experts, made by llama-quantize),
// decoded by the runtime and quantized again, come back byte for byte: the
// same exponent choice, codes and nibble order.
TEST(mxfp4_requantizes_llama_cpp_blocks_exactly) {
  const std::string path = fixture_model("gptoss-a-MXFP4_MOE.gguf");
  if (path.empty()) return;
  std::string err;
  auto files = gguf::ModelFiles::open(path, &err);
  REQUIRE(files);
  const uint32_t id = static_cast<uint32_t>(TensorType::MXFP4);
  int tensors = 0;
  uint64_t blocks = 0, differing = 0;
  for (const auto& t : files->tensors()) {
    if (t.type != id) continue;
    ++tensors;
    std::vector<float> x(static_cast<size_t>(t.n_elements()));
    cpu_kernels_generic().types[id].dequant_row(t.data, x.data(), t.n_elements());
    std::vector<uint8_t> q(static_cast<size_t>(t.nbytes));
    REQUIRE(quantize_weight_row(id, x.data(), t.n_elements(), q.data()));
    for (uint64_t i = 0; i < t.nbytes / sizeof(BlockMXFP4); ++i, ++blocks)
      differing += std::memcmp(q.data() + i * sizeof(BlockMXFP4), t.data + i * sizeof(BlockMXFP4), sizeof(BlockMXFP4)) != 0;
  }
  std::printf("  %d MXFP4 tensors, %llu blocks, %llu differ\n", tensors, static_cast<unsigned long long>(blocks),
              static_cast<unsigned long long>(differing));
  CHECK(tensors == 6 && blocks > 0);
  CHECK(differing == 0);
}

// The presets' parameter counts against the published totals (OpenAI's
// gpt-oss model card: 116.83 B / 5.13 B active, 20.91 B / 3.61 B; GLM-4.5's
// report: GLM-4.5-Air 106 B / 12 B, counted without the MTP block and, for
// the active part, without the output head — the same reading gives GLM-4.5's
// 355 B / 32 B): these pin the shapes. Cut to fewer layers they still validate.
TEST(presets_match_the_published_parameter_counts) {
  struct Want { const char* preset; const char* arch; double total, active, tol; };
  const Want wants[] = {{"gpt-oss-120b", "gpt-oss", 116.83e9, 5.13e9, 0.01},
                        {"gpt-oss-20b", "gpt-oss", 20.91e9, 3.61e9, 0.01},
                        {"glm4.5-air", "glm4moe", 106e9, 12e9, 0.03}};
  for (const Want& w : wants) {
    synth::MoeModelConfig c;
    REQUIRE(synth::apply_preset(w.preset, &c));
    CHECK(c.arch == w.arch);
    CHECK_MSG(synth::validate(c).empty(), "%s: %s", w.preset, synth::validate(c).c_str());
    const synth::ParamCounts p = synth::count_params(c);
    const bool glm = c.arch == "glm4moe";
    const double total = static_cast<double>(glm ? p.total - p.nextn : p.total);
    const double active = static_cast<double>(glm ? p.active - p.output : p.active);
    std::printf("  %-13s %.2f B parameters (%.2f B nextn), %.2f B active (%.2f B head), %.2f GiB; compared: %.2f B / %.2f B\n",
                w.preset, p.total / 1e9, p.nextn / 1e9, p.active / 1e9, p.output / 1e9, p.file_bytes / 1073741824.0,
                total / 1e9, active / 1e9);
    CHECK_MSG(std::fabs(total / w.total - 1) < w.tol, "%s total %.3f B vs %.3f B", w.preset, total / 1e9, w.total / 1e9);
    CHECK_MSG(std::fabs(active / w.active - 1) < w.tol, "%s active %.3f B vs %.3f B", w.preset, active / 1e9, w.active / 1e9);
    for (const std::string& f : synth::type_fallbacks(c)) std::printf("    fallback %s\n", f.c_str());
    synth::MoeModelConfig cut = c;
    cut.n_layer = 2;
    CHECK(synth::validate(cut).empty());
    CHECK(synth::count_params(cut).total < p.total / 3);
  }
  synth::MoeModelConfig c;
  REQUIRE(synth::apply_preset("gpt-oss-120b", &c));
  CHECK(c.n_layer == 36 && c.n_embd == 2880 && c.n_head == 64 && c.n_head_kv == 8 && c.head_dim == 64);
  CHECK(c.n_expert == 128 && c.n_expert_used == 4 && c.n_ff_exp == 2880 && c.n_vocab == 201088 && c.sliding_window == 128);
  CHECK(c.expert_type == static_cast<uint32_t>(TensorType::MXFP4) && c.dense_type == static_cast<uint32_t>(TensorType::Q8_0));
  // llama-bench gives ggml-org's gpt-oss-120b-mxfp4 GGUF as 59.02 GiB: the same types make the same bytes.
  CHECK(std::fabs(synth::count_params(c).file_bytes / 1073741824.0 / 59.02 - 1) < 0.002);
  REQUIRE(synth::apply_preset("glm4.5-air", &c));
  CHECK(c.n_layer == 46 && c.n_nextn == 1 && c.n_dense_lead == 1 && c.n_embd == 4096 && c.n_head == 96 && c.head_dim == 128);
  CHECK(c.n_expert == 128 && c.n_expert_used == 8 && c.n_ff_exp == 1408 && c.n_ff == 10944 && c.n_vocab == 151552);
  // 1408- and 10944-wide rows cannot hold Q4_K / Q6_K blocks: llama-quantize's fallbacks.
  const std::vector<std::string> fb = synth::type_fallbacks(c);
  CHECK(std::find(fb.begin(), fb.end(), "ffn_down_exps.weight: q4_K -> q5_0 (x46)") != fb.end());
  CHECK(std::find(fb.begin(), fb.end(), "ffn_down.weight: q6_K -> q8_0 (x1)") != fb.end());
  // Fields of another architecture are refused, not ignored.
  REQUIRE(synth::apply_preset("gpt-oss-20b", &c));
  c.n_nextn = 1;
  CHECK(synth::validate(c).find("nextn") != std::string::npos);
  c = synth::MoeModelConfig();
  c.arch = "llama";
  CHECK(synth::validate(c).find("unknown architecture") != std::string::npos);
}

// gpt-oss cut to the fixture's shapes: the keys, tensor names, shapes and
// types of llama.cpp's gptoss-a-MXFP4_MOE; it loads as gpt-oss (window, YaRN)
// and generates past the sliding window with finite logits.
TEST(gpt_oss_matches_llama_cpp_file_and_generates) {
  const synth::MoeModelConfig c = tiny_gpt_oss();
  const std::string path = tmp_path("tiny-gpt-oss.gguf");
  std::string err;
  const bool wrote0 = synth::write_moe_model(c, path, 2, &err);
  CHECK_MSG(wrote0, "write: %s", err.c_str());
  REQUIRE(wrote0);
  check_same_structure(path, "gptoss-a-MXFP4_MOE.gguf");
  const json::Value j = inspect_generated(path, c);
  CHECK(j["tensor_types"]["mxfp4"].as_int() == 3 * c.n_layer);
  auto model = load_generated(path, 256);
  REQUIRE(model);
  const ModelHparams& hp = model->hparams();
  CHECK(hp.arch == "gpt-oss" && hp.n_layer == 2 && hp.n_expert == 16 && hp.n_expert_used == 4 && hp.n_ff_exp == 64);
  CHECK(hp.sliding_window == 16 && hp.rope.freq_scale == 1.0f / 32.0f && hp.rope.n_ctx_orig == 4096);
  const std::vector<int32_t> ids = model->vocab().tokenize(
      "the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches", false, false);
  CHECK(static_cast<int>(ids.size()) > c.sliding_window);  // the even layer's window is in play
  check_logits(*model, ids);
  const GenerateResult r = greedy(*model, ids, 16);
  CHECK_MSG(r.stop == StopReason::Length && r.tokens.size() == 16, "stop %d, %zu tokens: %s", static_cast<int>(r.stop),
            r.tokens.size(), r.error.c_str());
  for (int32_t t : r.tokens) CHECK(t >= 0 && t < hp.n_vocab);
}

// glm4moe cut to the fixture's shapes: in F32 the exact keys, tensors and
// types of llama.cpp's glm4moe-a-F32; in the preset's Q4_K/Q6_K mix (with the
// fallbacks on 32-wide rows) it loads with its nextn block as the MTP drafter,
// and greedy generation with drafts equals greedy generation without.
TEST(glm4moe_matches_llama_cpp_file_and_drafts_with_mtp) {
  synth::MoeModelConfig f32 = tiny_glm4moe();
  f32.expert_type = f32.expert_down_type = f32.dense_type = f32.output_type = f32.embd_type =
      static_cast<uint32_t>(TensorType::F32);
  std::string err;
  const std::string f32_path = tmp_path("tiny-glm4moe-f32.gguf");
  const bool wrote1 = synth::write_moe_model(f32, f32_path, 2, &err);
  CHECK_MSG(wrote1, "write: %s", err.c_str());
  REQUIRE(wrote1);
  check_same_structure(f32_path, "glm4moe-a-F32.gguf");

  const synth::MoeModelConfig c = tiny_glm4moe();
  const std::vector<std::string> fb = synth::type_fallbacks(c);
  CHECK(std::find(fb.begin(), fb.end(), "ffn_down_exps.weight: q4_K -> q5_0 (x3)") != fb.end());  // 2 MoE layers + nextn
  CHECK(std::find(fb.begin(), fb.end(), "ffn_down_shexp.weight: q6_K -> q8_0 (x3)") != fb.end());
  const std::string path = tmp_path("tiny-glm4moe.gguf");
  const bool wrote2 = synth::write_moe_model(c, path, 2, &err);
  CHECK_MSG(wrote2, "write: %s", err.c_str());
  REQUIRE(wrote2);
  const json::Value j = inspect_generated(path, c);
  CHECK(j["block_count"].as_int() == 4);  // 3 trunk layers + the nextn block
  auto model = load_generated(path, 256);
  REQUIRE(model);
  const ModelHparams& hp = model->hparams();
  CHECK(hp.arch == "glm4moe" && hp.n_layer == 3 && hp.n_nextn == 1 && hp.n_dense_lead == 1 && hp.n_ff == 256);
  CHECK(hp.n_ff_shexp == 32 && hp.rope.n_rot == 32 && hp.qk_norm && hp.expert_weights_norm && hp.expert_weights_scale == 2.5f);
  const std::vector<int32_t> ids = model->vocab().tokenize("the quick brown fox jumps over the lazy dog", false, false);
  check_logits(*model, ids);
  {
    std::string e;
    auto s = GuildSession::create(*model, 256, &e);
    REQUIRE(s);
    CHECK(s->has_mtp_drafter());
  }
  const GenerateResult plain = greedy(*model, ids, 24);
  const GenerateResult mtp = greedy(*model, ids, 24, DraftMode::Mtp);
  CHECK_MSG(plain.stop == StopReason::Length && plain.tokens.size() == 24, "plain: %s", plain.error.c_str());
  CHECK_MSG(mtp.stop == StopReason::Length, "mtp: %s", mtp.error.c_str());
  CHECK(mtp.tokens == plain.tokens);
  CHECK(std::string(mtp.drafter) == "mtp" && mtp.n_drafted > 0);
  std::printf("  mtp: %d drafted, %d accepted over %d windows\n", mtp.n_drafted, mtp.n_accepted, mtp.n_windows);
}
