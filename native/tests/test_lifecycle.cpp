// The execution lifecycle (seed §1-3): staged load and its profile, model-
// scoped execution state, the FIFO generation queue with cancellation,
// speculative windows with commit/rollback, and fail-closed readiness.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "check.h"
#include "core/json.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;
using Clock = std::chrono::steady_clock;

namespace {

std::unique_ptr<GuildModel> load(const std::string& file, KvType kv = KvType::F16, int n_ctx = 256,
                                 size_t max_queued = 64) {
  LoadOptions opt;
  opt.n_threads = 2;
  opt.n_ctx = n_ctx;
  opt.kv_type = kv;
  opt.max_queued = max_queued;
  std::string err;
  auto m = GuildModel::load(check::fixtures_dir() + "/models/" + file, opt, &err);
  if (!m) std::printf("  load failed: %s\n", err.c_str());
  return m;
}

const std::vector<int32_t> kPrompt = {2501, 872, 198, 1639, 266, 374, 279, 2062, 2174, 315, 434,
                                      81,   681, 30,  2502, 198, 2501, 395, 380, 517, 198};

GenerateResult run(GuildModel& m, int n, const DraftSource& drafter = {}) {
  std::string err;
  auto s = GuildSession::create(m, 0, &err);
  GenerateRequest req;
  req.prompt = kPrompt;
  req.max_new_tokens = n;
  req.drafter = drafter;
  return s->generate(req);
}

}  // namespace

TEST(profile_has_the_fourteen_stages_in_order) {
  auto m = load("qwen3moe-a-Q8_0.gguf");
  REQUIRE(m);
  const json::Value p = m->profile().to_json();
  // Round-trip through text: what the CLI writes must parse back.
  std::string err;
  auto parsed = json::parse(json::serialize(p), &err);
  REQUIRE(parsed);
  const json::Value& prof = *parsed;
  CHECK(prof["schema"].as_string() == "guild.startup-profile/1");
  const auto& stages = prof["stages"].as_array();
  REQUIRE(stages.size() == static_cast<size_t>(kLoadStageCount));
  double prev_end = 0.0, sum = 0.0;
  for (int i = 0; i < kLoadStageCount; ++i) {
    const json::Value& s = stages[i];
    CHECK_MSG(s["name"].as_string() == kLoadStages[i], "stage %d is %s", i, s["name"].as_string().c_str());
    const double start = s["start_ms"].as_double(), end = s["end_ms"].as_double();
    CHECK(start >= 0.0 && end >= start && start >= prev_end - 1e-9);
    CHECK(std::fabs(s["duration_ms"].as_double() - (end - start)) < 1e-6);
    CHECK(s["detail"].is_object() && !s["detail"].empty());
    CHECK(s["bytes"].is_int() && s["bytes"].as_int() >= 0);
    prev_end = end;
    sum += end - start;
  }
  const double total = prof["total_ms"].as_double();
  CHECK(total >= prev_end);
  CHECK(sum <= total + 1e-6 && sum >= 0.5 * total);  // stages cover (most of) the load
  CHECK_MSG(stages[2]["bytes"].as_int() == 3166528, "container bytes %lld",
            static_cast<long long>(stages[2]["bytes"].as_int()));  // the file
  CHECK(prof["fallbacks"].is_array() && !prof["fallbacks"].empty());  // no .gexec here
  CHECK(prof["placement"]["layers"].size() == 2);
  CHECK(prof["machine"]["physical_cores"].as_int() >= 1);
}

TEST(load_progress_reports_stages_and_can_cancel) {
  std::vector<std::string> seen;
  LoadOptions opt;
  opt.n_threads = 1;
  opt.progress = [&](const char* stage, double) { seen.push_back(stage); return true; };
  std::string err;
  auto m = GuildModel::load(check::fixtures_dir() + "/models/qwen3moe-a-Q8_0.gguf", opt, &err);
  REQUIRE(m);
  CHECK(seen.size() == static_cast<size_t>(kLoadStageCount) + 1 && seen.back() == "ready");
  opt.progress = [](const char* stage, double) { return std::strcmp(stage, "dense_weights") != 0; };
  LoadErrorKind kind;
  auto cancelled = GuildModel::load(check::fixtures_dir() + "/models/qwen3moe-a-Q8_0.gguf", opt, &err, &kind);
  CHECK(!cancelled && kind == LoadErrorKind::Cancelled);
  CHECK(err.find("cancelled") != std::string::npos);
}

TEST(two_models_with_different_settings_interleave) {
  auto a = load("qwen3moe-a-F32.gguf", KvType::F32, 128);
  auto b = load("qwen3moe-a-F32.gguf", KvType::F16, 96);
  REQUIRE(a && b);
  CHECK(a->execution_state()->kv_type == KvType::F32 && b->execution_state()->kv_type == KvType::F16);
  const std::vector<int32_t> alone_a = run(*a, 12).tokens, alone_b = run(*b, 12).tokens;
  std::string err;
  auto sa = GuildSession::create(*a, 0, &err), sb = GuildSession::create(*b, 0, &err);
  CHECK(sa->n_ctx() == 128 && sb->n_ctx() == 96);
  // Interleave token by token from two threads.
  std::vector<int32_t> got_a, got_b;
  std::mutex turn;
  auto gen = [&](GuildSession& s, std::vector<int32_t>& out) {
    GenerateRequest req;
    req.prompt = kPrompt;
    req.max_new_tokens = 12;
    req.on_token = [&](int32_t t, const std::string&) { out.push_back(t); std::this_thread::yield(); return true; };
    s.generate(req);
  };
  std::thread ta([&] { gen(*sa, got_a); }), tb([&] { gen(*sb, got_b); });
  ta.join();
  tb.join();
  CHECK(got_a == alone_a);
  CHECK(got_b == alone_b);
}

TEST(four_concurrent_requests_run_one_at_a_time_in_order) {
  auto m = load("qwen3moe-a-Q8_0.gguf");
  REQUIRE(m);
  const std::vector<int32_t> expected = run(*m, 8).tokens;
  std::string err;
  std::vector<std::unique_ptr<GuildSession>> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(GuildSession::create(*m, 0, &err));
  std::mutex mu;
  std::vector<int> start_order;
  std::atomic<int> running{0}, max_running{0};
  std::vector<GenerateResult> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      GenerateRequest req;
      req.prompt = kPrompt;
      req.max_new_tokens = 8;
      req.on_queue = [&, i](int pos) {
        if (pos == 0) { std::lock_guard<std::mutex> l(mu); start_order.push_back(i); }
      };
      req.on_token = [&](int32_t, const std::string&) {
        const int r = ++running;
        int prev = max_running.load();
        while (r > prev && !max_running.compare_exchange_weak(prev, r)) {}
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        --running;
        return true;
      };
      results[i] = sessions[i]->generate(req);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // enqueue in order 0,1,2,3
  }
  for (auto& t : threads) t.join();
  CHECK(max_running.load() == 1);
  CHECK((start_order == std::vector<int>{0, 1, 2, 3}));
  for (const auto& r : results) CHECK(r.tokens == expected);
}

TEST(cancel_while_running_and_while_queued) {
  auto m = load("qwen3moe-a-Q8_0.gguf", KvType::F16, 512);
  REQUIRE(m);
  std::string err;
  auto busy = GuildSession::create(*m, 0, &err), waiting = GuildSession::create(*m, 0, &err);
  std::atomic<int> produced{0};
  GenerateResult busy_result;
  std::thread t([&] {
    GenerateRequest req;
    req.prompt = kPrompt;
    req.max_new_tokens = 400;
    req.on_token = [&](int32_t, const std::string&) {
      ++produced;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return true;
    };
    busy_result = busy->generate(req);
  });
  while (produced.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // A second request waits; cancel it while queued.
  std::atomic<int> position{-1};
  std::thread q([&] {
    GenerateRequest req;
    req.prompt = kPrompt;
    req.max_new_tokens = 4;
    req.on_queue = [&](int p) { position = p; };
    GenerateResult r = waiting->generate(req);
    CHECK(r.stop == StopReason::Cancel && r.tokens.empty());
  });
  while (position.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(m->queue().size() == 2);
  const auto t0 = Clock::now();
  waiting->cancel();
  q.join();
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 1.0);
  CHECK(m->queue().size() == 1);
  // Cancel the running one: it stops within a decode step, keeping its tokens.
  busy->cancel();
  t.join();
  CHECK(busy_result.stop == StopReason::Cancel);
  CHECK(busy_result.tokens.size() >= 3 && busy_result.tokens.size() < 400);
  CHECK(m->queue().size() == 0);
  // The session works normally afterwards.
  CHECK(run(*m, 4).tokens.size() == 4);
}

TEST(queue_is_bounded) {
  auto m = load("qwen3moe-a-Q8_0.gguf", KvType::F16, 512, /*max_queued=*/1);
  REQUIRE(m);
  std::string err;
  auto a = GuildSession::create(*m, 0, &err), b = GuildSession::create(*m, 0, &err), c = GuildSession::create(*m, 0, &err);
  std::atomic<bool> started{false};
  std::thread ta([&] {
    GenerateRequest req;
    req.prompt = kPrompt;
    req.max_new_tokens = 300;
    req.on_token = [&](int32_t, const std::string&) { started = true; std::this_thread::sleep_for(std::chrono::milliseconds(3)); return true; };
    a->generate(req);
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> pos_b{-1};
  std::thread tb([&] {
    GenerateRequest req;
    req.prompt = kPrompt;
    req.max_new_tokens = 2;
    req.on_queue = [&](int p) { pos_b = p; };
    b->generate(req);
  });
  while (pos_b.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  GenerateRequest req;
  req.prompt = kPrompt;
  req.max_new_tokens = 2;
  GenerateResult r = c->generate(req);
  CHECK(r.stop == StopReason::Error && r.error_kind == GenerateError::QueueFull);
  CHECK(r.error.find("queue full") != std::string::npos);
  a->cancel();
  ta.join();
  tb.join();
}

namespace {
// Proposes wrong drafts (the next id after what greedy will choose is
// unknown to it, so it just proposes fixed ids) — exercising rollback.
int wrong_drafter(void*, std::span<const int32_t>, int32_t last, int max_drafts, int32_t* out) {
  for (int i = 0; i < max_drafts; ++i) out[i] = (last + 7 * (i + 1)) % 2000;
  return max_drafts;
}
// Replays a known continuation: every draft is right.
struct Oracle { std::vector<int32_t> prompt, continuation; };
int oracle_drafter(void* ctx, std::span<const int32_t> history, int32_t, int max_drafts, int32_t* out) {
  const Oracle& o = *static_cast<const Oracle*>(ctx);
  // After k accepted tokens the history holds the prompt and g0..g(k-2)
  // (n + k - 1 tokens) and `last` is g(k-1): the drafts are g(k), g(k+1), …
  const size_t next = history.size() + 1 - o.prompt.size();
  int n = 0;
  for (; n < max_drafts && next + n < o.continuation.size(); ++n) out[n] = o.continuation[next + n];
  return n;
}
}  // namespace

TEST(speculative_windows_never_change_output) {
  auto m = load("qwen3moe-a-F32.gguf", KvType::F32);
  REQUIRE(m);
  std::string err;
  auto plain_s = GuildSession::create(*m, 0, &err);
  GenerateRequest req;
  req.prompt = kPrompt;
  req.max_new_tokens = 20;
  const GenerateResult plain = plain_s->generate(req);
  REQUIRE(plain.tokens.size() == 20);

  // Wrong drafts: every window is rejected after its first token.
  auto wrong_s = GuildSession::create(*m, 0, &err);
  req.drafter = {wrong_drafter, nullptr, 3};
  const GenerateResult wrong = wrong_s->generate(req);
  CHECK(wrong.tokens == plain.tokens);
  CHECK(wrong.n_drafted > 0 && wrong.n_accepted == 0);
  // KV state and history equal the plain run's.
  CHECK(wrong_s->history() == plain_s->history());
  const int kv_dim = wrong_s->kv().k_dim();
  bool kv_equal = true;
  for (int l = 0; l < m->hparams().n_layer; ++l)
    for (int p = 0; p < plain_s->n_past(); ++p)
      kv_equal = kv_equal && std::memcmp(wrong_s->kv().k_row(l, p), plain_s->kv().k_row(l, p), kv_dim * 4) == 0 &&
                 std::memcmp(wrong_s->kv().v_row(l, p), plain_s->kv().v_row(l, p), wrong_s->kv().v_dim() * 4) == 0;
  CHECK(kv_equal);

  // Right drafts: accepted, same output.
  Oracle oracle{kPrompt, plain.tokens};
  auto right_s = GuildSession::create(*m, 0, &err);
  req.drafter = {oracle_drafter, &oracle, 3};
  const GenerateResult right = right_s->generate(req);
  CHECK(right.tokens == plain.tokens);
  CHECK_MSG(right.n_accepted > 0, "accepted %d of %d", right.n_accepted, right.n_drafted);
  CHECK(right_s->history() == plain_s->history());
}

TEST(device_failure_leaves_the_model_not_ready) {
  auto m = load("qwen3moe-a-Q8_0.gguf");
  REQUIRE(m);
  CHECK(m->ready());
  CHECK(run(*m, 2).tokens.size() == 2);
  m->inject_fault_for_testing();
  GenerateResult failed = run(*m, 4);
  CHECK(failed.stop == StopReason::Error && failed.error_kind == GenerateError::Device);
  CHECK(!m->ready());
  GenerateResult refused = run(*m, 4);
  CHECK(refused.stop == StopReason::Error && refused.error_kind == GenerateError::NotReady);
  CHECK(refused.error.find("not ready") != std::string::npos);
  std::string err;
  auto s = GuildSession::create(*m, 0, &err);
  std::vector<float> logits(m->hparams().n_vocab);
  CHECK(!s->eval(kPrompt, false, logits.data(), &err));
  CHECK(err.find("not ready") != std::string::npos);
}

TEST(sessions_pin_the_kernel_provider) {
  auto m = load("qwen3moe-a-Q8_0.gguf");
  REQUIRE(m);
  const std::string provider = m->kernels().name;
  const size_t before = LeaseRegistry::instance().holders(provider).size();
  std::string err;
  {
    auto s = GuildSession::create(*m, 0, &err);
    auto holders = LeaseRegistry::instance().holders(provider);
    CHECK(holders.size() == before + 1);
    bool named = false;
    for (const auto& h : holders) named = named || h.holder.find("session") != std::string::npos;
    CHECK(named);
  }
  CHECK(LeaseRegistry::instance().holders(provider).size() == before);
}
