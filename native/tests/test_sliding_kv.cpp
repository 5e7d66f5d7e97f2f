// Sliding-window layers keep only the KV rows they can attend to
// (runtime/kv_cache.h): gpt-oss's windowed layers in a session whose cache
// slides (small batch and history so the 16-position window of the fixture
// wraps many times) give the same logits and greedy tokens, bit for bit, as
// a session holding every position; a cut within the kept history reuses the
// prefix, a cut past it runs the prompt again; what is allocated is what the
// estimate said.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "fixture_json.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/session_memory.h"

using namespace guild;

namespace {

std::unique_ptr<GuildModel> load(const std::string& name) {
  LoadOptions opt;
  opt.n_threads = 2;
  std::string err;
  auto m = GuildModel::load(check::fixtures_dir() + "/models/" + name + ".gguf", opt, &err);
  if (!m) std::printf("  %s: %s\n", name.c_str(), err.c_str());
  return m;
}

std::vector<int32_t> greedy(GuildSession& s, const std::vector<int32_t>& prompt, int n, GenerateResult* out = nullptr) {
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = n;
  req.ignore_eog = true;
  GenerateResult r = s.generate(req);
  if (out) *out = r;
  return r.tokens;
}

}  // namespace

TEST(windowed_layers_slide_and_agree_with_a_full_cache) {
  for (const char* name : {"gptoss-a-BF16", "gptoss-a-MXFP4_MOE"}) {
    auto m = load(name);
    REQUIRE(m);
    const std::vector<int> windows = m->recipe().attention_windows();
    int n_windowed = 0;
    for (int w : windows) n_windowed += w > 0;
    REQUIRE(n_windowed > 0);  // gpt-oss: every other layer
    json::Value greedy_json = check::load_json(check::fixtures_dir() + "/expected/" + name + "/greedy.json");
    std::vector<int32_t> prompt;
    for (const auto& p : greedy_json["prompts"].as_array()) {
      const std::vector<int32_t> ids = check::ids_of(p["prompt_ids"]);
      if (ids.size() > prompt.size()) prompt = ids;  // the longest
    }
    const int n_ctx = 512;
    std::string err;
    auto full = GuildSession::create(*m, n_ctx, &err);
    REQUIRE(full);
    SessionShape shape;
    shape.max_batch = 4;
    shape.sliding_history = 16;
    auto sliding = GuildSession::create(*m, n_ctx, &err, shape);
    REQUIRE(sliding);
    // Windowed layers hold window + pass (16: a speculative window) + history rows.
    for (size_t l = 0; l < windows.size(); ++l) {
      const int want = windows[l] > 0 ? windows[l] + 16 + 16 : n_ctx;
      CHECK_MSG(sliding->kv().layer_rows(static_cast<int>(l)) == want, "%s layer %zu: %d rows, want %d", name, l,
                sliding->kv().layer_rows(static_cast<int>(l)), want);
      CHECK(full->kv().layer_rows(static_cast<int>(l)) == n_ctx);
    }
    SessionShape est = shape;
    est.windows = windows;
    CHECK(sliding->kv().bytes() == estimate_session_memory(m->hparams(), n_ctx, m->pool().size(), KvType::F16, false, est).kv);
    CHECK(sliding->kv().bytes() < full->kv().bytes());

    // Prompt logits, every row: the sliding cache in passes of 4 equals the full one.
    const int n_vocab = m->hparams().n_vocab;
    std::vector<float> a(prompt.size() * static_cast<size_t>(n_vocab)), b(a.size());
    if (!full->eval(prompt, true, a.data(), &err)) std::printf("  eval: %s\n", err.c_str());
    REQUIRE(err.empty());
    if (!sliding->eval(prompt, true, b.data(), &err)) std::printf("  eval: %s\n", err.c_str());
    REQUIRE(err.empty());
    CHECK_MSG(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, "%s: prompt logits differ", name);
    CHECK(sliding->kv().first_held(0) > 0 || windows[0] == 0 || static_cast<int>(prompt.size()) <= windows[0] + 32);

    // Greedy decode far past the kept rows.
    full->reset();
    sliding->reset();
    const std::vector<int32_t> want = greedy(*full, prompt, 100);
    const std::vector<int32_t> got = greedy(*sliding, prompt, 100);
    CHECK_MSG(got == want, "%s: greedy tokens differ on the sliding cache", name);

    // A cut within the history reuses the prefix; one past it runs the prompt again.
    std::vector<int32_t> convo = prompt;
    convo.insert(convo.end(), got.begin(), got.end());
    for (const auto& [cut, reused] : {std::pair<size_t, bool>{10, true}, std::pair<size_t, bool>{60, false}}) {
      std::vector<int32_t> next(convo.begin(), convo.end() - static_cast<std::ptrdiff_t>(cut));
      next.push_back(convo[convo.size() - cut] == 7 ? 8 : 7);  // a different token at the cut
      GenerateResult r;
      const std::vector<int32_t> s_tokens = greedy(*sliding, next, 8, &r);
      auto fresh = GuildSession::create(*m, n_ctx, &err);
      REQUIRE(fresh);
      CHECK_MSG(s_tokens == greedy(*fresh, next, 8), "%s: cut %zu: tokens differ from a fresh session", name, cut);
      CHECK_MSG(reused == (r.n_reused > 0), "%s: cut %zu: reused %d", name, cut, r.n_reused);
      convo = next;
      convo.insert(convo.end(), s_tokens.begin(), s_tokens.end());
    }
    std::printf("  %s: %d windowed layers of %d rows (full: %d); prompt %zu + 100 tokens identical\n", name,
                n_windowed, sliding->kv().layer_rows(0), n_ctx, prompt.size());
  }
}
