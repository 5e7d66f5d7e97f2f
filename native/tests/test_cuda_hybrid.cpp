// Hybrid MoE on the GPU (docs/CUDA.md, "Hybrid MoE"): GuildModel loaded with a
// GPU budget that holds only part of the experts, so the GPU computes its
// cached experts while the CPU expert pool computes the rest in the same step
// (host nodes inside the captured decode graph). Checked against the same
// model with every expert on the GPU, on the fixture models:
//  * logits per prompt position: rms <= 0.05 (float masters) / 0.5 (quantized)
//    and argmax agreement (all / >= 90 %) up to the first position whose
//    recorded router top-k margin is < 0.05 — the two sides quantize the
//    expert activations differently (Q8_1 on the GPU, the CPU tables' Q8_0/Q8_K);
//  * greedy decode through GuildSession: identical ids until the all-GPU
//    top-1/top-2 margin drops below the tolerance; graphs are replayed;
//  * "all experts on the CPU", moving experts between the tiers, the routing
//    counts, two sessions taking turns on the one device KV cache, the
//    calibration record in the profile, and budgets too small to hold the
//    dense weights (an error with gpu = cuda:0, a CPU fallback with auto).
// Skips (exit 77) without fixtures or without a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "core/tuning.h"
#include "cuda_test_util.h"
#include "core/json.h"
#include "cuda/cuda_decoder.h"
#include "runtime/gpu_execution.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace guild;
namespace gc = guild::cuda;

namespace {

using cuda_test::argmax;
using cuda_test::greedy;
using cuda_test::ids_of;
using cuda_test::load_json;
using cuda_test::margin;
using cuda_test::need_gpu;

const char* kModels[] = {"qwen3moe-a-Q8_0",    "mixtral-a-Q4_K_M", "qwen3moe-a-F32",     "qwen3moe-a-Q4_K_M",
                         "qwen3moe-a-IQ2_XXS", "qwen3moe-a-IQ1_M", "gptoss-a-MXFP4_MOE", "gptoss-a-BF16",
                         // glm4moe: a dense lead layer, sigmoid gating with the choice bias, a shared expert
                         "glm4moe-a-Q4_K_M",   "glm4moe-a-F32"};

bool is_master(const std::string& name) {
  return name.find("-F32") != std::string::npos || name.find("-BF16") != std::string::npos;
}

std::unique_ptr<GuildModel> load(const std::string& path, int64_t budget, bool experts_cpu, std::string* err,
                                 const char* gpu = "cuda:0") {
  LoadOptions opt;
  opt.n_threads = 4;
  opt.n_ctx = 512;
  opt.gpu = gpu;
  opt.gpu_budget_bytes = budget;
  opt.experts_on_cpu = experts_cpu;
  return GuildModel::load(path, opt, err);
}

// The first prompt position whose router top-k margin is < 0.05 (routing file).
size_t tight_of(const std::string& dir, const std::string& prompt, size_t n) {
  for (const char* suffix : {"", ".exact"}) {
    const std::string f = dir + "/routing-" + prompt + suffix + ".json";
    if (!fs::exists(f)) continue;
    json::Value r = load_json(f);
    size_t tight = n;
    for (const auto& layer : r["layers"].as_array()) {
      const auto& m = layer["topk_boundary_margin"].as_array();
      for (size_t i = 0; i < m.size() && i < tight; ++i)
        if (m[i].as_double() < 0.05) { tight = i; break; }
    }
    return tight;
  }
  return 0;
}


struct Trio {
  std::unique_ptr<GuildModel> all_gpu, hybrid, experts_cpu;
};

// All-GPU, half the experts' bytes cached, and no expert cached.
bool load_trio(const std::string& fx, const std::string& name, Trio* t) {
  const std::string path = fx + "/models/" + name + ".gguf";
  if (!fs::exists(path)) return false;
  std::string err;
  t->all_gpu = load(path, -1, false, &err);
  CHECK_MSG(t->all_gpu && t->all_gpu->gpu() && !t->all_gpu->gpu()->hybrid(), "%s all-GPU load: %s", name.c_str(), err.c_str());
  if (!t->all_gpu || !t->all_gpu->gpu()) return false;
  // One byte less than everything on the GPU: the hybrid plan then holds as
  // many experts as fit beside the dense part and the prefill staging area
  // (one layer's stack), and the CPU computes the rest.
  const int64_t budget = static_cast<int64_t>(t->all_gpu->gpu()->decoder().memory().total()) - 1;
  t->hybrid = load(path, budget, false, &err);
  CHECK_MSG(t->hybrid && t->hybrid->gpu() && t->hybrid->gpu()->hybrid(), "%s hybrid load: %s", name.c_str(), err.c_str());
  t->experts_cpu = load(path, -1, true, &err);
  CHECK_MSG(t->experts_cpu && t->experts_cpu->gpu() && t->experts_cpu->gpu()->hybrid(), "%s experts-on-CPU load: %s",
            name.c_str(), err.c_str());
  if (!t->hybrid || !t->experts_cpu || !t->hybrid->gpu() || !t->experts_cpu->gpu()) return false;
  const uint64_t cached = t->hybrid->gpu()->cached_experts();
  uint64_t total = 0;
  for (const auto& L : t->hybrid->weights().layers) total += L.is_moe() ? t->hybrid->hparams().n_expert : 0;
  std::printf("  %s: hybrid caches %llu of %llu experts (budget %.1f MiB), experts-on-CPU caches %llu\n", name.c_str(),
              static_cast<unsigned long long>(cached), static_cast<unsigned long long>(total), budget / 1048576.0,
              static_cast<unsigned long long>(t->experts_cpu->gpu()->cached_experts()));
  CHECK(cached > 0 && cached < total);
  CHECK(t->experts_cpu->gpu()->cached_experts() == 0);
  return true;
}

std::vector<float> prompt_logits(GuildModel& m, const std::vector<int32_t>& ids) {
  std::string err;
  auto s = GuildSession::create(m, 512, &err);
  std::vector<float> out(ids.size() * static_cast<size_t>(m.hparams().n_vocab), NAN);
  CHECK_MSG(s && s->eval(ids, true, out.data(), &err), "eval: %s", err.c_str());
  return out;
}

// b against the reference a over the first `upto` positions: rms within the
// limit everywhere, and the same argmax wherever a's top-1/top-2 margin is at
// least the tolerance (below it, activation rounding may legitimately flip it).
void compare(const char* what, const std::vector<float>& a, const std::vector<float>& b, int n_vocab, size_t upto,
             bool master) {
  const double limit = master ? 0.05 : 0.5;
  size_t bad = 0, same = 0, decided = 0, same_decided = 0;
  double worst = 0, sum = 0;
  for (size_t i = 0; i < upto; ++i) {
    const float* x = a.data() + i * n_vocab;
    const float* y = b.data() + i * n_vocab;
    double sq = 0;
    for (int j = 0; j < n_vocab; ++j) sq += (static_cast<double>(x[j]) - y[j]) * (static_cast<double>(x[j]) - y[j]);
    const double rms = std::sqrt(sq / n_vocab);
    worst = std::max(worst, std::isnan(rms) ? 1e30 : rms);
    sum += rms;
    bad += !(rms <= limit);
    const bool eq = argmax(x, n_vocab) == argmax(y, n_vocab);
    same += eq;
    if (margin(x, n_vocab) >= limit) {
      ++decided;
      same_decided += eq;
    }
  }
  std::printf("    %s: %zu positions, rms mean %.4f max %.4f, argmax %zu/%zu (%zu/%zu where the margin >= %.2g)\n", what,
              upto, upto ? sum / upto : 0.0, worst, same, upto, same_decided, decided, limit);
  CHECK_MSG(bad == 0, "%s: %zu positions with rms > %.2g", what, bad, limit);
  CHECK_MSG(same_decided == decided, "%s: argmax differs at %zu of %zu decided positions", what, decided - same_decided,
            decided);
}


}  // namespace

TEST(hybrid_and_experts_on_cpu_match_all_gpu_logits) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  int compared = 0;
  for (const char* name : kModels) {
    Trio t;
    if (!load_trio(fx, name, &t)) continue;
    const int n_vocab = t.all_gpu->hparams().n_vocab;
    json::Value greedy_json = load_json(fx + "/expected/" + name + "/greedy.json");
    const auto& prompts = greedy_json["prompts"].as_array();
    for (size_t pi = 0; pi < prompts.size() && pi < 2; ++pi) {
      const std::vector<int32_t> ids = ids_of(prompts[pi]["prompt_ids"]);
      const std::string pname = prompts[pi]["name"].is_string() ? prompts[pi]["name"].as_string() : "";
      size_t upto = pname.empty() ? 0 : tight_of(fx + "/expected/" + name, pname, ids.size());
      if (upto == 0) upto = std::min<size_t>(ids.size(), 8);  // no routing file: the first positions
      const auto ref = prompt_logits(*t.all_gpu, ids);
      for (auto [m, what] : {std::pair{t.hybrid.get(), " hybrid"}, {t.experts_cpu.get(), " experts-on-CPU"}}) {
        gpu::Decoder& dec = m->gpu()->decoder();
        const int keep = dec.stream_min_tokens();
        // The prompt's uncached experts computed by the CPU server...
        dec.set_stream_min_tokens(0);
        compare((name + std::string(what) + ", CPU experts").c_str(), ref, prompt_logits(*m, ids), n_vocab, upto,
                is_master(name));
        // ... or streamed to the GPU's staging area: the all-GPU computation, bit for bit.
        dec.set_stream_min_tokens(1);
        CHECK_MSG(dec.stream_min_tokens() == 1, "%s%s: no staging area", name, what);
        const auto streamed = prompt_logits(*m, ids);
        CHECK_MSG(std::memcmp(streamed.data(), ref.data(), ref.size() * sizeof(float)) == 0,
                  "%s%s: streamed prefill differs from all-GPU", name, what);
        dec.set_stream_min_tokens(keep);
      }
      ++compared;
    }
  }
  CHECK(compared > 0);
}

TEST(hybrid_greedy_decode_matches_all_gpu_with_graphs) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  int compared = 0, host_read_runs = 0;
  for (const char* name : kModels) {
    Trio t;
    if (!load_trio(fx, name, &t)) continue;
    const double tol = is_master(name) ? 0.05 : 0.5;
    json::Value greedy_json = load_json(fx + "/expected/" + name + "/greedy.json");
    const std::vector<int32_t> prompt = ids_of(greedy_json["prompts"].as_array()[0]["prompt_ids"]);
    const int steps = 24;
    // The all-GPU run's margins bound where the two may legitimately part.
    const cuda_test::GreedyReference reference = cuda_test::greedy_reference(*t.all_gpu, prompt, steps, tol);
    const std::vector<int32_t>& ref = reference.tokens;
    const size_t must = reference.must;
    uint64_t cpu_choices_before[2] = {0, 0};
    for (GuildModel* m : {t.hybrid.get(), t.experts_cpu.get()}) {
      const int replays0 = m->gpu()->decoder().graph_replays();
      const uint64_t cpu0 = m->gpu()->cpu_experts_computed();
      const auto got = greedy(*m, prompt, steps);
      cpu_choices_before[m == t.hybrid.get() ? 0 : 1] = m->gpu()->cpu_experts_computed() - cpu0;
      size_t same = 0;
      while (same < got.size() && same < ref.size() && got[same] == ref[same]) ++same;
      const int replays = m->gpu()->decoder().graph_replays() - replays0;
      std::printf("  %s (%s): greedy %zu/%d equal to all-GPU (must %zu), %d graph replays\n", name,
                  m == t.hybrid.get() ? "hybrid" : "experts on CPU", same, steps, must, replays);
      CHECK_MSG(same >= must, "%s: diverged at %zu, margin allows %zu", name, same, must);
      CHECK_MSG(replays >= steps - 1, "%s: only %d graph replays for %d steps", name, replays, steps);
    }
    // The GPU takes every choice the CPU would compute, reading those experts
    // from page-locked host memory (where the stacks allow it): the same
    // tokens, and the CPU computes fewer choices.
    for (GuildModel* m : {t.hybrid.get(), t.experts_cpu.get()}) {
      gpu::Decoder& dec = m->gpu()->decoder();
      const int k = m->hparams().n_expert_used;
      const int layers = dec.set_host_choices(k);
      if (layers == 0) {
        std::printf("  %s: no layer's experts readable by the GPU in place (not page-locked, or rows not 16-byte "
                    "aligned): host reads not exercised\n", name);
        continue;
      }
      host_read_runs += 1;
      const uint64_t cpu0 = m->gpu()->cpu_experts_computed();
      const auto got = greedy(*m, prompt, steps);
      const uint64_t cpu_choices = m->gpu()->cpu_experts_computed() - cpu0;
      size_t same = 0;
      while (same < got.size() && same < ref.size() && got[same] == ref[same]) ++same;
      std::printf("  %s (%s, GPU reads the CPU's experts in %d layers): greedy %zu/%d equal to all-GPU (must %zu), "
                  "CPU expert choices %llu\n", name, m == t.hybrid.get() ? "hybrid" : "experts on CPU", layers, same,
                  steps, must, static_cast<unsigned long long>(cpu_choices));
      CHECK_MSG(same >= must, "%s with host reads: diverged at %zu, margin allows %zu", name, same, must);
      // Every expert on the CPU: decode's choices all move to the GPU (prefill keeps its own).
      const uint64_t before = cpu_choices_before[m == t.hybrid.get() ? 0 : 1];
      if (m == t.experts_cpu.get()) CHECK_MSG(cpu_choices < before, "%s: the CPU computed %llu choices, %llu without host reads",
                                              name, static_cast<unsigned long long>(cpu_choices), static_cast<unsigned long long>(before));
      else CHECK(cpu_choices <= before);
      dec.set_host_choices(0);
    }
    ++compared;
  }
  CHECK(compared > 0);
  CHECK_MSG(host_read_runs > 0, "no fixture exercised the GPU's reads of host experts");
}

TEST(moving_experts_between_tiers_and_routing_counts) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  Trio t;
  if (!load_trio(fx, "qwen3moe-a-Q8_0", &t)) SKIP_TEST("qwen3moe-a-Q8_0 fixture not found");
  GuildModel& h = *t.hybrid;
  const ModelHparams& hp = h.hparams();
  gpu::Decoder& dec = h.gpu()->decoder();
  json::Value greedy_json = load_json(fx + "/expected/qwen3moe-a-Q8_0/greedy.json");
  const std::vector<int32_t> ids = ids_of(greedy_json["prompts"].as_array()[0]["prompt_ids"]);
  const auto ref = prompt_logits(*t.all_gpu, ids);

  // Routing counts: every choice of every MoE layer is counted once.
  std::string err;
  std::vector<uint32_t> counts;
  REQUIRE(dec.routing_counts(&counts, true, &err));
  prompt_logits(h, ids);
  REQUIRE(dec.routing_counts(&counts, true, &err));
  uint64_t n_moe = 0, total = 0;
  for (const auto& L : h.weights().layers) n_moe += L.is_moe();
  for (uint32_t c : counts) total += c;
  CHECK_MSG(total == n_moe * ids.size() * hp.n_expert_used, "routing counts sum %llu, expected %llu",
            static_cast<unsigned long long>(total), static_cast<unsigned long long>(n_moe * ids.size() * hp.n_expert_used));

  // Swap every layer's cache for the experts it did not hold: output unchanged within tolerance.
  int layers_moved = 0;
  for (int l = 0; l < hp.n_layer; ++l) {
    const int slots = dec.cache_slots(l);
    if (slots == 0) continue;
    std::vector<int> others;
    for (int e = hp.n_expert - 1; e >= 0 && static_cast<int>(others.size()) < slots; --e)
      if (dec.slot_of(l, e) < 0) others.push_back(e);
    REQUIRE(dec.set_layer_experts(l, others, &err));
    for (int e : others) CHECK(dec.slot_of(l, e) >= 0 && dec.cached_expert(l, dec.slot_of(l, e)) == e);
    ++layers_moved;
  }
  CHECK(layers_moved > 0);
  compare("after moving experts", ref, prompt_logits(h, ids), hp.n_vocab, std::min<size_t>(ids.size(), 8), false);
  // Bad cache operations are errors, not crashes.
  CHECK(!dec.set_cached_expert(0, 9999, 0, &err));
  CHECK(!dec.set_cached_expert(0, 0, hp.n_expert, &err));
  CHECK(!dec.set_layer_experts(0, std::vector<int>(hp.n_expert + 1, 0), &err));
}

TEST(sessions_take_turns_on_the_device_kv_cache) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  Trio t;
  if (!load_trio(fx, "qwen3moe-a-Q8_0", &t)) SKIP_TEST("qwen3moe-a-Q8_0 fixture not found");
  json::Value greedy_json = load_json(fx + "/expected/qwen3moe-a-Q8_0/greedy.json");
  const auto& prompts = greedy_json["prompts"].as_array();
  REQUIRE(prompts.size() >= 2);
  const std::vector<int32_t> p0 = ids_of(prompts[0]["prompt_ids"]), p1 = ids_of(prompts[1]["prompt_ids"]);
  GuildModel& m = *t.hybrid;
  const auto alone0 = greedy(m, p0, 12), alone1 = greedy(m, p1, 12);
  std::string err;
  auto a = GuildSession::create(m, 512, &err), b = GuildSession::create(m, 512, &err);
  REQUIRE(a && b);
  auto turn = [](GuildSession& s, const std::vector<int32_t>& prompt, int n) {
    GenerateRequest req;
    req.prompt = prompt;
    req.max_new_tokens = n;
    req.sampling.temperature = 0.0f;
    req.ignore_eog = true;
    return s.generate(req);
  };
  // a: six tokens; b: its own prompt (takes the device KV cache); a again,
  // continuing: its history is reused (not re-sent) but re-prefilled on the
  // device in one pass — exactly what a fresh session given the whole
  // continuation as its prompt does, so the tokens must be identical.
  GenerateResult ra = turn(*a, p0, 6);
  GenerateResult rb = turn(*b, p1, 12);
  std::vector<int32_t> cont(p0);
  cont.insert(cont.end(), ra.tokens.begin(), ra.tokens.end());
  GenerateResult ra2 = turn(*a, cont, 6);
  CHECK(std::equal(ra.tokens.begin(), ra.tokens.end(), alone0.begin()));
  CHECK(rb.tokens == alone1);
  CHECK_MSG(ra2.tokens == greedy(m, cont, 6), "session a after b differs from a fresh session on the same text");
  CHECK(ra2.n_reused == static_cast<int>(cont.size()) - 1);
}

TEST(profile_records_calibration_and_budget_errors) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  Trio t;
  if (!load_trio(fx, "qwen3moe-a-Q8_0", &t)) SKIP_TEST("qwen3moe-a-Q8_0 fixture not found");
  const json::Value p = t.hybrid->profile().to_json();
  const json::Value* calib = nullptr;
  for (const auto& st : p["stages"].as_array())
    if (st["name"].as_string() == "calibration") calib = &st;
  REQUIRE(calib);
  const json::Value& d = (*calib)["detail"];
  CHECK(d["calibration_tokens"].as_int() > 0);
  CHECK(d["cpu_us_per_expert_mean"].as_double() > 0);
  CHECK(d["copy_us_per_expert"].as_double() > 0);
  CHECK(d["gpu_us_per_expert"].as_double() > 0);  // the GPU's own cost, measured beside the CPU's
  const long long stream_min = d["prefill_stream_min_tokens"].as_int(-1);
  CHECK(stream_min == 0 || stream_min >= 2);  // 0: the measured costs say the CPU is always cheaper
  CHECK(d["cpu_us_per_expert_batch"].as_double() > 0);
  CHECK(d["expected_hit_rate"].as_double() > 0 && d["expected_hit_rate"].as_double() <= 1.0);
  const auto& layers = p["placement"]["layers"].as_array();
  CHECK(static_cast<int>(layers.size()) == t.hybrid->hparams().n_layer);
  for (const auto& l : layers)
    if (!l["dense"].as_bool())
      CHECK(l["gpu_experts"].as_int() + l["cpu_experts"].as_int() == t.hybrid->hparams().n_expert);

  const std::string path = fx + "/models/qwen3moe-a-Q8_0.gguf";
  std::string err;
  auto tiny = load(path, 1 << 20, false, &err);
  CHECK(!tiny);
  std::printf("  1 MiB budget on cuda:0: %s\n", err.c_str());
  CHECK(err.find("budget") != std::string::npos);
  auto fallback = load(path, 1 << 20, false, &err, "auto");
  REQUIRE(fallback);
  CHECK(fallback->gpu() == nullptr);
  bool noted = false;
  for (const auto& f : fallback->profile().fallbacks()) noted |= f.reason.find("GPU not used") != std::string::npos;
  CHECK(noted);
}

// The RAM tier: by default (RAM permitting) stage 10 copies the experts into
// page-locked memory and streamed prefill DMAs from there; with
// GUILD_PIN_EXPERTS=0 they stay on the mapping and go through the pinned
// staging ring. Both give the all-GPU logits bit for bit, and the CPU expert
// pool reads the pinned copy like the mapping.
TEST(ram_tier_pinned_copy_and_staging_ring_stream_the_same_bytes) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  const std::string name = "qwen3moe-a-Q8_0";
  const std::string path = fx + "/models/" + name + ".gguf";
  if (!fs::exists(path)) SKIP_TEST("qwen3moe-a-Q8_0 fixture not found");
  std::string err;
  auto all_gpu = load(path, -1, false, &err);
  REQUIRE(all_gpu && all_gpu->gpu());
  const int64_t budget = static_cast<int64_t>(all_gpu->gpu()->decoder().memory().total()) - 1;
  json::Value greedy_json = load_json(fx + "/expected/" + name + "/greedy.json");
  const std::vector<int32_t> ids = ids_of(greedy_json["prompts"].as_array()[0]["prompt_ids"]);
  const auto ref = prompt_logits(*all_gpu, ids);
  const Tuning saved = tuning();
  for (const char* pin : {"1", "0"}) {
    Tuning t = saved;
    t.pin_experts = pin[0] == '1';
    set_tuning(t);
    auto m = load(path, budget, false, &err);
    set_tuning(saved);
    REQUIRE(m && m->gpu() && m->gpu()->hybrid());
    const json::Value p = m->profile().to_json();
    bool pinned = false;
    for (const auto& st : p["stages"].as_array())
      if (st["name"].as_string() == "expert_tiers") pinned = st["detail"]["ram_tier"]["pinned"].as_bool();
    std::printf("  pin_experts=%s: RAM tier %s\n", pin, pinned ? "pinned copy" : "mapping + staging ring");
    CHECK(pinned == (pin[0] == '1'));
    gpu::Decoder& dec = m->gpu()->decoder();
    dec.set_stream_min_tokens(1);
    const uint64_t streamed0 = dec.streamed_layers();
    const auto streamed = prompt_logits(*m, ids);
    CHECK(dec.streamed_layers() > streamed0);
    CHECK_MSG(std::memcmp(streamed.data(), ref.data(), ref.size() * sizeof(float)) == 0,
              "GUILD_PIN_EXPERTS=%s: streamed prefill differs from all-GPU", pin);
    dec.set_stream_min_tokens(0);
    const double busy0 = m->gpu()->cpu_expert_busy_ms();
    compare((name + " hybrid, CPU experts, GUILD_PIN_EXPERTS=" + pin).c_str(), ref, prompt_logits(*m, ids),
            all_gpu->hparams().n_vocab, std::min<size_t>(ids.size(), 8), false);
    CHECK(m->gpu()->cpu_expert_busy_ms() > busy0);
  }
}


// glm4moe's MTP drafter on the GPU in every placement (all on the GPU, a
// budget that caches part of the experts, every expert on the CPU; the MTP
// block itself is resident): greedy output with drafts equals greedy
// without, drafts are proposed and accepted, and the windows follow
// llama.cpp's draft-mtp run (mtp-speculative.json, 3 drafts per window);
// across two sessions taking turns on the device (the drafter re-fed with
// the history the trunk re-runs).
TEST(mtp_drafter_on_the_gpu_in_every_placement) {
  const std::string fx = check::fixtures_dir();
  need_gpu();
  const std::string name = "glm4moe-a-F32";
  Trio t;
  if (!load_trio(fx, name, &t)) {
    std::printf("  %s fixture not found: nothing checked\n", name.c_str());
    return;
  }
  const json::Value spec = load_json(fx + "/expected/" + name + "/mtp-speculative.json");
  const auto& prompts = spec["prompts"].as_array();
  REQUIRE(!prompts.empty());
  auto run = [](GuildSession& s, const std::vector<int32_t>& prompt, int n, DraftMode mode, std::vector<int>* accepted) {
    GenerateRequest req;
    req.prompt = prompt;
    req.max_new_tokens = n;
    req.sampling.temperature = 0.0f;
    req.ignore_eog = true;
    req.speculative.mode = mode;
    req.speculative.max_window = 4;
    req.speculative.by_cost = false;  // llama.cpp's rule: draft while confident (the fixture's run)
    if (accepted) req.on_window = [accepted](std::span<const int32_t>, int a) { accepted->push_back(a); };
    return s.generate(req);
  };
  for (auto [label, m] : {std::pair{"all-GPU", t.all_gpu.get()}, {"hybrid", t.hybrid.get()},
                          {"experts on CPU", t.experts_cpu.get()}}) {
    REQUIRE(m->gpu() && m->gpu()->decoder().has_nextn());
    size_t windows = 0, same_windows = 0;
    for (const auto& p : prompts) {
      const std::vector<int32_t> prompt = ids_of(p["prompt_ids"]);
      const int n = static_cast<int>(p["generated_ids"].as_array().size());
      std::string err;
      auto s = GuildSession::create(*m, 512, &err);
      REQUIRE_MSG(s, "%s", err.c_str());
      std::vector<int> accepted;
      const GenerateResult with = run(*s, prompt, n, DraftMode::Mtp, &accepted);
      auto plain_s = GuildSession::create(*m, 512, &err);
      REQUIRE(plain_s);
      const GenerateResult without = run(*plain_s, prompt, n, DraftMode::None, nullptr);
      CHECK_MSG(with.stop == StopReason::Length && with.error.empty(), "%s: %s", label, with.error.c_str());
      CHECK_MSG(with.tokens == without.tokens, "%s/%s: greedy with MTP drafts differs from greedy without", label,
                p["name"].as_string().c_str());
      CHECK(with.drafter == "mtp" && with.n_drafted > 0);
      const auto& theirs = p["verify_steps"].as_array();
      for (size_t i = 0; i < accepted.size() && i < theirs.size(); ++i) {
        ++windows;
        same_windows += theirs[i]["n_accepted"].as_int() == accepted[i];
      }
      std::printf("  %s %s/%s: %zu tokens, windows %d, drafted %d accepted %d (llama.cpp %lld / %lld)\n", name.c_str(),
                  label, p["name"].as_string().c_str(), with.tokens.size(), with.n_windows, with.n_drafted,
                  with.n_accepted, static_cast<long long>(p["n_drafted"].as_int()),
                  static_cast<long long>(p["n_accept"].as_int()));
    }
    std::printf("  %s %s: %zu/%zu windows accept as many drafts as llama.cpp's\n", name.c_str(), label, same_windows,
                windows);
    CHECK_MSG(same_windows * 10 >= windows * 8, "%s: %zu/%zu windows as llama.cpp's", label, same_windows, windows);
  }
  // Two sessions take turns on one device: a drafts, b takes the device KV
  // (and the MTP block's), a continues: the drafter is re-fed and the output
  // equals a fresh session's.
  GuildModel& m = *t.all_gpu;
  const std::vector<int32_t> p0 = ids_of(prompts[0]["prompt_ids"]);
  const std::vector<int32_t> p1 = ids_of(prompts[prompts.size() > 1 ? 1 : 0]["prompt_ids"]);
  std::string err;
  auto a = GuildSession::create(m, 512, &err), b = GuildSession::create(m, 512, &err);
  REQUIRE(a && b);
  const GenerateResult ra = run(*a, p0, 6, DraftMode::Mtp, nullptr);
  run(*b, p1, 8, DraftMode::Mtp, nullptr);
  std::vector<int32_t> cont(p0);
  cont.insert(cont.end(), ra.tokens.begin(), ra.tokens.end());
  const GenerateResult ra2 = run(*a, cont, 10, DraftMode::Mtp, nullptr);
  auto fresh = GuildSession::create(m, 512, &err);
  REQUIRE(fresh);
  const GenerateResult rf = run(*fresh, cont, 10, DraftMode::None, nullptr);
  CHECK(ra2.tokens == rf.tokens);
  CHECK(ra2.n_drafted > 0);
}
