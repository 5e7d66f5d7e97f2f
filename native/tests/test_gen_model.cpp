// The synthetic-model generator (artifact/synth_model.h, guild-gen-model):
// weight quantizers against the reference dequantizers, the streaming GGUF
// writer against the in-memory one, determinism across thread counts, and a
// tiny generated qwen3moe that loads, tokenizes (synthetic byte-level BPE)
// and generates with sane activations.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "artifact/synth_model.h"
#include "artifact/weight_quant.h"
#include "check.h"
#include "cpu/weights/quantize_weight_iq.h"
#include "core/kernel_table.h"
#include "core/tensor_type.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;

namespace {

synth::MoeModelConfig tiny_config() {
  synth::MoeModelConfig c;
  c.n_layer = 3;
  c.n_embd = 256;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 64;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_exp = 256;
  c.n_vocab = 1200;
  c.seed = 7;
  return c;
}

std::string tmp_path(const std::string& name) { return check::tmp_dir() + "/" + name; }

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
                        {TensorType::Q4_0, 0.14},  {TensorType::Q4_1, 0.14}, {TensorType::Q2_K, 0.36},
                        {TensorType::IQ2_XXS, 0.46}};
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
  LoadOptions opt;
  opt.n_threads = 2;
  opt.n_ctx = 256;
  auto model = GuildModel::load(path, opt, &err);
  CHECK_MSG(model != nullptr, "load: %s", err.c_str());
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

  auto session = GuildSession::create(*model, 256, &err);
  REQUIRE(session);
  std::vector<float> logits(static_cast<size_t>(ids.size()) * hp.n_vocab);
  REQUIRE(session->eval(ids, true, logits.data(), &err));
  double sum = 0, sq = 0;
  bool finite = true;
  for (float v : logits) {
    finite = finite && std::isfinite(v);
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = sum / logits.size(), sd = std::sqrt(sq / logits.size() - mean * mean);
  std::printf("  logits: mean %.3f, sd %.3f\n", mean, sd);
  CHECK(finite);
  CHECK(sd > 0.5 && sd < 10.0);

  auto s2 = GuildSession::create(*model, 256, &err);
  GenerateRequest req;
  req.prompt = ids;
  req.max_new_tokens = 24;
  req.ignore_eog = true;
  GenerateResult r = s2->generate(req);
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
