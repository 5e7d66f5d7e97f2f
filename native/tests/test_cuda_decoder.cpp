// CudaDecoder (everything on the GPU) against the CPU runtime on the fixture
// models (qwen3moe-a-*, mixtral-a-*, gptoss-a-*, glm4moe-a-*), with the fixtures' README rules:
//  * float masters (F32 weights; fp16 tensor-core prefill, fp16 KV): per
//    position rms |gpu - cpu| <= 0.05 and identical argmax, up to the first
//    position whose recorded router top-k margin is < 0.05;
//  * quantized files: per position rms <= 0.5 and argmax agreement >= 90 %
//    before that position;
//  * greedy decoding (prefill, then single-token steps replayed from a CUDA
//    graph): identical ids until the CPU's top-1/top-2 margin drops below
//    0.05 (masters) / 0.5 (quantized);
//  * graph replay and plain launches give bit-identical logits.
// Skips (exit 77) without fixtures or without a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "cuda_test_util.h"
#include "core/json.h"
#include "cuda/cuda_decoder.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace guild;
namespace gc = guild::cuda;

namespace {

using cuda_test::argmax;
using cuda_test::ids_of;
using cuda_test::load_json;
using cuda_test::margin;
using cuda_test::need_gpu;

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
  size_t tight = 0;  // first position with a router margin < 0.05
};

// The prompts that have routing files (token ids + per-layer top-k margins).
std::vector<Prompt> prompts_of(const std::string& dir) {
  std::vector<Prompt> out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("routing-", 0) == 0 && f.size() > 13 && f.substr(f.size() - 5) == ".json") names.push_back(f);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& f : names) {
    std::string prompt = f.substr(8, f.size() - 13);
    const bool exact = prompt.size() > 6 && prompt.substr(prompt.size() - 6) == ".exact";
    if (exact) prompt = prompt.substr(0, prompt.size() - 6);
    if (exact && fs::exists(dir + "/routing-" + prompt + ".json")) continue;
    json::Value r = load_json(dir + "/" + f);
    Prompt p;
    p.name = prompt;
    p.ids = ids_of(r["token_ids"]);
    p.tight = p.ids.size();
    for (const auto& layer : r["layers"].as_array()) {
      const auto& m = layer["topk_boundary_margin"].as_array();
      for (size_t i = 0; i < m.size() && i < p.tight; ++i)
        if (m[i].as_double() < 0.05) { p.tight = i; break; }
    }
    if (!p.ids.empty()) out.push_back(std::move(p));
  }
  return out;
}

// The low-bit fixtures (Q2_K .. IQ1_M) run every CUDA kernel family added for
// them: their experts and most dense tensors are of that type.
const char* kModels[] = {"qwen3moe-a-F32",     "qwen3moe-a-Q8_0",    "qwen3moe-a-Q4_0",   "qwen3moe-a-Q4_K_M",
                         "qwen3moe-a-Q6_K",    "mixtral-a-F32",      "mixtral-a-Q4_K_M",  "qwen3moe-a-Q2_K",
                         "qwen3moe-a-Q3_K_M",  "qwen3moe-a-IQ3_S",   "qwen3moe-a-IQ3_XXS", "qwen3moe-a-IQ2_S",
                         "qwen3moe-a-IQ2_XS",  "qwen3moe-a-IQ2_XXS", "qwen3moe-a-IQ1_M",  "qwen3moe-a-IQ1_S",
                         // gpt-oss: biases, sinks, 16-key windows on even layers, swiglu-oai, MXFP4 experts
                         "gptoss-a-BF16",      "gptoss-a-MXFP4_MOE",
                         // glm4moe: q/k/v biases, partial NEOX rope, a dense lead layer, sigmoid gating with
                         // the choice bias, renormalised and scaled weights, a shared expert
                         "glm4moe-a-F32",      "glm4moe-a-Q4_K_M"};

struct Pair {
  std::unique_ptr<GuildModel> model;
  std::unique_ptr<gc::CudaDecoder> gpu;
  bool master = false;
  bool half_master = false;  // BF16/F16 weights
};

// Root mean square of a - b over n logits.
double rms_diff(const float* a, const float* b, int n) {
  double sq = 0.0;
  for (int j = 0; j < n; ++j) sq += (static_cast<double>(a[j]) - b[j]) * (static_cast<double>(a[j]) - b[j]);
  return std::sqrt(sq / n);
}

// sliding_history < 0: the decoder's default ring history.
bool load_pair(const std::string& fx, const std::string& name, int n_ctx, Pair* out, int sliding_history = -1) {
  const std::string path = fx + "/models/" + name + ".gguf";
  if (!fs::exists(path)) return false;
  LoadOptions opt;
  opt.n_threads = 2;
  opt.kv_type = KvType::F16;
  opt.gpu = "cpu";  // the reference is the CPU runtime, wherever the CUDA package is found
  std::string err;
  out->model = GuildModel::load(path, opt, &err);
  if (!out->model) {
    std::printf("  %s: CPU load failed: %s\n", name.c_str(), err.c_str());
    return false;
  }
  gc::CudaDecoderOptions go;
  go.n_ctx = n_ctx;
  go.max_tokens = 512;
  go.layers = out->model->recipe().executor_layers();  // the architecture's step parameters
  if (sliding_history >= 0) go.sliding_history = sliding_history;
  CHECK_MSG(!go.layers.empty(), "%s: the recipe has a GPU gap: %s", name.c_str(), out->model->recipe().gpu_gap().c_str());
  out->gpu = gc::CudaDecoder::create(out->model->hparams(), out->model->weights(), go, &err);
  CHECK_MSG(out->gpu != nullptr, "%s: CudaDecoder::create: %s", name.c_str(), err.c_str());
  out->half_master = name.find("-F16") != std::string::npos || name.find("-BF16") != std::string::npos;
  out->master = name.find("-F32") != std::string::npos || out->half_master;
  return out->gpu != nullptr;
}


// The fixture model on the CPU runtime (null, said why, when missing or failing).
std::unique_ptr<GuildModel> load_cpu_model(const std::string& fx, const char* name) {
  const std::string path = fx + "/models/" + name + ".gguf";
  if (!fs::exists(path)) {
    std::printf("  %s fixture not found: nothing checked\n", name);
    return nullptr;
  }
  LoadOptions opt;
  opt.n_threads = 2;
  opt.gpu = "cpu";
  std::string err;
  auto model = GuildModel::load(path, opt, &err);
  CHECK_MSG(model != nullptr, "%s: %s", name, err.c_str());
  return model;
}

}  // namespace

// Step parameters that name tensors the weights lack never run: create
// refuses them in one line naming the layer (the recipes the runners build
// always match their tensors; this guards the interface).
TEST(steps_without_their_tensors_are_refused) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  auto model = load_cpu_model(fx, "qwen3moe-a-Q8_0");
  if (!model) return;
  std::string err;
  const std::vector<ExecutorLayer> good = model->recipe().executor_layers();
  REQUIRE(good.size() == 2 && good[0].moe);
  struct Case {
    const char* what;
    void (*spoil)(ExecutorLayer*);
  };
  const Case cases[] = {
      {"attention sinks without their tensor", [](ExecutorLayer* l) { l->attention.sinks = true; }},
      {"q/k/v biases without their tensors", [](ExecutorLayer* l) { l->attention.qkv_bias = true; }},
      {"an expert choice bias without sigmoid gating or its tensor", [](ExecutorLayer* l) { l->experts.choice_bias = true; }},
      {"a shared expert without its tensors", [](ExecutorLayer* l) { l->experts.shared_expert = true; }},
      {"a router bias without its tensor", [](ExecutorLayer* l) { l->experts.router_bias = true; }},
  };
  for (const Case& c : cases) {
    gc::CudaDecoderOptions go;
    go.n_ctx = 64;
    go.max_tokens = 16;
    go.layers = good;
    c.spoil(&go.layers[1]);
    err.clear();
    auto dec = gc::CudaDecoder::create(model->hparams(), model->weights(), go, &err);
    CHECK(dec == nullptr);
    CHECK_MSG(err == std::string("CUDA decoder: layer 1: ") + c.what, "%s", err.c_str());
  }
}

TEST(prompt_logits_match_cpu_runtime) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  int compared = 0;
  for (const char* name : kModels) {
    Pair pr;
    if (!load_pair(fx, name, 512, &pr)) continue;
    const int n_vocab = pr.model->hparams().n_vocab;
    for (const Prompt& p : prompts_of(fx + "/expected/" + name)) {
      const int n = static_cast<int>(p.ids.size());
      std::string err;
      auto s = GuildSession::create(*pr.model, n + 8, &err);
      REQUIRE(s);
      std::vector<float> cpu(static_cast<size_t>(n) * n_vocab), gpu(cpu.size(), NAN);
      std::vector<int32_t> gpu_argmax(n, -1);
      REQUIRE(s->eval(p.ids, true, cpu.data(), &err));
      CHECK_MSG(pr.gpu->forward(p.ids.data(), n, 0, gpu.data(), true, &err, gpu_argmax.data()), "%s", err.c_str());
      // BF16/F16 weights: the CPU kernels round activations to 16 bits, the
      // GPU's keep F32; each is within the fixtures' rms 0.05 of llama.cpp's
      // exact logits (the GPU checked below), so within 0.1 of each other.
      const double rms_limit = pr.half_master ? 0.1 : pr.master ? 0.05 : 0.5;
      const std::string exact_file = fx + "/expected/" + name + "/logits-" + p.name + ".exact.f32";
      if (pr.half_master && fs::exists(exact_file)) {
        const std::vector<float> exact = check::read_f32(exact_file);
        REQUIRE(exact.size() == gpu.size());
        size_t over = 0;
        double worst_exact = 0;
        for (size_t i = 0; i < p.tight; ++i) {
          const double rms = rms_diff(gpu.data() + i * n_vocab, exact.data() + i * n_vocab, n_vocab);
          worst_exact = std::max(worst_exact, std::isnan(rms) ? 1e30 : rms);
          over += !(rms <= 0.05);
        }
        std::printf("  %s/%s: against llama.cpp's exact logits, max rms %.4f over %zu positions\n", name, p.name.c_str(),
                    worst_exact, p.tight);
        CHECK_MSG(over == 0, "%s/%s: %zu positions with rms > 0.05 from llama.cpp's exact logits", name,
                  p.name.c_str(), over);
      }
      // A quantized model's GPU path rounds activations to Q8_1 where the CPU
      // uses Q8_K/Q8_0 (as llama.cpp's backends do): logits differ by the rms
      // below, so the top token may flip only where the CPU's top-2 logit
      // margin is within reach of that noise. Where the margin is clear
      // (>= kClearMargin) the argmax must agree everywhere, and over ten or
      // more positions at 90 % of all of them.
      constexpr float kClearMargin = 0.5f;
      size_t bad_rms = 0, same_argmax = 0, argmax_dev = 0, bad_argmax_dev = 0, clear = 0, clear_same = 0;
      double worst = 0, sum_rms = 0;
      float flipped_margin = 0;
      for (size_t i = 0; i < p.tight; ++i) {
        const float* c = cpu.data() + i * n_vocab;
        const float* g = gpu.data() + i * n_vocab;
        const double rms = rms_diff(g, c, n_vocab);
        worst = std::max(worst, std::isnan(rms) ? 1e30 : rms);
        sum_rms += rms;
        bad_rms += !(rms <= rms_limit);
        const bool same = argmax(c, n_vocab) == argmax(g, n_vocab);
        const float m = margin(c, n_vocab);
        same_argmax += same;
        if (!same) flipped_margin = std::max(flipped_margin, m);
        if (m >= kClearMargin) {
          ++clear;
          clear_same += same;
        }
        bad_argmax_dev += gpu_argmax[i] != argmax(g, n_vocab);
        ++argmax_dev;
      }
      std::printf("  %s/%s: %d tokens, checked %zu (router margin), rms mean %.4f max %.4f, argmax %zu/%zu "
                  "(%zu/%zu where the margin >= %.1f; largest flipped margin %.3f)\n",
                  name, p.name.c_str(), n, p.tight, p.tight ? sum_rms / p.tight : 0.0, worst, same_argmax, p.tight,
                  clear_same, clear, kClearMargin, flipped_margin);
      CHECK_MSG(bad_rms == 0, "%s/%s: %zu positions with rms > %.2g", name, p.name.c_str(), bad_rms, rms_limit);
      if (pr.master)
        CHECK_MSG(same_argmax == p.tight, "%s/%s: argmax %zu/%zu", name, p.name.c_str(), same_argmax, p.tight);
      else
        CHECK_MSG(clear_same == clear && (p.tight < 10 || same_argmax >= 0.9 * p.tight), "%s/%s: argmax %zu/%zu, %zu/%zu where clear",
                  name, p.name.c_str(), same_argmax, p.tight, clear_same, clear);
      CHECK_MSG(bad_argmax_dev == 0, "%s/%s: device argmax differs from the logits' argmax at %zu rows", name,
                p.name.c_str(), bad_argmax_dev);
      ++compared;
    }
  }
  CHECK(compared > 0);
}

TEST(greedy_decode_matches_cpu_and_graphs_replay_exactly) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  int compared = 0;
  for (const char* name : kModels) {
    Pair pr;
    if (!load_pair(fx, name, 512, &pr)) continue;
    const int n_vocab = pr.model->hparams().n_vocab;
    json::Value greedy = load_json(fx + "/expected/" + name + "/greedy.json");
    const auto& prompts = greedy["prompts"].as_array();
    for (size_t pi = 0; pi < prompts.size() && pi < 2; ++pi) {
      const std::vector<int32_t> prompt = ids_of(prompts[pi]["prompt_ids"]);
      const int steps = 32;
      const double tol = pr.master ? 0.05 : 0.5;
      std::string err;
      // CPU: prefill, then one token at a time; record ids and margins.
      auto s = GuildSession::create(*pr.model, static_cast<int>(prompt.size()) + steps + 4, &err);
      REQUIRE(s);
      std::vector<float> lg(n_vocab);
      REQUIRE(s->eval(prompt, false, lg.data(), &err));
      std::vector<int32_t> cpu_ids;
      std::vector<float> cpu_margin;
      for (int i = 0; i < steps; ++i) {
        const int32_t t = argmax(lg.data(), n_vocab);
        cpu_ids.push_back(t);
        cpu_margin.push_back(margin(lg.data(), n_vocab));
        REQUIRE(s->eval(std::span<const int32_t>(&t, 1), false, lg.data(), &err));
      }
      size_t must = cpu_ids.size();
      for (size_t i = 0; i < cpu_margin.size(); ++i)
        if (cpu_margin[i] < tol) { must = i; break; }

      // GPU with graphs: prefill, then steps fed with its own choices.
      pr.gpu->set_use_graphs(true);
      const int replays0 = pr.gpu->graph_replays();
      std::vector<float> gl(n_vocab);
      int32_t am = -1;
      REQUIRE(pr.gpu->forward(prompt.data(), static_cast<int>(prompt.size()), 0, gl.data(), false, &err, &am));
      CHECK(am == argmax(gl.data(), n_vocab));
      std::vector<int32_t> gpu_ids;
      std::vector<std::vector<float>> graph_logits;
      int pos = static_cast<int>(prompt.size());
      for (int i = 0; i < steps; ++i) {
        const int32_t t = argmax(gl.data(), n_vocab);
        gpu_ids.push_back(t);
        REQUIRE(pr.gpu->forward(&t, 1, pos++, gl.data(), false, &err, &am));
        CHECK(am == argmax(gl.data(), n_vocab));
        graph_logits.push_back(gl);
      }
      CHECK_MSG(pr.gpu->graph_replays() - replays0 == steps, "%s: %d graph replays for %d steps", name,
                pr.gpu->graph_replays() - replays0, steps);
      size_t same = 0;
      while (same < gpu_ids.size() && gpu_ids[same] == cpu_ids[same]) ++same;
      std::printf("  %s/%zu: greedy %zu/%d equal to the CPU runtime (must: %zu)\n", name, pi, same, steps, must);
      CHECK_MSG(same >= must, "%s prompt %zu: diverged at %zu, margin allows %zu", name, pi, same, must);

      // The same steps without graphs: bit-identical logits.
      pr.gpu->set_use_graphs(false);
      REQUIRE(pr.gpu->forward(prompt.data(), static_cast<int>(prompt.size()), 0, gl.data(), false, &err));
      pos = static_cast<int>(prompt.size());
      int differ = 0;
      for (int i = 0; i < steps; ++i) {
        REQUIRE(pr.gpu->forward(&gpu_ids[i], 1, pos++, gl.data(), false, &err));
        differ += std::memcmp(gl.data(), graph_logits[i].data(), n_vocab * sizeof(float)) != 0;
      }
      CHECK_MSG(differ == 0, "%s: %d of %d steps differ between graph replay and plain launches", name, differ, steps);
      pr.gpu->set_use_graphs(true);
      ++compared;
    }
  }
  CHECK(compared > 0);
}

// Decode steps across the decoder's position ranges (a captured graph per
// range: [0, 512), [512, 1024), then [1024, n_ctx) here): replayed steps equal
// plain launches bit for bit and agree with a prefill of the same positions
// (a different attention kernel); each range is captured once.
TEST(decode_ranges_match_plain_launches_and_prefill) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  Pair pr;
  const int n_ctx = 1100;
  if (!load_pair(fx, "qwen3moe-a-F32", n_ctx, &pr)) {  // the other tests still run
    std::printf("  qwen3moe-a-F32 fixture not found: not run\n");
    return;
  }
  const int n_vocab = pr.model->hparams().n_vocab;
  std::vector<int32_t> seq(n_ctx);
  for (int i = 0; i < n_ctx; ++i) seq[i] = static_cast<int32_t>((i * 7919 + 13) % std::min(n_vocab, 4000));
  std::string err;
  std::vector<float> gl(n_vocab);
  // Positions [p0, p0 + n) as prompts of at most 512 tokens (rows: every row's logits, or null).
  auto prefill = [&](int p0, int n, std::vector<float>* rows) {
    pr.gpu->set_use_graphs(true);
    if (rows) rows->assign(static_cast<size_t>(n) * n_vocab, 0.0f);
    for (int i = 0; i < n; i += 512) {
      const int m = std::min(512, n - i);
      float* out = rows ? rows->data() + static_cast<size_t>(i) * n_vocab : gl.data();
      if (!pr.gpu->forward(seq.data() + p0 + i, m, p0 + i, out, rows != nullptr, &err)) return false;
    }
    return true;
  };
  // Single-token steps at positions [p0, p0 + n), with or without graphs.
  auto steps = [&](int p0, int n, bool graphs, std::vector<std::vector<float>>* out) {
    pr.gpu->set_use_graphs(graphs);
    for (int i = 0; i < n; ++i) {
      if (!pr.gpu->forward(&seq[p0 + i], 1, p0 + i, gl.data(), false, &err)) return false;
      out->push_back(gl);
    }
    return true;
  };
  struct Segment { int prefill_from, first, n, captures; };
  // Steps 500..529 cross into the second range; 1040..1059 are in the last,
  // clamped one. Captures so far after each segment: 2, then 3.
  const int replays0 = pr.gpu->graph_replays(), captures0 = pr.gpu->graph_captures();
  int replayed = 0;
  for (const Segment sg : {Segment{0, 500, 30, 2}, Segment{530, 1040, 20, 3}}) {
    REQUIRE(prefill(sg.prefill_from, sg.first - sg.prefill_from, nullptr));
    std::vector<std::vector<float>> graph_logits, plain_logits;
    REQUIRE(steps(sg.first, sg.n, true, &graph_logits));
    replayed += sg.n;
    CHECK_MSG(pr.gpu->graph_captures() - captures0 == sg.captures, "positions %d..: %d graphs captured, want %d",
              sg.first, pr.gpu->graph_captures() - captures0, sg.captures);
    // The same steps again, plain (each step rewrites its own cache row with the same bits).
    REQUIRE(steps(sg.first, sg.n, false, &plain_logits));
    int differ = 0;
    for (int i = 0; i < sg.n; ++i)
      differ += std::memcmp(plain_logits[i].data(), graph_logits[i].data(), n_vocab * sizeof(float)) != 0;
    CHECK_MSG(differ == 0, "%d of %d steps from %d differ between graph replay and plain launches", differ, sg.n,
              sg.first);
    std::vector<float> rows;
    REQUIRE(prefill(sg.first, sg.n, &rows));
    double worst = 0.0;
    int worst_pos = -1;
    for (int i = 0; i < sg.n; ++i) {
      const double rms = rms_diff(graph_logits[i].data(), rows.data() + static_cast<size_t>(i) * n_vocab, n_vocab);
      if (rms > worst) { worst = rms; worst_pos = sg.first + i; }
    }
    std::printf("  positions %d..%d: worst rms |decode - prefill| %.3g (position %d)\n", sg.first,
                sg.first + sg.n - 1, worst, worst_pos);
    CHECK_MSG(worst <= 0.05, "decode and prefill logits differ: rms %.3g at position %d", worst, worst_pos);
  }
  CHECK_MSG(pr.gpu->graph_replays() - replays0 == replayed, "%d graph replays for %d steps",
            pr.gpu->graph_replays() - replays0, replayed);
  // prepare_graphs: nothing left to capture here; positions past the context refused.
  CHECK(pr.gpu->prepare_graphs(0, n_ctx - 1, &err));
  CHECK(pr.gpu->graph_captures() - captures0 == 3);
  CHECK(!pr.gpu->prepare_graphs(0, n_ctx, &err));
  CHECK(!err.empty());
  pr.gpu->set_use_graphs(true);
}

// gpt-oss far past its 16-key window: prompts in two passes (the second at
// pos0 300 skips whole key tiles), then graph-replayed steps across the
// first decode range (chunks wholly below the window skipped), against the
// CPU runtime's rows. No ring history: the windowed layers' KV is a ring of
// 16 + 512 rows, so positions from 528 on wrap. Without router margins for these ids a routing flip
// may move a position: 90 % of them must agree (a broken window or sink
// moves every position past the window).
TEST(sliding_windows_and_sinks_match_cpu_past_the_window) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  int compared = 0;
  for (const char* name : {"gptoss-a-BF16", "gptoss-a-MXFP4_MOE"}) {
    Pair pr;
    const int n_ctx = 700, n_prompt = 520, n_total = 600;
    if (!load_pair(fx, name, n_ctx, &pr, /*sliding_history=*/0)) continue;
    const int ring = pr.model->hparams().sliding_window + 512;
    CHECK(pr.gpu->memory().kv_cache < static_cast<size_t>(pr.model->hparams().n_layer) * 2 * n_ctx *
                                          pr.model->hparams().n_head_kv * pr.model->hparams().head_dim_k * 2);
    REQUIRE(pr.model->hparams().sliding_window > 0 && pr.model->hparams().sliding_window < 128);
    const int n_vocab = pr.model->hparams().n_vocab;
    std::vector<int32_t> seq(n_total);
    for (int i = 0; i < n_total; ++i) seq[i] = static_cast<int32_t>((i * 7919 + 13) % std::min(n_vocab, 2400));
    std::string err;
    auto s = GuildSession::create(*pr.model, n_ctx, &err);
    REQUIRE(s);
    std::vector<float> cpu(static_cast<size_t>(n_total) * n_vocab), gpu(cpu.size(), NAN);
    REQUIRE(s->eval(seq, true, cpu.data(), &err));
    pr.gpu->set_use_graphs(true);
    CHECK_MSG(pr.gpu->forward(seq.data(), 300, 0, gpu.data(), true, &err), "%s", err.c_str());
    CHECK_MSG(pr.gpu->forward(seq.data() + 300, n_prompt - 300, 300, gpu.data() + 300 * static_cast<size_t>(n_vocab),
                              true, &err),
              "%s", err.c_str());
    for (int p = n_prompt; p < n_total; ++p)
      CHECK_MSG(pr.gpu->forward(&seq[p], 1, p, gpu.data() + static_cast<size_t>(p) * n_vocab, false, &err), "%s",
                err.c_str());
    // Resumable: a cut whose first query's window is still in the ring (600 - 528 = 72 <= 100 - 15), not one below it.
    CHECK(pr.gpu->resume_point(100) == 100 && pr.gpu->resume_point(50) == 0 && pr.gpu->resume_point(0) == 0);
    CHECK(ring < n_total);
    const double limit = pr.half_master ? 0.1 : pr.master ? 0.05 : 0.5;  // as prompt_logits_match_cpu_runtime
    int within = 0, clear = 0, clear_same = 0;
    double sum = 0;
    for (int p = 0; p < n_total; ++p) {
      const float* c = cpu.data() + static_cast<size_t>(p) * n_vocab;
      const float* g = gpu.data() + static_cast<size_t>(p) * n_vocab;
      const double rms = rms_diff(g, c, n_vocab);
      sum += std::isnan(rms) ? 1e30 : rms;
      within += rms <= limit;
      if (margin(c, n_vocab) >= 0.5f) {
        ++clear;
        clear_same += argmax(c, n_vocab) == argmax(g, n_vocab);
      }
    }
    std::printf("  %s: %d positions (window %d), rms mean %.4f, %d within %.2g, argmax %d/%d where the margin >= 0.5\n",
                name, n_total, pr.model->hparams().sliding_window, sum / n_total, within, limit, clear_same, clear);
    CHECK_MSG(within >= 0.9 * n_total, "%s: %d of %d positions within rms %.2g", name, within, n_total, limit);
    CHECK_MSG(clear_same >= 0.9 * clear, "%s: argmax %d/%d where clear", name, clear_same, clear);
    ++compared;
  }
  if (compared == 0) std::printf("  no gptoss-a fixture: nothing compared\n");
}

// glm4moe's MTP block on the device (DecoderOptions::nextn) against
// llama.cpp's MTP head on the chat prompt (mtp-chat.exact): the trunk's
// forward leaves its h rows on the device; row i runs (token i, h_{i-1}) at
// position i one step at a time, as the drafter does; the head's argmax and
// top-1 probability come back. Then drafting from the step row, and a feed.
TEST(mtp_block_on_the_gpu_matches_llama_cpp) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  const std::string base = fx + "/expected/glm4moe-a-F32/mtp-chat.exact.";
  if (!fs::exists(base + "logits.f32")) {
    std::printf("  glm4moe-a-F32's mtp-chat.exact fixture not found: nothing checked\n");
    return;
  }
  auto model = load_cpu_model(fx, "glm4moe-a-F32");
  if (!model) return;
  std::string err;
  const ModelHparams& hp = model->hparams();
  gc::CudaDecoderOptions go;
  go.n_ctx = 64;
  go.max_tokens = 32;
  go.layers = model->recipe().executor_layers();
  go.nextn = model->recipe().executor_nextn(&go.nextn_layer);
  REQUIRE(go.nextn);
  auto dec = gc::CudaDecoder::create(hp, model->weights(), go, &err);
  REQUIRE_MSG(dec != nullptr, "%s", err.c_str());
  CHECK(dec->has_nextn());
  const json::Value meta = load_json(base + "json");
  const std::vector<int32_t> ids = ids_of(meta["token_ids"]);
  const int n = static_cast<int>(ids.size()), n_vocab = hp.n_vocab;
  const std::vector<float> want = check::read_f32(base + "logits.f32");
  REQUIRE(want.size() == static_cast<size_t>(n) * n_vocab);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  REQUIRE_MSG(dec->forward(ids.data(), n, 0, logits.data(), false, &err), "%s", err.c_str());
  int same = 0, clear = 0, clear_same = 0;
  float worst_p = 0.0f;
  for (int i = 0; i < n; ++i) {
    // h table row i is h_{i-1} (row 0 the held h: zeros for position 0).
    REQUIRE_MSG(dec->nextn_hold(i == 0 ? -1 : i, &err), "%s", err.c_str());
    int32_t top1 = -1;
    float p = -1.0f;
    REQUIRE_MSG(dec->nextn_step(ids[i], false, i, &top1, &p, &err), "%s", err.c_str());
    const float* w = want.data() + static_cast<size_t>(i) * n_vocab;
    const int32_t ref = argmax(w, n_vocab);
    double sum = 0.0;
    for (int v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(w[v]) - w[ref]);
    worst_p = std::max(worst_p, std::fabs(p - static_cast<float>(1.0 / sum)));
    same += top1 == ref;
    if (margin(w, n_vocab) >= 0.05f) {
      ++clear;
      clear_same += top1 == ref;
    }
  }
  std::printf("  glm4moe-a-F32 MTP block on the GPU: argmax %d/%d (%d/%d where llama.cpp's margin >= 0.05), "
              "top-1 probability max |d| %.2g\n", same, n, clear_same, clear, worst_p);
  CHECK(clear_same == clear && clear >= n / 2);
  CHECK_MSG(worst_p <= 0.01f, "top-1 probability off by %.3g", worst_p);
  // Drafting on from the step row: a valid token and probability each step.
  int32_t t = ids[n - 1];
  for (int k = 0; k < 3; ++k) {
    float p = -1.0f;
    REQUIRE_MSG(dec->nextn_step(t, true, n - 1 + k, &t, &p, &err), "%s", err.c_str());
    CHECK(t >= 0 && t < n_vocab && p > 0.0f && p <= 1.0f);
  }
  // A feed of the whole prompt (rows from h table row 0 on) equals the steps' rows:
  // the last row's step after it gives the same top-1 as before.
  REQUIRE(dec->forward(ids.data(), n, 0, logits.data(), false, &err));
  REQUIRE(dec->nextn_hold(-1, &err));
  REQUIRE_MSG(dec->nextn_feed(ids.data(), 0, n - 1, 0, &err), "%s", err.c_str());
  REQUIRE(dec->nextn_hold(n - 1, &err));
  int32_t last_top1 = -1;
  float last_p = 0.0f;
  REQUIRE(dec->nextn_step(ids[n - 1], false, n - 1, &last_top1, &last_p, &err));
  CHECK(last_top1 == argmax(want.data() + static_cast<size_t>(n - 1) * n_vocab, n_vocab));
  // Bad rows are refused in one line; no block: refused too.
  CHECK(!dec->nextn_feed(ids.data(), 30, 5, 0, &err) && err.find("h rows") != std::string::npos);
  CHECK(!dec->nextn_step(n_vocab, false, 0, &last_top1, &last_p, &err) && err.find("out of range") != std::string::npos);
}

// Bad arguments are refused with a message; the decoder stays usable.
TEST(bad_arguments_are_errors) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  Pair pr;
  if (!load_pair(fx, "qwen3moe-a-Q8_0", 64, &pr)) {
    std::printf("  qwen3moe-a-Q8_0 fixture not found: not run\n");
    return;
  }
  std::string err;
  const int32_t bad = pr.model->hparams().n_vocab;
  CHECK(!pr.gpu->forward(&bad, 1, 0, nullptr, false, &err));
  CHECK(!err.empty());
  const int32_t ok = 1;
  CHECK(!pr.gpu->forward(&ok, 1, 64, nullptr, false, &err));
  std::vector<float> lg(pr.model->hparams().n_vocab);
  CHECK_MSG(pr.gpu->forward(&ok, 1, 0, lg.data(), false, &err), "%s", err.c_str());
  gc::CudaDecoderMemory est;
  gc::CudaDecoderOptions go;
  go.n_ctx = 64;
  go.max_tokens = 512;
  CHECK(gc::CudaDecoder::estimate(pr.model->hparams(), pr.model->weights(), go, &est, &err));
  CHECK(est.total() == pr.gpu->memory().total());
  std::printf("  device bytes: weights %zu, kv %zu, scratch %zu\n", est.weights, est.kv_cache, est.scratch);
}
