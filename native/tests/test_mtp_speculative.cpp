// Speculative decoding with the model's MTP (nextn) block as the drafter
// (seed §3): the drafts llama.cpp's draft-mtp driver proposes
// (expected/glm4moe-a-*/mtp-speculative.json), greedy output identical with
// and without drafts, the speculative-sampling rule keeping the output
// distribution, and the window cut by the context, the token budget and a
// cancel exactly as without drafts.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "fixture_json.h"
#include "core/json.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;

namespace {

using check::ids_of;
using check::load_json;

std::unique_ptr<GuildModel> load(const std::string& name, KvType kv = KvType::F16) {
  LoadOptions opt;
  opt.n_threads = 2;
  opt.kv_type = kv;
  std::string err;
  auto m = GuildModel::load(check::fixtures_dir() + "/models/" + name + ".gguf", opt, &err);
  if (!m) std::printf("  %s: %s\n", name.c_str(), err.c_str());
  return m;
}

struct Run {
  GenerateResult result;
  std::vector<std::vector<int32_t>> drafts;  // per window
  std::vector<int> accepted;                 // per window
};

Run generate(GuildSession& s, const std::vector<int32_t>& prompt, int n, DraftMode mode, int max_window = 4,
             float min_p = 0.0f, SamplingParams sampling = {}, bool by_cost = false) {
  Run run;
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = n;
  req.sampling = sampling;
  req.speculative.mode = mode;
  req.speculative.max_window = max_window;
  req.speculative.min_p = min_p;
  req.speculative.by_cost = by_cost;
  req.on_window = [&run](std::span<const int32_t> d, int a) {
    run.drafts.emplace_back(d.begin(), d.end());
    run.accepted.push_back(a);
  };
  run.result = s.generate(req);
  return run;
}

const char* kGlmFiles[] = {"glm4moe-a-F32", "glm4moe-a-Q4_K_M"};

}  // namespace

// Step by step, the drafts and the accepted counts of llama.cpp's draft-mtp
// run (3 drafts per window, p_min 0, F16 KV as there): the drafter is fed
// the trunk's h rows and its own output rows exactly as llama.cpp's.
TEST(mtp_drafts_match_llama_cpp) {
  for (const char* name : kGlmFiles) {
    auto m = load(name);
    REQUIRE(m);
    json::Value spec = load_json(check::fixtures_dir() + "/expected/" + name + "/mtp-speculative.json");
    size_t steps = 0, same_steps = 0, same_prefix_tokens = 0, total_tokens = 0;
    for (const auto& p : spec["prompts"].as_array()) {
      const std::vector<int32_t> prompt = ids_of(p["prompt_ids"]);
      const std::vector<int32_t> want = ids_of(p["generated_ids"]);
      std::string err;
      auto s = GuildSession::create(*m, static_cast<int>(prompt.size() + want.size()) + 8, &err);
      REQUIRE(s);
      Run r = generate(*s, prompt, static_cast<int>(want.size()), DraftMode::Mtp);
      REQUIRE(r.result.stop == StopReason::Length);
      size_t same = 0;
      while (same < want.size() && same < r.result.tokens.size() && r.result.tokens[same] == want[same]) ++same;
      same_prefix_tokens += same;
      total_tokens += want.size();
      // Windows line up while the outputs do: compare them until the first
      // window that reaches past the common prefix.
      const auto& theirs = p["verify_steps"].as_array();
      size_t produced = 0, compared = 0, equal = 0;
      for (size_t i = 0; i < r.drafts.size() && i < theirs.size(); ++i) {
        const std::vector<int32_t> d = ids_of(theirs[i]["draft"]);
        const size_t n = std::min(d.size(), r.drafts[i].size());
        const bool same_window = std::equal(d.begin(), d.begin() + n, r.drafts[i].begin()) &&
                                 theirs[i]["n_accepted"].as_int() == r.accepted[i];
        ++compared;
        equal += same_window;
        produced += static_cast<size_t>(r.accepted[i]) + 1;
        if (produced >= same) break;
      }
      std::printf("  %s/%s: %zu/%zu tokens as llama.cpp, windows %zu (llama.cpp %zu), drafted %d accepted %d "
                  "(llama.cpp %lld / %lld); %zu/%zu compared windows identical\n",
                  name, p["name"].as_string().c_str(), same, want.size(), r.drafts.size(), theirs.size(),
                  r.result.n_drafted, r.result.n_accepted, static_cast<long long>(p["n_drafted"].as_int()),
                  static_cast<long long>(p["n_accept"].as_int()), equal, compared);
      steps += compared;
      same_steps += equal;
    }
    const bool master = std::string(name).find("F32") != std::string::npos;
    // F32: every token and every window as llama.cpp's. Q4_K_M: both sides
    // quantize activations differently (Q8_K vs Q8_1 rows), so near-ties may
    // go the other way; most windows still agree.
    if (master) {
      CHECK_MSG(same_prefix_tokens == total_tokens, "%s: %zu/%zu tokens as llama.cpp", name, same_prefix_tokens,
                total_tokens);
      CHECK_MSG(same_steps == steps, "%s: %zu/%zu windows identical to llama.cpp's", name, same_steps, steps);
    } else {
      CHECK_MSG(same_steps * 10 >= steps * 8, "%s: %zu/%zu windows identical to llama.cpp's", name, same_steps, steps);
    }
  }
}

// Greedy with drafts equals greedy without, bit for bit, for any window size
// and confidence floor; across turns (prefix reuse, the drafter's cache cut
// and resumed) and after a pass that did not feed the drafter.
TEST(greedy_with_mtp_equals_greedy_without) {
  for (const char* name : kGlmFiles) {
    auto m = load(name, KvType::F32);
    REQUIRE(m);
    json::Value spec = load_json(check::fixtures_dir() + "/expected/" + name + "/mtp-speculative.json");
    for (const auto& p : spec["prompts"].as_array()) {
      const std::vector<int32_t> prompt = ids_of(p["prompt_ids"]);
      std::string err;
      auto plain_s = GuildSession::create(*m, 512, &err);
      REQUIRE(plain_s);
      const std::vector<int32_t> plain = generate(*plain_s, prompt, 40, DraftMode::None).result.tokens;
      REQUIRE(plain.size() == 40);
      struct Setting { int window; float min_p; bool by_cost; };
      const Setting settings[] = {{2, 0.0f, false}, {4, 0.0f, false}, {16, 0.0f, false}, {4, 0.2f, false}, {8, 0.0f, true}};
      for (const auto& [window, min_p, by_cost] : settings) {
        {
          auto s = GuildSession::create(*m, 512, &err);
          REQUIRE(s && s->has_mtp_drafter());
          Run r = generate(*s, prompt, 40, DraftMode::Mtp, window, min_p, {}, by_cost);
          CHECK_MSG(r.result.tokens == plain, "%s/%s window %d min_p %.1f%s: differs from plain greedy", name,
                    p["name"].as_string().c_str(), window, min_p, by_cost ? " by cost" : "");
          if (by_cost) {
            // The first drafting request measured this model's window costs
            // (how many drafts they allow depends on this machine's timings).
            CHECK(m->window_costs().valid && m->window_costs().verify_ms[1] > 0 && m->window_costs().verify_ms[8] > 0);
          } else if (min_p == 0.0f) {
            CHECK(r.result.n_drafted > 0);
          }
          CHECK(r.result.n_windows + r.result.n_accepted == 40);
          CHECK(std::string(r.result.drafter) == "mtp");
        }
      }
      // Turns: the second prompt extends the first turn's conversation (prefix
      // reuse) after an unfed eval() in between; equals a fresh session.
      auto s = GuildSession::create(*m, 512, &err);
      REQUIRE(s);
      Run t1 = generate(*s, prompt, 12, DraftMode::Mtp);
      std::vector<int32_t> turn2 = prompt;
      turn2.insert(turn2.end(), t1.result.tokens.begin(), t1.result.tokens.end());
      turn2.insert(turn2.end(), prompt.begin(), prompt.begin() + 5);
      Run t2 = generate(*s, turn2, 20, DraftMode::Mtp);
      std::vector<float> logits(static_cast<size_t>(m->hparams().n_vocab));
      REQUIRE(s->eval(std::span<const int32_t>(prompt.data(), 3), false, logits.data(), &err));
      std::vector<int32_t> turn3 = turn2;
      turn3.insert(turn3.end(), t2.result.tokens.begin(), t2.result.tokens.end());
      Run t3 = generate(*s, turn3, 20, DraftMode::Mtp);
      auto fresh = GuildSession::create(*m, 512, &err);
      REQUIRE(fresh);
      CHECK(generate(*fresh, turn2, 20, DraftMode::None).result.tokens == t2.result.tokens);
      CHECK(generate(*fresh, turn3, 20, DraftMode::None).result.tokens == t3.result.tokens);
      CHECK(t2.result.n_reused > 0 && t2.result.n_drafted > 0);
    }
  }
}

// The window never runs past the context, the token budget or a cancel:
// the same tokens and the same stop as without drafts.
TEST(mtp_windows_stop_like_plain_decode) {
  auto m = load("glm4moe-a-F32");
  REQUIRE(m);
  json::Value spec = load_json(check::fixtures_dir() + "/expected/glm4moe-a-F32/mtp-speculative.json");
  const std::vector<int32_t> prompt = ids_of(spec["prompts"].as_array()[0]["prompt_ids"]);
  std::string err;
  for (int room : {1, 2, 3, 5, 9}) {
    const int n_ctx = static_cast<int>(prompt.size()) + room;
    auto a = GuildSession::create(*m, n_ctx, &err);
    auto b = GuildSession::create(*m, n_ctx, &err);
    REQUIRE(a && b);
    Run plain = generate(*a, prompt, 100, DraftMode::None);
    Run mtp = generate(*b, prompt, 100, DraftMode::Mtp, 16);
    CHECK(plain.result.stop == StopReason::Context && mtp.result.stop == StopReason::Context);
    CHECK_MSG(plain.result.tokens == mtp.result.tokens, "context room %d", room);
  }
  for (int budget : {1, 2, 3, 7}) {
    auto s = GuildSession::create(*m, 256, &err);
    REQUIRE(s);
    Run mtp = generate(*s, prompt, budget, DraftMode::Mtp, 16);
    CHECK(mtp.result.stop == StopReason::Length && static_cast<int>(mtp.result.tokens.size()) == budget);
    for (const auto& d : mtp.drafts) CHECK(static_cast<int>(d.size()) < budget);
  }
  // Cancel from the token callback in the middle of a window.
  for (int stop_after : {1, 2, 5}) {
    auto s = GuildSession::create(*m, 256, &err);
    REQUIRE(s);
    GenerateRequest req;
    req.prompt = prompt;
    req.max_new_tokens = 30;
    req.speculative.mode = DraftMode::Mtp;
    req.speculative.max_window = 8;
    int seen = 0;
    req.on_token = [&](int32_t, const std::string&) { return ++seen < stop_after; };
    GenerateResult r = s->generate(req);
    CHECK(r.stop == StopReason::Cancel && static_cast<int>(r.tokens.size()) == stop_after);
    // The session goes on correctly after the cut window.
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), r.tokens.begin(), r.tokens.end());
    Run cont = generate(*s, next, 10, DraftMode::Mtp);
    auto fresh = GuildSession::create(*m, 256, &err);
    REQUIRE(fresh);
    CHECK(generate(*fresh, next, 10, DraftMode::None).result.tokens == cont.result.tokens);
  }
  // A model without an MTP block: Mtp is refused, Auto decodes with T = 1.
  auto q = load("qwen3moe-a-F32");
  REQUIRE(q);
  auto s = GuildSession::create(*q, 128, &err);
  REQUIRE(s && !s->has_mtp_drafter());
  Run refused = generate(*s, {1, 2, 3}, 4, DraftMode::Mtp);
  CHECK(refused.result.stop == StopReason::Error && refused.result.error_kind == GenerateError::InvalidArgument);
  CHECK(refused.result.error.find("no MTP") != std::string::npos);
  Run autod = generate(*s, {1, 2, 3}, 4, DraftMode::Auto);
  CHECK(autod.result.stop == StopReason::Length && autod.result.n_drafted == 0);
  Run bad = generate(*s, {1, 2, 3}, 4, DraftMode::Auto, 17);
  CHECK(bad.result.stop == StopReason::Error && bad.result.error.find("out of range") != std::string::npos);
}

// With sampling, drafts change how fast tokens come, not which: the joint
// distribution of the first three sampled tokens over many seeds is the same
// with and without MTP (chi-square test of homogeneity, alpha 0.001).
TEST(mtp_sampling_keeps_the_distribution) {
  auto m = load("glm4moe-a-F32");
  REQUIRE(m);
  json::Value spec = load_json(check::fixtures_dir() + "/expected/glm4moe-a-F32/mtp-speculative.json");
  const std::vector<int32_t> prompt = ids_of(spec["prompts"].as_array()[3]["prompt_ids"]);
  std::string err;
  auto s = GuildSession::create(*m, 512, &err);
  REQUIRE(s);
  constexpr int kRuns = 1500;
  std::map<std::vector<int32_t>, int> counts[2];
  int drafted = 0, accepted = 0;
  for (int mode = 0; mode < 2; ++mode) {
    for (int seed = 0; seed < kRuns; ++seed) {
      SamplingParams sp;
      sp.temperature = 1.0f;
      sp.top_k = 3;
      sp.seed = static_cast<uint64_t>(seed) * 7919 + 17;
      Run r = generate(*s, prompt, 3, mode ? DraftMode::Mtp : DraftMode::None, 4, 0.0f, sp);
      REQUIRE(r.result.tokens.size() == 3);
      ++counts[mode][r.result.tokens];
      if (mode) { drafted += r.result.n_drafted; accepted += r.result.n_accepted; }
    }
  }
  // Cells with an expected count of at least 5 in both samples; the rest pooled.
  std::map<std::vector<int32_t>, std::pair<int, int>> cells;
  for (int mode = 0; mode < 2; ++mode)
    for (const auto& [k, c] : counts[mode]) (mode ? cells[k].second : cells[k].first) += c;
  std::vector<std::pair<int, int>> kept;
  std::pair<int, int> pooled{0, 0};
  for (const auto& [k, c] : cells) {
    if (c.first + c.second >= 10) kept.push_back(c);
    else { pooled.first += c.first; pooled.second += c.second; }
  }
  if (pooled.first + pooled.second > 0) kept.push_back(pooled);
  double chi2 = 0.0;
  for (const auto& c : kept) {
    const double e = (c.first + c.second) / 2.0;  // equal sample sizes
    chi2 += (c.first - e) * (c.first - e) / e + (c.second - e) * (c.second - e) / e;
  }
  const double df = static_cast<double>(kept.size()) - 1.0;
  // Wilson-Hilferty: the chi-square quantile at 1 - 0.001 (z = 3.09).
  const double a = 2.0 / (9.0 * df);
  const double critical = df * std::pow(1.0 - a + 3.09 * std::sqrt(a), 3.0);
  std::printf("  %zu cells, chi2 %.1f (critical %.1f at df %.0f); MTP drafted %d, accepted %d\n", kept.size(), chi2,
              critical, df, drafted, accepted);
  CHECK(accepted > kRuns / 4);  // the rule was exercised, both ways
  CHECK(accepted < drafted);
  CHECK_MSG(chi2 < critical, "chi2 %.1f >= %.1f: the distributions differ", chi2, critical);
}

