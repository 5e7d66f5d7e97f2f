// guild-bench: Guild's side of the prefill/decode benchmark, without Node.
// Prints one JSON object: prompt and decode tokens/s, time to first token,
// peak RSS, as min/median/max over repetitions, and this host's RAM read
// bandwidth with the same threads.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/tuning.h"
#include "core/json.h"
#include "runtime/gpu_execution.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "tool_args.h"

using namespace guild;

namespace {

const char* kUsage =
    "usage: guild-bench --model PATH [--threads N] [--prompt-tokens 512] [--gen-tokens 128] [--reps 3]\n"
    "                   [--ctx N] [--kv f16|f32] [--profile-out FILE] [--seed S]\n"
    "                   [--prompt-file FILE] [--warmup N]\n"
    "                   [--gpu auto|cpu|cuda:N] [--gpu-budget-gib X] [--experts-cpu] [--no-online-policy]\n"
    "                   [--gpu-peers cuda:N,...] [--gpu-peer-budget-gib X]\n"
    "                   [--draft none|mtp] [--spec-max S] [--spec-min-p P] [--spec-rule cost|confidence]\n"
    "                   [--window-costs] [--tuning knob=value,...]\n"
    "  --prompt-file: the prompt's token ids (whitespace or comma separated) instead of random ones\n"
    "  --warmup N: before timing, one untimed generation of N prompt tokens + 4 decode steps, and the\n"
    "             decode graphs of the timed steps' positions captured\n"
    "  --gpu: where to run (default auto: the GPU when the build and machine have one)\n"
    "  --gpu-budget-gib X: device memory for the model; experts beyond it are computed by the CPU pool\n"
    "  --experts-cpu: every routed expert on the CPU (dense weights and KV on the GPU)\n"
    "  --gpu-peers: peer GPUs, each with an expert cache of its own (--gpu-peer-budget-gib X each)\n"
    "  --draft mtp: the model's MTP block drafts windows of up to S tokens (--spec-max, default 4) while\n"
    "             its top-1 probability stays >= P (--spec-min-p, default 0); each rep times a run\n"
    "             without drafts and one with them, on the same prompt (speedup = their ratio);\n"
    "             --spec-rule confidence drafts while p >= P only (llama.cpp's rule), cost (default) also\n"
    "             stops where the measured window costs say a longer window loses\n"
    "  --window-costs: the verifier's cost of a window of T tokens against T single steps, T = 1..S\n"
    "  --tuning: A/B knobs (core/tuning.h; over their GUILD_* environment variables), e.g.\n"
    "             cuda_graphs=0,cuda_fused=0,cuda_pdl=0,gemm_direct=0,pool_hold=0,pin_experts=0,\n"
    "             staging_ring_mib=N,prefill_stream_min=N,gpu_host_choices=N,force_kernels=NAME\n";

json::Value stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  json::Value o = json::Value::object();
  o.set("min", v.front());
  o.set("median", v[v.size() / 2]);
  o.set("max", v.back());
  return o;
}

double peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) * 1024.0;
}

// This host's RAM read bandwidth with the model's pool (GB/s, best of three
// passes over 1 GiB, each thread summing its slice): decode with experts in
// RAM is bound by it, and runs land on hosts that differ, so the figure goes
// beside the tokens/s it explains.
double ram_read_gbps(ThreadPool& pool) {
  constexpr size_t kBytes = size_t{1} << 30;
  std::vector<uint64_t> buf(kBytes / sizeof(uint64_t));
  const size_t n = buf.size();
  pool.parallel_for(pool.size(), [&](int64_t t, int) {  // touch (first-touch pages by the reading threads)
    const size_t a = n * t / pool.size(), b = n * (t + 1) / pool.size();
    for (size_t i = a; i < b; ++i) buf[i] = i;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
  double best = 0.0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int64_t t, int) {
      const size_t a = n * t / pool.size(), b = n * (t + 1) / pool.size();
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t i = a;
      for (; i + 4 <= b; i += 4) { s0 += buf[i]; s1 += buf[i + 1]; s2 += buf[i + 2]; s3 += buf[i + 3]; }
      for (; i < b; ++i) s0 += buf[i];
      sums[static_cast<size_t>(t)] = s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(kBytes) / s / 1e9);
  }
  uint64_t total = 0;
  for (uint64_t v : sums) total += v;
  if (total != (static_cast<uint64_t>(n) * (n - 1)) / 2) return -1.0;  // every word read once
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  tools::Args args;
  if (!args.parse(argc, argv, {"model", "threads", "prompt-tokens", "gen-tokens", "reps", "ctx", "kv", "seed", "profile-out", "prompt-file", "warmup",
                   "gpu", "gpu-budget-gib", "gpu-peers", "gpu-peer-budget-gib", "draft", "spec-max", "spec-min-p", "spec-rule", "tuning"},
                  {"experts-cpu", "window-costs"},
                  kUsage))
    return 2;
  if (!args.has("model")) { std::fprintf(stderr, "%s", kUsage); return 2; }
  std::vector<int32_t> prompt;
  if (args.has("prompt-file")) {
    std::ifstream pf(args.get("prompt-file"));
    if (!pf) tools::die("cannot read " + args.get("prompt-file"));
    std::stringstream ss;
    ss << pf.rdbuf();
    std::string text = ss.str();
    for (char& ch : text) if (ch == ',') ch = ' ';
    std::istringstream in(text);
    long long id = 0;
    while (in >> id) prompt.push_back(static_cast<int32_t>(id));
    if (!in.eof()) tools::die("--prompt-file: expected token ids");
  }
  const int n_prompt = prompt.empty() ? static_cast<int>(args.get_int("prompt-tokens", 512)) : static_cast<int>(prompt.size());
  const int n_gen = static_cast<int>(args.get_int("gen-tokens", 128));
  const int reps = static_cast<int>(args.get_int("reps", 3));
  if (n_prompt < 1 || n_gen < 1 || reps < 1) { std::fprintf(stderr, "%s", kUsage); return 2; }
  const std::string draft = args.get("draft", "none");
  if (draft != "none" && draft != "mtp") tools::die("--draft must be none or mtp");
  SpeculativeParams spec;
  spec.mode = draft == "mtp" ? DraftMode::Mtp : DraftMode::None;
  spec.max_window = static_cast<int>(args.get_int("spec-max", 4));
  spec.min_p = args.has("spec-min-p") ? std::stof(args.get("spec-min-p")) : 0.0f;
  if (spec.max_window < 1 || spec.max_window > kMaxWindow) tools::die("--spec-max must be within 1..16");
  const std::string rule = args.get("spec-rule", "cost");
  if (rule != "cost" && rule != "confidence") tools::die("--spec-rule must be cost or confidence");
  spec.by_cost = rule == "cost";
  if (!(spec.min_p >= 0.0f && spec.min_p <= 1.0f)) tools::die("--spec-min-p must be within [0, 1]");

  if (args.has("tuning")) {
    Tuning t = tuning();
    std::string terr;
    if (!parse_tuning(args.get("tuning"), &t, &terr)) tools::die("--tuning: " + terr);
    set_tuning(t);
  }
  LoadOptions opt;
  opt.n_threads = static_cast<int>(args.get_int("threads", 0));
  opt.n_ctx = static_cast<int>(args.get_int("ctx", n_prompt + n_gen + 8));
  opt.kv_type = args.get("kv", "f16") == "f32" ? KvType::F32 : KvType::F16;
  opt.gpu = args.get("gpu", "");
  if (args.has("gpu-budget-gib")) {
    const double gib = std::stod(args.get("gpu-budget-gib"));
    if (!(gib > 0)) tools::die("--gpu-budget-gib must be positive");
    opt.gpu_budget_bytes = static_cast<int64_t>(gib * 1024.0 * 1024.0 * 1024.0);
  }
  opt.experts_on_cpu = args.has("experts-cpu");
  opt.gpu_peers = args.get("gpu-peers", "");
  if (args.has("gpu-peer-budget-gib")) {
    const double gib = std::stod(args.get("gpu-peer-budget-gib"));
    if (!(gib > 0)) tools::die("--gpu-peer-budget-gib must be positive");
    opt.gpu_peer_budget_bytes = static_cast<int64_t>(gib * 1024.0 * 1024.0 * 1024.0);
  }
  std::string err;
  const auto t_load = std::chrono::steady_clock::now();
  // Load progress on stderr (the JSON result goes to stdout).
  opt.progress = [t_load](const char* stage, double) {
    std::fprintf(stderr, "[%8.1f ms] load: %s\n",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count(), stage);
    return true;
  };
  auto model = GuildModel::load(args.get("model"), opt, &err);
  if (!model) tools::die(err);
  if (args.has("profile-out")) {
    FILE* pf = std::fopen(args.get("profile-out").c_str(), "wb");
    const std::string text = json::serialize(model->profile().to_json(), true);
    if (!pf || std::fwrite(text.data(), 1, text.size(), pf) != text.size()) tools::die("cannot write " + args.get("profile-out"));
    std::fclose(pf);
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();

  // A random prompt of regular tokens (no control tokens, so nothing stops early).
  std::mt19937 rng(static_cast<unsigned>(args.get_int("seed", 42)));
  const int n_vocab = model->hparams().n_vocab;
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab) tools::die("--prompt-file: token id " + std::to_string(t) + " is out of range");
  while (static_cast<int>(prompt.size()) < n_prompt) {
    const int32_t t = static_cast<int32_t>(rng() % static_cast<unsigned>(n_vocab));
    if (model->vocab().token_kind(t) == TokenKind::Normal) prompt.push_back(t);
  }

  // A prompt, then n_new greedy tokens in a fresh session (a fixed number of
  // decode steps: end-of-generation tokens do not stop it).
  auto generation = [&](std::span<const int32_t> p, int n_new, const SpeculativeParams& sp) {
    auto session = GuildSession::create(*model, opt.n_ctx, &err);
    if (!session) tools::die(err);
    GenerateRequest req;
    req.prompt = p;
    req.max_new_tokens = n_new;
    req.sampling.temperature = 0.0f;
    req.ignore_eog = true;
    req.speculative = sp;
    return session->generate(req);
  };
  const SpeculativeParams no_drafts;
  auto timed_generation = [&] { return generation(prompt, n_gen, no_drafts); };

  const int n_warmup = static_cast<int>(args.get_int("warmup", 0));
  if (n_warmup > 0) {
    // Untimed: faults in the weights this prompt touches, starts the pool.
    const std::span<const int32_t> head(prompt.data(), static_cast<size_t>(std::min(n_warmup, n_prompt)));
    if (generation(head, 4, spec).stop == StopReason::Error) tools::die("warm-up generation failed");
    // The decode graphs of the timed steps' positions (captured per range of
    // positions): a capture inside a timed run is a one-off, not decode speed.
    if (model->gpu() && n_gen > 1 && n_prompt < opt.n_ctx &&
        !model->gpu()->decoder().prepare_graphs(n_prompt, std::min(n_prompt + n_gen, opt.n_ctx) - 1, &err))
      tools::die(err);
  }
  if (model->gpu()) model->gpu()->take_hit_rate();  // count the timed runs only
  std::vector<double> pp, tg, ttft, tg_spec, speedup;
  json::Value speculative = json::Value::object();
  long long drafted = 0, accepted = 0, windows = 0, spec_tokens = 0;
  bool same_tokens = true;
  for (int r = 0; r < reps; ++r) {
    GenerateResult res = timed_generation();
    if (res.stop == StopReason::Error) tools::die(res.error);
    pp.push_back(res.n_prompt / (res.prompt_ms / 1000.0));
    if (res.tokens.size() > 1) tg.push_back((res.tokens.size() - 1) / (res.decode_ms / 1000.0));
    ttft.push_back(res.ttft_ms);
    if (spec.mode != DraftMode::None) {
      // The same prompt with drafts, right after: the ratio of the two is the speedup.
      GenerateResult sr = generation(prompt, n_gen, spec);
      if (sr.stop == StopReason::Error) tools::die(sr.error);
      same_tokens = same_tokens && sr.tokens == res.tokens;
      drafted += sr.n_drafted;
      accepted += sr.n_accepted;
      windows += sr.n_windows;
      spec_tokens += static_cast<long long>(sr.tokens.size());
      if (sr.tokens.size() > 1 && res.tokens.size() > 1) {
        tg_spec.push_back((sr.tokens.size() - 1) / (sr.decode_ms / 1000.0));
        speedup.push_back(tg_spec.back() / tg.back());
      }
    }
  }
  if (spec.mode != DraftMode::None) {
    speculative.set("drafter", "mtp");
    speculative.set("spec_max", spec.max_window);
    speculative.set("spec_min_p", spec.min_p);
    speculative.set("spec_rule", rule);
    if (model->window_costs().valid) {
      json::Value costs = json::Value::array();
      for (int T = 1; T <= WindowCosts::kMaxT; ++T)
        if (model->window_costs().verify_ms[static_cast<size_t>(T)] > 0) {
          json::Value row = json::Value::object();
          row.set("tokens", T);
          row.set("ms", model->window_costs().verify_ms[static_cast<size_t>(T)]);
          costs.push_back(std::move(row));
        }
      speculative.set("calibrated_window_ms", std::move(costs));
      speculative.set("calibrated_draft_step_ms", model->window_costs().draft_step_ms);
    }
    speculative.set("drafted", drafted);
    speculative.set("accepted", accepted);
    speculative.set("windows", windows);
    speculative.set("acceptance_rate", drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0);
    speculative.set("tokens_per_window", windows > 0 ? static_cast<double>(spec_tokens) / windows : 0.0);
    if (!tg_spec.empty()) {
      speculative.set("decode_tokens_per_s", stats(tg_spec));
      speculative.set("speedup", stats(speedup));
    }
    speculative.set("greedy_tokens_identical", same_tokens);
  }
  // The verifier's cost of a window of T tokens at the prompt's end, against
  // T single steps (median of 5, each rolled back): what drafting must beat.
  json::Value window_costs = json::Value::array();
  if (args.has("window-costs")) {
    auto session = GuildSession::create(*model, opt.n_ctx, &err);
    if (!session) tools::die(err);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    const std::span<const int32_t> head(prompt.data(), prompt.size() - 1);
    if (!head.empty() && !session->eval(head, false, logits.data(), &err)) tools::die(err);
    const int base = session->n_past();
    double one_ms = 0.0;
    for (int T = 1; T <= spec.max_window && base + T <= opt.n_ctx; ++T) {
      // The prompt's last token, then T - 1 "drafts" (prompt tokens: regular ids).
      std::vector<int32_t> w(static_cast<size_t>(T), prompt.back());
      for (int i = 1; i < T; ++i) w[static_cast<size_t>(i)] = prompt[static_cast<size_t>(i) % prompt.size()];
      std::vector<double> ms;
      for (int k = 0; k < 6; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        session->verify_window(w);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        session->commit(base, 0);
      }
      ms.erase(ms.begin());  // the first pass warms this window's shapes
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      if (T == 1) one_ms = med;
      json::Value row = json::Value::object();
      row.set("tokens", T);
      row.set("ms", med);
      row.set("cost_vs_single_steps", one_ms > 0 ? med / (T * one_ms) : 0.0);
      window_costs.push_back(std::move(row));
    }
  }
  // The timed runs' cache figures, before the probes below run more steps.
  json::Value gpu = json::Value::object();
  if (GpuExecution* g = model->gpu()) {
    gpu.set("cache_hit_rate", g->take_hit_rate());
    gpu.set("cache_swaps", static_cast<unsigned long long>(g->swaps()));
    gpu.set("graph_replays", g->decoder().graph_replays());
    gpu.set("graph_captures", g->decoder().graph_captures());
    gpu.set("host_choices", g->host_choices());        // the GPU's share of the CPU's choices at the end
    gpu.set("host_choice_replans", static_cast<unsigned long long>(g->host_replans()));
  }
  // One more prompt pass with the GPU's counters read around it: how much of
  // the prefill the CPU expert pool was busy, and how many layers streamed.
  json::Value probe = json::Value::object();
  double prefill_busy_ms = 0.0;
  uint64_t prefill_experts = 0;
  if (GpuExecution* g = model->gpu()) {
    auto session = GuildSession::create(*model, opt.n_ctx, &err);
    if (!session) tools::die(err);
    const double busy0 = g->cpu_expert_busy_ms();
    const uint64_t experts0 = g->cpu_experts_computed();
    const uint64_t streamed0 = g->decoder().streamed_layers();
    std::vector<float> logits(static_cast<size_t>(model->hparams().n_vocab));
    const auto t0 = std::chrono::steady_clock::now();
    if (!session->eval(prompt, false, logits.data(), &err)) tools::die(err);
    prefill_busy_ms = g->cpu_expert_busy_ms() - busy0;
    prefill_experts = g->cpu_experts_computed() - experts0;
    probe.set("prefill_ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    probe.set("cpu_expert_busy_ms", prefill_busy_ms);
    probe.set("streamed_layers", static_cast<unsigned long long>(g->decoder().streamed_layers() - streamed0));
    probe.set("stream_min_tokens", g->decoder().stream_min_tokens());
  }
  // Hybrid decode, measured from the CPU's side: one more generation like the
  // timed ones, with the expert pool's busy time and expert count read around
  // it, less the prompt pass's (the probe above: the same prompt). wall - busy
  // is what each token spends outside the CPU's experts (the GPU's layers, the
  // hand-offs): the number to cut when the pool's own share is already at the
  // host's RAM rate.
  json::Value decode_probe = json::Value::object();
  if (GpuExecution* g = model->gpu(); g && g->hybrid() && n_gen > 1) {
    const double busy0 = g->cpu_expert_busy_ms();
    const uint64_t experts0 = g->cpu_experts_computed();
    GenerateResult res = timed_generation();
    if (res.stop == StopReason::Error) tools::die(res.error);
    const double n_steps = static_cast<double>(res.tokens.size() > 1 ? res.tokens.size() - 1 : 1);
    const double busy_ms = std::max(0.0, g->cpu_expert_busy_ms() - busy0 - prefill_busy_ms);
    const double experts = static_cast<double>(g->cpu_experts_computed() - experts0 - prefill_experts);
    decode_probe.set("tokens", n_steps);
    decode_probe.set("ms_per_token", res.decode_ms / n_steps);
    decode_probe.set("cpu_busy_ms_per_token", busy_ms / n_steps);
    decode_probe.set("cpu_experts_per_token", experts / n_steps);
    decode_probe.set("cpu_us_per_expert", experts > 0 ? busy_ms * 1000.0 / experts : 0.0);
    decode_probe.set("outside_cpu_experts_ms_per_token", (res.decode_ms - busy_ms) / n_steps);
  }
  json::Value out = json::Value::object();
  out.set("engine", "guild");
  out.set("model", args.get("model"));
  out.set("threads", model->pool().size());
  out.set("kernels", model->kernels().name);
  out.set("prompt_tokens", n_prompt);
  out.set("gen_tokens", n_gen);
  out.set("reps", reps);
  out.set("ctx", opt.n_ctx);
  out.set("kv", opt.kv_type == KvType::F32 ? "f32" : "f16");
  out.set("warmup_tokens", n_warmup);
  out.set("tuning", tuning_summary(tuning()));  // knobs off their defaults ("" = none)
  out.set("load_ms", load_ms);
  out.set("prompt_tokens_per_s", stats(pp));
  if (!tg.empty()) out.set("decode_tokens_per_s", stats(tg));
  out.set("ttft_ms", stats(ttft));
  if (spec.mode != DraftMode::None) out.set("speculative", std::move(speculative));
  if (args.has("window-costs")) out.set("window_costs", std::move(window_costs));
  out.set("peak_rss_bytes", peak_rss_bytes());
  // Only where experts are read from RAM (CPU only, hybrid): all on the GPU nothing reads it.
  if (!model->gpu() || model->gpu()->hybrid()) out.set("host_ram_read_gbps", ram_read_gbps(model->pool()));
  if (GpuExecution* g = model->gpu()) {
    const auto& mem = g->decoder().memory();
    gpu.set("mode", g->hybrid() ? (opt.experts_on_cpu ? "experts on the CPU" : "hybrid") : "all on the GPU");
    gpu.set("vram_bytes", static_cast<double>(mem.total()));
    gpu.set("vram_weights_bytes", static_cast<double>(mem.weights));
    gpu.set("vram_expert_cache_bytes", static_cast<double>(mem.expert_cache));
    gpu.set("vram_kv_bytes", static_cast<double>(mem.kv_cache));
    gpu.set("vram_scratch_bytes", static_cast<double>(mem.scratch));
    unsigned long long n_moe = 0;
    for (const auto& L : model->weights().layers) n_moe += L.is_moe();
    gpu.set("gpu_experts", static_cast<unsigned long long>(g->cached_experts()));
    gpu.set("peer_experts", static_cast<unsigned long long>(g->peer_experts()));
    gpu.set("cpu_experts", static_cast<unsigned long long>(n_moe * model->hparams().n_expert - g->cached_experts() -
                                                           g->peer_experts()));
    if (opt.gpu_budget_bytes > 0) gpu.set("budget_gib", opt.gpu_budget_bytes / (1024.0 * 1024.0 * 1024.0));
    gpu.set("prefill_probe", std::move(probe));
    if (g->hybrid()) gpu.set("decode_probe", std::move(decode_probe));
  } else {
    gpu.set("mode", "cpu only");
  }
  out.set("gpu", std::move(gpu));
  std::printf("%s\n", json::serialize(out, true).c_str());
  return 0;
}
