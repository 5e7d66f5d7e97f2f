// Kernel packages end to end on the fixture model: stage 2 picks the CPU
// table among the enabled packages of the user's directory and the bundled
// ones (the profile says which and why), disabling cpu-avx2 makes the next
// load use cpu-generic with the same greedy tokens (logits within tolerance),
// a package leased by a loaded model or a live session cannot be disabled
// until they are gone, and without a usable CPU package a load fails with one
// clear line: the runtime has no kernels of its own.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "core/tuning.h"
#include "check.h"
#include "core/cpu_features.h"
#include "packages/archive.h"
#include "packages/store.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

const std::string kBuilt = GUILD_BUILT_PACKAGES_DIR;
// Expected logit error between two correct Q8_0 kernel sets: the fixtures'
// rule for quantized files (test_runtime_fixtures: greedy tokens must agree up
// to the first step whose top-1/top-2 margin is below it).
constexpr double kLogitTolerance = 0.5;

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
  size_t must_match = 0;  // steps before the first margin below kLogitTolerance
  int n_new = 0;
};

std::vector<Prompt> fixture_prompts() {
  auto doc = json::parse(check::read_file(check::fixtures_dir() + "/expected/qwen3moe-a-Q8_0/greedy.json"));
  std::vector<Prompt> out;
  if (!doc) return out;
  for (const auto& p : (*doc)["prompts"].as_array()) {
    Prompt pr;
    pr.name = p["name"].as_string();
    for (const auto& id : p["prompt_ids"].as_array()) pr.ids.push_back(static_cast<int32_t>(id.as_int()));
    pr.n_new = static_cast<int>(p["generated_ids"].size());
    const auto& margins = p["top1_minus_top2_logit"].as_array();
    pr.must_match = margins.size();
    for (size_t i = 0; i < margins.size(); ++i)
      if (margins[i].as_double() < kLogitTolerance) { pr.must_match = i; break; }
    out.push_back(std::move(pr));
  }
  return out;
}

std::string model_path() { return check::fixtures_dir() + "/models/qwen3moe-a-Q8_0.gguf"; }

std::string make_store() {
  const std::string dir = check::tmp_dir() + "/packages-model-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  PackageStore store(dir + "/store");
  std::string err;
  // Every package this build made (cuda too, where built), so that the user's
  // directory hides all the bundled ones.
  for (const char* name : {"cpu-generic", "cpu-avx2", "cpu-avx512", "cuda"}) {
    if (!fs::exists(kBuilt + "/" + name)) continue;
    const std::string pkg = dir + "/" + name + ".gkpkg";
    if (!pack_package_dir(kBuilt + "/" + name, pkg, &err)) std::printf("  pack: %s\n", err.c_str());
    if (store.install(pkg, &err) != PackageStatus::Ok) std::printf("  not installed: %s\n", err.c_str());
  }
  return dir + "/store";
}

std::unique_ptr<GuildModel> load(const std::string& packages_dir, std::string* error = nullptr, LoadErrorKind* kind = nullptr) {
  LoadOptions opt;
  opt.n_threads = 2;
  opt.n_ctx = 128;
  opt.packages_dir = packages_dir;
  opt.gpu = "cpu";  // these tests compare CPU kernel tables
  std::string err;
  auto m = GuildModel::load(model_path(), opt, &err, kind);
  if (!m && !error) std::printf("  load failed: %s\n", err.c_str());
  if (error) *error = err;
  return m;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const json::Value& stage(const json::Value& prof, const std::string& name) {
  for (const auto& s : prof["stages"].as_array())
    if (s["name"].as_string() == name) return s;
  static json::Value none;
  return none;
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  std::vector<float> logits;                 // last prompt row of every prompt, concatenated
};

Run greedy(GuildModel& m, const std::vector<Prompt>& prompts) {
  Run r;
  std::string err;
  for (const Prompt& p : prompts) {
    auto s = GuildSession::create(m, static_cast<int>(p.ids.size()) + p.n_new + 4, &err);
    std::vector<float> logits(m.hparams().n_vocab);
    if (!s || !s->eval(p.ids, false, logits.data(), &err)) std::printf("  eval: %s\n", err.c_str());
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    s->reset();
    GenerateRequest req;
    req.prompt = p.ids;
    req.max_new_tokens = p.n_new;
    req.ignore_eog = true;
    r.tokens.push_back(s->generate(req).tokens);
  }
  return r;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0.0 : 1e30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}

}  // namespace

TEST(generic_and_avx2_packages_agree_and_disable_switches_the_table) {
  if (!cpu_features().has_avx2_table_isa()) SKIP_TEST("this CPU lacks AVX2+FMA+F16C: cpu-avx2 cannot be compared");
  if (std::getenv("GUILD_FORCE_KERNELS")) SKIP_TEST("GUILD_FORCE_KERNELS is set");
  const std::string dir = make_store();
  PackageStore store(dir);
  std::string err;

  const std::vector<Prompt> prompts = fixture_prompts();
  REQUIRE(!prompts.empty());

  // With nothing in the user's directory the bundled packages (this build's)
  // serve the load; the same packages installed in the user's directory hide
  // them and give the same table, bit for bit.
  Run bundled_run;
  std::string bundled_name;
  {
    auto m = load(check::tmp_dir() + "/no-such-packages-dir");
    REQUIRE(m);
    bundled_name = m->kernels().name;
    bundled_run = greedy(*m, prompts);
  }
  {
    auto m = load(dir);
    REQUIRE(m);
    CHECK_MSG(bundled_name == m->kernels().name, "installed %s vs bundled %s", m->kernels().name, bundled_name.c_str());
    const json::Value prof = m->profile().to_json();
    for (const auto& p : stage(prof, "packages")["detail"]["loaded"].as_array())
      CHECK_MSG(p["source"].as_string() == "user", "%s from %s", p["name"].as_string().c_str(), p["source"].as_string().c_str());
    const Run r = greedy(*m, prompts);
    if (bundled_name == m->kernels().name) {
      CHECK(r.tokens == bundled_run.tokens);
      CHECK(max_diff(r.logits, bundled_run.logits) == 0.0);
    }
  }
  // Compare cpu-avx2 with cpu-generic: keep cpu-avx512 out of the way.
  const bool have_avx512 = fs::exists(dir + "/cpu-avx512");
  if (have_avx512) CHECK(store.disable("cpu-avx512", &err) == PackageStatus::Ok);

  Run avx2_run, generic_run;
  {
    auto m = load(dir);
    REQUIRE(m);
    CHECK(std::string(m->kernels().name) == "cpu-avx2");
    const json::Value prof = m->profile().to_json();
    const json::Value& st = stage(prof, "packages");
    CHECK(st["detail"]["cpu_source"].as_string() == "package");
    CHECK(st["detail"]["cpu_kernels"].as_string() == "cpu-avx2");
    CHECK(st["detail"]["providers"]["ops"]["vec_dot"].as_string() == "cpu-avx2");
    size_t cpu_loaded = 0;  // cpu-generic and cpu-avx2 (a GPU package may be loaded too)
    for (const auto& p : st["detail"]["loaded"].as_array()) cpu_loaded += p["name"].as_string().rfind("cpu-", 0) == 0;
    CHECK(cpu_loaded == 2);
    avx2_run = greedy(*m, prompts);

    // Leased by the model: disable fails and names it.
    CHECK(store.disable("cpu-avx2", &err) == PackageStatus::Busy);
    CHECK_MSG(err.find("model qwen3moe-a-Q8_0.gguf") != std::string::npos, "%s", err.c_str());
    {
      auto s = GuildSession::create(*m, 0, &err);
      REQUIRE(s);
      CHECK(store.uninstall("cpu-avx2", &err) == PackageStatus::Busy);
      CHECK_MSG(err.find("session " + std::to_string(s->id())) != std::string::npos, "%s", err.c_str());
    }
    // cpu-generic is loaded but not chosen, so not leased.
    CHECK(store.disable("cpu-generic", &err) == PackageStatus::Ok);
    CHECK(store.enable("cpu-generic", &err) == PackageStatus::Ok);
  }
  // Model gone: the lease is released.
  CHECK_MSG(store.disable("cpu-avx2", &err) == PackageStatus::Ok, "%s", err.c_str());
  {
    auto m = load(dir);
    REQUIRE(m);
    CHECK(std::string(m->kernels().name) == "cpu-generic");
    const json::Value prof = m->profile().to_json();
    const json::Value& st = stage(prof, "packages");
    CHECK(st["detail"]["cpu_kernels"].as_string() == "cpu-generic");
    bool skipped = false;
    for (const auto& s : st["detail"]["skipped"].as_array())
      skipped = skipped || (s["name"].as_string() == "cpu-avx2" && s["reason"].as_string() == "disabled");
    CHECK(skipped);
    generic_run = greedy(*m, prompts);
  }
  REQUIRE(avx2_run.tokens.size() == prompts.size() && generic_run.tokens.size() == prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& a = avx2_run.tokens[i];
    const auto& b = generic_run.tokens[i];
    size_t same = 0;
    while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
    std::printf("  %s: %zu/%zu tokens equal (must: %zu)\n", prompts[i].name.c_str(), same, a.size(), prompts[i].must_match);
    CHECK_MSG(same >= prompts[i].must_match, "%s diverged at %zu", prompts[i].name.c_str(), same);
  }
  const double d = max_diff(avx2_run.logits, generic_run.logits);
  std::printf("  max |logit diff| cpu-avx2 vs cpu-generic: %.3g (tolerance %.2g)\n", d, kLogitTolerance);
  CHECK(d <= kLogitTolerance);
  CHECK(store.enable("cpu-avx2", &err) == PackageStatus::Ok);
  if (have_avx512) CHECK(store.enable("cpu-avx512", &err) == PackageStatus::Ok);
}

TEST(bundled_packages_serve_a_load_without_a_user_directory) {
  auto m = load(check::tmp_dir() + "/no-such-packages-dir");
  REQUIRE(m);
  const json::Value prof = m->profile().to_json();
  const json::Value& st = stage(prof, "packages");
  CHECK(st["detail"]["cpu_source"].as_string() == "package");
  CHECK(!st["detail"]["bundled_dir"].as_string().empty());
  REQUIRE(st["detail"]["loaded"].size() > 0);
  for (const auto& p : st["detail"]["loaded"].as_array()) CHECK(p["source"].as_string() == "bundled");
  // Every op class is named, by the provider that serves it.
  for (const char* op : {"dequant", "vec_dot", "gemm", "quantize_act", "float_ops", "attention"})
    CHECK_MSG(st["detail"]["providers"]["ops"][op].as_string() == m->kernels().name, "%s", op);
  CHECK(st["detail"]["providers"]["type_rows"].size() == 0);
}

TEST(load_fails_clearly_without_a_usable_cpu_package) {
  const std::string empty = check::tmp_dir() + "/packages-none-" + std::to_string(::getpid());
  fs::remove_all(empty);
  std::string err;
  LoadErrorKind kind = LoadErrorKind::None;
  {
    // No bundled packages and an empty user directory: nothing to run on.
    ScopedEnv no_bundled("GUILD_BUNDLED_PACKAGES_DIR", "");
    CHECK(!load(empty, &err, &kind));
    std::printf("  %s\n", err.c_str());
    CHECK(kind == LoadErrorKind::Unsupported);
    CHECK(err.find("no usable CPU kernel package in " + empty) != std::string::npos);
    CHECK_MSG(err.find(empty) != std::string::npos, "the packages directory is not named: %s", err.c_str());
    CHECK(err.find('\n') == std::string::npos);
  }
  // Every package disabled (the bundled ones through the user's state file):
  // the error names each package and why it was not used.
  PackageStore store(empty);
  for (const auto& e : store.list()) CHECK_MSG(store.disable(e.name, &err) == PackageStatus::Ok, "%s", err.c_str());
  CHECK(!store.list().empty());
  CHECK(!load(empty, &err, &kind));
  std::printf("  %s\n", err.c_str());
  CHECK(kind == LoadErrorKind::Unsupported);
  CHECK(err.find("cpu-generic: disabled") != std::string::npos);
  CHECK(err.find("bundled packages in") != std::string::npos);
  // Enabling one is enough again.
  CHECK(store.enable("cpu-generic", &err) == PackageStatus::Ok);
  auto m = load(empty);
  REQUIRE(m);
  CHECK(std::string(m->kernels().name) == "cpu-generic");
}

TEST(force_kernels_picks_among_the_loaded_packages) {
  if (!cpu_features().has_avx2_table_isa()) SKIP_TEST("this CPU lacks AVX2+FMA+F16C");
  if (!tuning().force_kernels.empty()) SKIP_TEST("GUILD_FORCE_KERNELS is set");
  const std::string dir = make_store();
  // The knob as guild-bench sets it (core/tuning.h; GUILD_FORCE_KERNELS is read once).
  const Tuning saved = tuning();
  Tuning forced = saved;
  forced.force_kernels = "cpu-generic";
  set_tuning(forced);
  {
    auto m = load(dir);
    REQUIRE(m);
    CHECK(std::string(m->kernels().name) == "cpu-generic");
    const json::Value prof = m->profile().to_json();
    CHECK(stage(prof, "packages")["detail"]["cpu_source"].as_string() == "package");
  }
  // Not among the loaded packages: ignored, with a fallback entry.
  forced.force_kernels = "cpu-nonexistent";
  set_tuning(forced);
  {
    auto m = load(dir);
    REQUIRE(m);
    const json::Value prof = m->profile().to_json();
    CHECK(stage(prof, "packages")["detail"]["cpu_source"].as_string() == "package");
    bool fb = false;
    for (const auto& f : prof["fallbacks"].as_array())
      fb = fb || f["reason"].as_string().find("GUILD_FORCE_KERNELS=cpu-nonexistent ignored") != std::string::npos;
    CHECK(fb);
  }
  set_tuning(saved);
}

TEST(a_load_refuses_when_the_packages_cannot_be_decided) {
  // Fail closed: a corrupt state file is not "everything enabled", and a
  // .leases that is not a directory cannot record the model's use; either
  // way the load fails with one line naming the file.
  const std::string dir = make_store();
  std::string err;
  LoadErrorKind kind = LoadErrorKind::None;
  {
    std::ofstream f(dir + "/state.json", std::ios::binary | std::ios::trunc);
    f << "{\"schema\": \"guild.packages-state/1\", \"packages\": {\"cpu-av";
  }
  CHECK(!load(dir, &err, &kind));
  std::printf("  %s\n", err.c_str());
  CHECK(kind == LoadErrorKind::Format);
  CHECK_MSG(err.find(dir + "/state.json is corrupt") != std::string::npos, "%s", err.c_str());
  CHECK(err.find('\n') == std::string::npos);
  fs::remove(dir + "/state.json");
  fs::remove_all(dir + "/.leases");
  {
    std::ofstream f(dir + "/.leases", std::ios::binary | std::ios::trunc);
    f << "not a directory";
  }
  CHECK(!load(dir, &err, &kind));
  std::printf("  %s\n", err.c_str());
  CHECK(kind == LoadErrorKind::Io);
  CHECK_MSG(err.find(dir + "/.leases is a regular file, not a directory") != std::string::npos, "%s", err.c_str());
  fs::remove(dir + "/.leases");
  // Whole again: the load works and records its lease.
  auto m = load(dir);
  REQUIRE(m);
  CHECK(fs::is_directory(dir + "/.leases") && !fs::is_empty(dir + "/.leases"));
}
