// Model files are untrusted above the GGUF parser too (issue #20): hyper-
// parameters are bounded and cross-checked against the tensors at load,
// epsilons / rope settings must be finite and positive, what a session will
// allocate is checked before it is, tensor data at any alignment is read
// safely, and a model file rewritten in place fails requests instead of
// killing the process. The hostile files are edited copies of the fixtures
// (model_file_edit.h), written under GUILD_TEST_TMP.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "model_file_edit.h"
#include "models/hparam_limits.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "runtime/session_memory.h"

using namespace guild;
using namespace guild::gguf;
using model_file_edit::Edit;
using model_file_edit::edited_copy;
using model_file_edit::fixture;

namespace {

const char* kBase = "qwen3moe-a-Q8_0.gguf";  // 2 MoE layers, no dense FFN

std::unique_ptr<GuildModel> load(const std::string& path, std::string* err, LoadOptions opt = {}) {
  if (opt.n_threads == 0) opt.n_threads = 2;
  if (opt.n_ctx == 0) opt.n_ctx = 256;
  return GuildModel::load(path, opt, err);
}

Edit set_u32(const std::string& key, uint32_t v) {
  Edit e;
  e.meta = [key, v](GgufWriter& w) { w.add_u32(key, v); };
  return e;
}

const std::vector<int32_t> kPrompt = {2501, 872, 198, 1639, 266, 374, 279, 2062, 2174, 315, 434, 81, 681, 30, 2502, 198};

GenerateResult greedy(GuildModel& m, int n, std::function<bool(int32_t, const std::string&)> on_token = nullptr,
                      std::span<const int32_t> prompt = kPrompt) {
  std::string err;
  auto s = GuildSession::create(m, 0, &err);
  if (!s) {
    GenerateResult r;
    r.stop = StopReason::Error;
    r.error = err;
    return r;
  }
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = n;
  req.sampling.temperature = 0.0f;
  req.on_token = std::move(on_token);
  return s->generate(req);
}

// The load must fail with one line naming the path and containing every `want`.
void expect_load_error(const std::string& path, std::initializer_list<const char*> want, const char* what) {
  std::string err;
  auto m = load(path, &err);
  CHECK_MSG(m == nullptr, "%s: loaded", what);
  CHECK_MSG(err.find('\n') == std::string::npos, "%s: multi-line: %s", what, err.c_str());
  CHECK_MSG(err.rfind(path + ": ", 0) == 0, "%s: does not start with the path: %s", what, err.c_str());
  for (const char* w : want) CHECK_MSG(err.find(w) != std::string::npos, "%s: '%s' lacks '%s'", what, err.c_str(), w);
}

}  // namespace

// ---- 1. hyper-parameters: bounds -------------------------------------------------

// An MoE-only model never uses feed_forward_length (qwen3moe files carry the
// dense width of the original model there): it must size nothing. Before,
// 200000 made every session zero-fill ~3 GB of scratch.
TEST(unused_feed_forward_length_sizes_nothing) {
  const std::string path = edited_copy(fixture(kBase), "ff-200000.gguf", set_u32("qwen3moe.feed_forward_length", 200000));
  REQUIRE(!path.empty());
  std::string err;
  auto base = load(fixture(kBase), &err);
  REQUIRE(base);
  auto m = load(path, &err);
  CHECK_MSG(m != nullptr, "%s", err.c_str());
  REQUIRE(m);
  CHECK(m->hparams().n_ff == 0);
  auto s = GuildSession::create(*m, 0, &err);
  auto sb = GuildSession::create(*base, 0, &err);
  REQUIRE(s && sb);
  CHECK_MSG(s->scratch().allocated_bytes() == sb->scratch().allocated_bytes(), "scratch %llu vs %llu bytes",
            static_cast<unsigned long long>(s->scratch().allocated_bytes()),
            static_cast<unsigned long long>(sb->scratch().allocated_bytes()));
  CHECK(greedy(*m, 4).tokens == greedy(*base, 4).tokens);
}

TEST(hyper_parameters_beyond_their_limits_are_refused) {
  struct Case { const char* key; uint32_t value; const char* value_text; };
  const Case cases[] = {
      {"qwen3moe.feed_forward_length", 2147483647u, "2147483647"},
      {"qwen3moe.feed_forward_length", 1048577u, "1048577"},
      {"qwen3moe.expert_feed_forward_length", 1048577u, "1048577"},
      {"qwen3moe.embedding_length", 200000u, "200000"},
      {"qwen3moe.block_count", 5000u, "5000"},
      {"qwen3moe.attention.head_count", 5000u, "5000"},
      {"qwen3moe.attention.head_count_kv", 5000u, "5000"},
      {"qwen3moe.attention.key_length", 100000u, "100000"},
      {"qwen3moe.attention.value_length", 100000u, "100000"},
      {"qwen3moe.expert_count", 100000u, "100000"},
      {"qwen3moe.expert_used_count", 1000u, "1000"},
      {"qwen3moe.context_length", 2147483647u, "2147483647"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = edited_copy(fixture(kBase), "limit-" + std::to_string(i++) + ".gguf", set_u32(c.key, c.value));
    REQUIRE(!path.empty());
    expect_load_error(path, {c.key, c.value_text, "outside"}, c.key);
  }
}

// Real models' shapes stay far inside the limits (hparam_limits.h).
TEST(limits_admit_the_largest_published_models) {
  namespace L = hparam_limits;
  CHECK(L::kMaxLayers >= 126 && L::kMaxEmbd >= 16384 && L::kMaxFfn >= 53248 && L::kMaxHeads >= 128);
  CHECK(L::kMaxExperts >= 384 && L::kMaxExpertsUsed >= 22 && L::kMaxVocab >= 262144);
  CHECK(L::kMaxContext >= 10 * 1024 * 1024);  // Llama-4-Scout's 10M tokens
  CHECK(L::kMaxHeadDim >= 576);               // DeepSeek's MLA latent key
}

// ---- 1. hyper-parameters against the tensors ------------------------------------

TEST(hyper_parameters_are_cross_checked_against_the_tensors) {
  struct Case { Edit edit; std::vector<const char*> want; const char* name; };
  Edit short_output;
  short_output.tensor = [](GgufWriter& w, const TensorInfo& t) {
    if (t.name != "output.weight") return false;
    const int64_t ne[2] = {t.ne[0], 2000};
    std::string err;
    const size_t bytes = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(t.ne[1]) * 2000);
    w.add_tensor_ref(t.name, t.type, ne, std::span<const uint8_t>(t.data, bytes), &err);
    return true;
  };
  Edit short_tokens;
  short_tokens.meta = [](GgufWriter& w) {
    std::vector<std::string> tokens;
    for (int i = 0; i < 2000; ++i) tokens.push_back("t" + std::to_string(i));
    w.add_string_array("tokenizer.ggml.tokens", tokens);
  };
  std::vector<Case> cases;
  cases.push_back({set_u32("qwen3moe.embedding_length", 512), {"qwen3moe.embedding_length", "512", "token_embd.weight"}, "n_embd"});
  cases.push_back({set_u32("qwen3moe.attention.head_count", 8),
                   {"qwen3moe.attention.head_count", "qwen3moe.attention.key_length", "1024", "blk.0.attn_q.weight"}, "n_head"});
  cases.push_back({set_u32("qwen3moe.attention.head_count_kv", 1),
                   {"qwen3moe.attention.head_count_kv", "128", "blk.0.attn_k.weight"}, "n_head_kv"});
  cases.push_back({set_u32("qwen3moe.attention.key_length", 64),
                   {"qwen3moe.attention.key_length", "256", "blk.0.attn_q.weight"}, "head_dim_k"});
  cases.push_back({set_u32("qwen3moe.attention.value_length", 64),
                   {"qwen3moe.attention.value_length", "128", "blk.0.attn_v.weight"}, "head_dim_v"});
  cases.push_back({set_u32("qwen3moe.expert_count", 16), {"qwen3moe.expert_count", "16", "blk.0.ffn_gate_inp.weight"}, "n_expert"});
  cases.push_back({set_u32("qwen3moe.expert_feed_forward_length", 128),
                   {"qwen3moe.expert_feed_forward_length", "128", "blk.0.ffn_gate_exps.weight"}, "n_ff_exp"});
  cases.push_back({set_u32("qwen3moe.expert_used_count", 9), {"qwen3moe.expert_used_count", "9"}, "n_expert_used"});
  cases.push_back({short_output, {"vocabulary", "2560", "output.weight", "2000"}, "output rows"});
  cases.push_back({short_tokens, {"tokenizer.ggml.tokens", "2000", "token_embd.weight", "2560"}, "tokenizer size"});
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = edited_copy(fixture(kBase), "mismatch-" + std::to_string(i++) + ".gguf", c.edit);
    REQUIRE(!path.empty());
    std::string err;
    auto m = load(path, &err);
    CHECK_MSG(m == nullptr, "%s: loaded", c.name);
    for (const char* w : c.want) CHECK_MSG(err.find(w) != std::string::npos, "%s: '%s' lacks '%s'", c.name, err.c_str(), w);
    CHECK_MSG(err.find('\n') == std::string::npos, "%s: multi-line", c.name);
  }
}

// ---- 2. epsilon and rope settings --------------------------------------------------

TEST(non_finite_or_non_positive_numeric_settings_are_refused) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case { const char* key; float value; const char* scaling; };
  const Case cases[] = {
      {"qwen3moe.attention.layer_norm_rms_epsilon", nan, nullptr},
      {"qwen3moe.attention.layer_norm_rms_epsilon", -1e-6f, nullptr},
      {"qwen3moe.attention.layer_norm_rms_epsilon", 0.0f, nullptr},
      {"qwen3moe.attention.layer_norm_rms_epsilon", inf, nullptr},
      {"qwen3moe.rope.freq_base", nan, nullptr},
      {"qwen3moe.rope.freq_base", 0.0f, nullptr},
      {"qwen3moe.rope.freq_base", -10000.0f, nullptr},
      {"qwen3moe.rope.freq_base", inf, nullptr},
      {"qwen3moe.rope.scaling.factor", nan, "linear"},
      {"qwen3moe.rope.scaling.factor", 0.0f, "linear"},
      {"qwen3moe.rope.scaling.factor", -4.0f, "yarn"},
      {"qwen3moe.rope.scaling.yarn_attn_factor", nan, "yarn"},
      {"qwen3moe.rope.scaling.yarn_beta_fast", -32.0f, "yarn"},
      {"qwen3moe.rope.scaling.yarn_ext_factor", inf, "yarn"},
  };
  int i = 0;
  for (const Case& c : cases) {
    Edit e;
    e.meta = [c](GgufWriter& w) {
      if (c.scaling) w.add_string("qwen3moe.rope.scaling.type", c.scaling);
      w.add_f32(c.key, c.value);
    };
    const std::string path = edited_copy(fixture(kBase), "numeric-" + std::to_string(i++) + ".gguf", e);
    REQUIRE(!path.empty());
    expect_load_error(path, {c.key}, c.key);
  }
  // A sane scaled model still loads and generates finite logits.
  Edit scaled;
  scaled.meta = [](GgufWriter& w) {
    w.add_string("qwen3moe.rope.scaling.type", "yarn");
    w.add_f32("qwen3moe.rope.scaling.factor", 4.0f);
    w.add_u32("qwen3moe.rope.scaling.original_context_length", 1024);
  };
  const std::string path = edited_copy(fixture(kBase), "numeric-yarn-ok.gguf", scaled);
  std::string err;
  auto m = load(path, &err);
  CHECK_MSG(m != nullptr, "%s", err.c_str());
  REQUIRE(m);
  auto s = GuildSession::create(*m, 0, &err);
  REQUIRE(s);
  std::vector<float> logits(static_cast<size_t>(m->hparams().n_vocab));
  REQUIRE(s->eval(kPrompt, false, logits.data(), &err));
  bool finite = true;
  for (float v : logits) finite = finite && std::isfinite(v);
  CHECK(finite);
}

// ---- 1. session memory, checked before it is allocated ---------------------------------

TEST(session_memory_estimate_is_what_a_session_allocates) {
  std::string err;
  auto m = load(fixture(kBase), &err);
  REQUIRE(m);
  for (int n_ctx : {16, 256, 1000, 4096}) {
    auto s = GuildSession::create(*m, n_ctx, &err);
    REQUIRE(s);
    const SessionMemory need = estimate_session_memory(m->hparams(), n_ctx, m->pool().size(), KvType::F16, false);
    CHECK_MSG(s->kv().bytes() == need.kv, "n_ctx %d: kv %zu vs %llu", n_ctx, s->kv().bytes(),
              static_cast<unsigned long long>(need.kv));
    CHECK_MSG(s->scratch().allocated_bytes() == need.scratch + need.per_thread, "n_ctx %d: scratch %llu vs %llu", n_ctx,
              static_cast<unsigned long long>(s->scratch().allocated_bytes()),
              static_cast<unsigned long long>(need.scratch + need.per_thread));
  }
  // The profile's session_state stage carries the estimate for the default context.
  const StageRecord* st = nullptr;
  for (const auto& r : m->profile().stages())
    if (r.name == "session_state") st = &r;
  REQUIRE(st);
  const SessionMemory need = estimate_session_memory(m->hparams(), 256, m->pool().size(), KvType::F16, false);
  CHECK(static_cast<uint64_t>(st->detail["session_memory"]["total_bytes"].as_int()) == need.total());
  CHECK(st->detail["session_memory"]["kv_bytes"].as_int() == static_cast<int64_t>(need.kv));
}

TEST(sessions_that_do_not_fit_are_refused_before_allocating) {
  LoadOptions opt;
  opt.memory_limit_bytes = 64ull << 20;
  std::string err;
  auto m = load(fixture(kBase), &err, opt);
  REQUIRE(m);
  CHECK(GuildSession::create(*m, 4096, &err) != nullptr);
  // 2 layers x 262144 x 2 heads x 256 x 2 bytes = 512 MiB of KV cache alone.
  auto big = GuildSession::create(*m, 262144, &err);
  CHECK(big == nullptr);
  CHECK_MSG(err.find("262144 tokens needs") != std::string::npos && err.find("KV cache 512 MiB") != std::string::npos &&
                err.find("64 MiB") != std::string::npos,
            "%s", err.c_str());
  // The default context is checked at load (stage 13).
  LoadOptions big_default = opt;
  big_default.n_ctx = 262144;
  auto refused = load(fixture(kBase), &err, big_default);
  CHECK(refused == nullptr);
  CHECK_MSG(err.find("default context") != std::string::npos && err.find("needs") != std::string::npos, "%s", err.c_str());
  // Beyond the context limit whatever the memory.
  CHECK(GuildSession::create(*m, hparam_limits::kMaxContext + 1, &err) == nullptr);
  CHECK_MSG(err.find("exceeds the limit") != std::string::npos, "%s", err.c_str());
}

// The same check against what this machine really has: a 16M-token f32
// context of this model needs 64 GiB of KV cache.
TEST(sessions_are_checked_against_the_machines_memory) {
  LoadOptions opt;
  opt.kv_type = KvType::F32;
  std::string err;
  auto m = load(fixture(kBase), &err, opt);
  REQUIRE(m);
  const int n_ctx = hparam_limits::kMaxContext;
  const SessionMemory need = estimate_session_memory(m->hparams(), n_ctx, m->pool().size(), KvType::F32, false);
  if (need.total() <= m->session_memory_limit()) {
    std::printf("  this machine could give %llu bytes: not asking for them\n",
                static_cast<unsigned long long>(m->session_memory_limit()));
    return;
  }
  CHECK(GuildSession::create(*m, n_ctx, &err) == nullptr);
  CHECK_MSG(err.find("can be allocated on this machine") != std::string::npos, "%s", err.c_str());
}

// ---- 3. tensor data at any alignment ---------------------------------------------------

// general.alignment = 1 puts tensors at odd addresses. The binder copies the
// misaligned ones (the kernels never see a misaligned block: this test runs
// clean under UBSan) and the model generates what the aligned file does.
TEST(alignment_one_runs_like_the_aligned_file) {
  const char* src = "qwen3moe-a-Q4_0.gguf";
  // A padding string whose length puts the data section (and so the Q4_0
  // tensors, whose offsets are all even here) at an odd address.
  std::string path, err;
  for (int pad = 1; pad <= 8 && path.empty(); ++pad) {
    Edit e;
    e.alignment = 1;
    e.meta = [pad](GgufWriter& w) { w.add_string("test.pad", std::string(static_cast<size_t>(pad), 'x')); };
    const std::string candidate = edited_copy(fixture(src), "align-1.gguf", e);
    REQUIRE(!candidate.empty());
    auto f = GgufFile::open(candidate, &err);
    REQUIRE(f);
    CHECK(f->alignment() == 1);
    for (const TensorInfo& t : f->tensors())
      if (t.type == static_cast<uint32_t>(TensorType::Q4_0) && reinterpret_cast<uintptr_t>(t.data) % 2 != 0)
        path = candidate;
  }
  REQUIRE(!path.empty());
  auto aligned = load(fixture(src), &err);
  REQUIRE(aligned);
  auto m = load(path, &err);
  CHECK_MSG(m != nullptr, "%s", err.c_str());
  REQUIRE(m);
  const StageRecord* dense = nullptr;
  for (const auto& r : m->profile().stages())
    if (r.name == "dense_weights") dense = &r;
  REQUIRE(dense);
  CHECK(dense->detail["aligned_copies"].as_int() > 0);
  const GenerateResult want = greedy(*aligned, 8), got = greedy(*m, 8);
  CHECK(want.tokens.size() == 8);
  CHECK(got.tokens == want.tokens);
  // Copies are bounded by the memory there is.
  LoadOptions tight;
  tight.memory_limit_bytes = 1;
  auto refused = load(path, &err, tight);
  CHECK(refused == nullptr);
  CHECK_MSG(err.find("not aligned for its type") != std::string::npos && err.find("general.alignment 1") != std::string::npos,
            "%s", err.c_str());
}

// ---- 4. the model file rewritten in place ------------------------------------------------

// `cp other.gguf served.gguf` between two requests: the next request fails
// with one line naming the file, the model is marked not ready, later ones
// are refused (fail-closed), and nothing crashes.
TEST(model_file_rewritten_between_requests_fails_closed) {
  const std::string path = model_file_edit::tmp_path("served-between.gguf");
  const std::string bytes = check::read_file(fixture(kBase));
  REQUIRE(model_file_edit::write_file(path, bytes));
  std::string err;
  auto m = load(path, &err);
  REQUIRE(m);
  CHECK(greedy(*m, 2).tokens.size() == 2);
  REQUIRE(model_file_edit::rewrite_in_place(path, bytes));
  const GenerateResult failed = greedy(*m, 2);
  CHECK(failed.stop == StopReason::Error && failed.error_kind == GenerateError::ModelChanged);
  CHECK_MSG(failed.error.find("model file " + path + " changed on disk since it was loaded") == 0 &&
                failed.error.find("reload it") != std::string::npos,
            "%s", failed.error.c_str());
  CHECK(!m->ready());
  const GenerateResult refused = greedy(*m, 2);
  CHECK(refused.error_kind == GenerateError::NotReady);
  CHECK_MSG(refused.error.find("changed on disk") != std::string::npos, "%s", refused.error.c_str());
  auto s = GuildSession::create(*m, 0, &err);
  REQUIRE(s);
  std::vector<float> logits(static_cast<size_t>(m->hparams().n_vocab));
  GenerateError kind = GenerateError::None;
  CHECK(!s->eval(kPrompt, false, logits.data(), &err, &kind));
  CHECK(kind == GenerateError::NotReady);
}

// The file cut short and rewritten WHILE a generation reads it: the pages
// under the mapping vanish, the next read faults (SIGBUS). The process must
// survive, the generation stop at that step with the error, and the model be
// marked not ready. Run in a child: without the guard SIGBUS kills it.
TEST(model_file_truncated_during_generation_is_survived) {
  const std::string path = model_file_edit::tmp_path("served-during.gguf");
  const std::string bytes = check::read_file(fixture(kBase));
  REQUIRE(model_file_edit::write_file(path, bytes));
  const std::string report = model_file_edit::in_child([&]() -> std::string {
    std::string err;
    auto m = load(path, &err);
    if (!m) return "load failed: " + err;
    std::thread rewriter;
    std::atomic<bool> truncated{false};
    // After the first token: cut the file to nothing (what `cp` does first),
    // and once the next pass has faulted on it, write it back.
    auto on_token = [&](int32_t, const std::string&) {
      if (truncated.exchange(true)) return true;
      const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
      if (fd >= 0) ::close(fd);
      rewriter = std::thread([&] {
        for (int i = 0; i < 1000 && !m->files().primary().read_faulted(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        model_file_edit::rewrite_in_place(path, bytes);
      });
      return true;
    };
    const GenerateResult r = greedy(*m, 64, on_token);
    if (rewriter.joinable()) rewriter.join();
    if (!m->files().primary().read_faulted()) return "no read of the mapping faulted (the test did not exercise the guard)";
    if (r.stop != StopReason::Error || r.error_kind != GenerateError::ModelChanged)
      return "generation did not fail with ModelChanged: stop " + std::string(stop_reason_name(r.stop)) + ", " + r.error;
    if (r.tokens.size() != 1) return "tokens after the fault were emitted: " + std::to_string(r.tokens.size());
    if (r.error.find("changed on disk since it was loaded") == std::string::npos) return "message: " + r.error;
    if (m->ready()) return "model still ready";
    return "";
  });
  CHECK_MSG(report.empty(), "%s", report.c_str());
}

// ---- 5. vocab-only ---------------------------------------------------------------------------

TEST(vocab_only_file_tokenizes_like_llama_cpp) {
  const std::string path = fixture("qwen3-vocab.gguf");
  std::string err;
  auto full = load(path, &err);
  CHECK(full == nullptr);  // no tensors: it cannot be loaded to run
  LoadOptions opt;
  opt.vocab_only = true;
  auto m = load(path, &err, opt);
  CHECK_MSG(m != nullptr, "%s", err.c_str());
  REQUIRE(m);
  CHECK(m->vocab_only());
  CHECK(!m->ready());
  CHECK(m->hparams().n_vocab == 151936);
  CHECK(m->profile().stages().size() == static_cast<size_t>(kLoadStageCount));
  CHECK(GuildSession::create(*m, 0, &err) == nullptr);
  CHECK_MSG(err.find("tokenizer only") != std::string::npos, "%s", err.c_str());

  auto doc = json::parse(check::read_file(check::fixtures_dir() + "/expected/qwen3-vocab/tokenize.json"), &err);
  REQUIRE(doc);
  auto unhex = [](const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
  };
  auto ids_of = [](const json::Value& a) {
    std::vector<int32_t> ids;
    for (const auto& v : a.as_array()) ids.push_back(static_cast<int32_t>(v.as_int()));
    return ids;
  };
  int n = 0;
  for (const auto& v : (*doc)["vectors"].as_array()) {
    const std::string text = unhex(v["text_utf8_hex"].as_string());
    const auto want_special = ids_of(v["parse_special"]["ids"]);
    CHECK_MSG(m->vocab().tokenize(text, false, true) == want_special, "vector %d (parse special)", n);
    CHECK_MSG(m->vocab().tokenize(text, false, false) == ids_of(v["no_parse_special"]["ids"]), "vector %d", n);
    CHECK_MSG(m->vocab().detokenize(want_special, false, true) == unhex(v["parse_special"]["detokenized_hex"].as_string()),
              "vector %d (detokenize)", n);
    ++n;
  }
  CHECK(n == 30);
}

TEST(vocab_only_load_of_a_full_model_tokenizes_the_same) {
  const std::string path = fixture("qwen3moe-a-F32.gguf");
  std::string err;
  auto full = load(path, &err);
  REQUIRE(full);
  LoadOptions opt;
  opt.vocab_only = true;
  auto m = load(path, &err, opt);
  REQUIRE(m);
  CHECK(m->hparams().n_vocab == full->hparams().n_vocab);
  CHECK(m->hparams().n_ctx_train == full->hparams().n_ctx_train);
  CHECK(m->vocab().bos() == full->vocab().bos() && m->vocab().eos() == full->vocab().eos());
  auto doc = json::parse(check::read_file(check::fixtures_dir() + "/expected/qwen3moe-a-F32/tokenize.json"), &err);
  REQUIRE(doc);
  for (const auto& v : (*doc)["vectors"].as_array()) {
    std::string text;
    const std::string h = v["text_utf8_hex"].as_string();
    for (size_t i = 0; i + 1 < h.size(); i += 2) text += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    const auto a = m->vocab().tokenize(text, true, true), b = full->vocab().tokenize(text, true, true);
    CHECK(a == b);
    CHECK(m->vocab().detokenize(a, false, true) == full->vocab().detokenize(b, false, true));
  }
  // Vocab-only reads no kernel package and binds no weight.
  for (const auto& r : m->profile().stages())
    if (r.name != "device_policy" && r.name != "container" && r.name != "tokenizer")
      CHECK_MSG(r.detail.contains("skipped"), "stage %s ran", r.name.c_str());
}
