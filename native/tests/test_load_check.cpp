// GuildModel::check, the pre-flight check (docs/C_ABI.md, "Pre-flight check"):
// it answers exactly what GuildModel::load with the same options would — ok,
// or the load's own one-line error and the stage that gives it — for every
// reference fixture and for hostile edits that fail in each deciding stage
// (device policy, container, runner, dense weights, session memory), and it
// takes nothing while it does: no lease, no lease record, no pool, no copy.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "check.h"
#include "model_file_edit.h"
#include "models/hparam_limits.h"
#include "gpu/gpu_backend.h"
#include "runtime/gpu_execution.h"
#include "runtime/leases.h"
#include "runtime/model.h"

using namespace guild;
using namespace guild::gguf;
using model_file_edit::Edit;
using model_file_edit::edited_copy;
using model_file_edit::fixture;

namespace {

const char* kBase = "qwen3moe-a-Q8_0.gguf";

// A user packages directory of this test's own: the other tests, run beside it
// (ctest -j), load models and write lease records into the shared one.
const bool kOwnPackagesDir = [] {
  const std::string dir = check::tmp_dir() + "/load-check-packages-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return ::setenv("GUILD_PACKAGES_DIR", dir.c_str(), 1) == 0;
}();

LoadOptions small_options() {
  LoadOptions o;
  o.n_threads = 2;
  o.n_ctx = 256;
  return o;
}

// The load's outcome: "" when it loaded, else its error.
std::string load_error(const std::string& path, const LoadOptions& o, LoadErrorKind* kind = nullptr) {
  std::string err;
  auto m = GuildModel::load(path, o, &err, kind);
  return m ? std::string() : err;
}

// check() must say what load() says: the same verdict, kind and message.
LoadCheck expect_agreement(const std::string& path, const LoadOptions& o, const char* what) {
  LoadErrorKind load_kind = LoadErrorKind::None;
  const std::string want = load_error(path, o, &load_kind);
  LoadCheck c = GuildModel::check(path, o);
  CHECK_MSG(c.ok == want.empty(), "%s: check says %s, load says %s", what, c.ok ? "ok" : c.error.c_str(),
            want.empty() ? "ok" : want.c_str());
  CHECK_MSG(c.error == want, "%s: check error '%s' vs load error '%s'", what, c.error.c_str(), want.c_str());
  CHECK_MSG(c.kind == load_kind, "%s: check kind %s vs load kind %s", what, load_error_kind_name(c.kind),
            load_error_kind_name(load_kind));
  CHECK_MSG(c.ok == c.stage.empty(), "%s: stage '%s' with ok=%d", what, c.stage.c_str(), c.ok);
  return c;
}

// A stage's detail in the check's profile (null when the stage is not there).
const json::Value& detail_of(const LoadCheck& c, const std::string& name) {
  static const json::Value none;
  for (const json::Value& s : c.profile["stages"].as_array())
    if (s["name"].as_string() == name) return s["detail"];
  return none;
}

size_t lease_records() {
  const char* dir = std::getenv("GUILD_PACKAGES_DIR");
  if (!dir || !*dir) return 0;
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it(std::string(dir) + "/.leases", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// Rewrites, in place, the GGUF type id of tensor `name` (the u32 after its
// name, n_dims and dims in the tensor-info table).
bool patch_tensor_type(const std::string& path, const std::string& name, uint32_t n_dims, uint32_t type_id) {
  std::string bytes = check::read_file(path);
  std::string key(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  const size_t at = bytes.find(key);
  if (at == std::string::npos) return false;
  const size_t type_at = at + key.size() + 4 + 8 * static_cast<size_t>(n_dims);
  if (type_at + 4 > bytes.size()) return false;
  std::memcpy(bytes.data() + type_at, &type_id, 4);
  return model_file_edit::write_file(path, bytes);
}

}  // namespace

// A supported file: ok, with the load's own numbers, and nothing taken.
TEST(check_of_a_supported_model_is_ok_and_takes_nothing) {
  const std::string path = fixture(kBase);
  const size_t leases_before = LeaseRegistry::instance().all().size();
  const size_t records_before = lease_records();
  const LoadCheck c = GuildModel::check(path, small_options());
  CHECK_MSG(c.ok, "%s", c.error.c_str());
  CHECK(c.kind == LoadErrorKind::None);
  CHECK(LeaseRegistry::instance().all().size() == leases_before);
  CHECK(lease_records() == records_before);

  // All 14 stages, in the load's order; those with no say on loadability skipped.
  const auto& stages = c.profile["stages"].as_array();
  REQUIRE(stages.size() == static_cast<size_t>(kLoadStageCount));
  for (int i = 0; i < kLoadStageCount; ++i) CHECK(stages[i]["name"].as_string() == kLoadStages[i]);
  for (const char* skipped : {"expert_pool", "stream_and_lease", "gexec", "calibration", "ram_complement"})
    CHECK_MSG(detail_of(c, skipped)["skipped"].is_string(), "%s not skipped", skipped);
  for (const char* ran : {"device_policy", "packages", "container", "runner", "execution_state", "dense_weights",
                          "expert_tiers", "session_state", "tokenizer"})
    CHECK_MSG(!detail_of(c, ran)["skipped"].is_string(), "%s skipped", ran);
  CHECK(detail_of(c, "packages")["leases"].as_string() == "none (pre-flight check)");

  // The estimate is the load's: weights bound, the session of stage 13.
  std::string err;
  auto m = GuildModel::load(path, small_options(), &err);
  REQUIRE(m);
  CHECK(LeaseRegistry::instance().all().size() > leases_before);  // a load leases (so the count above means something)
  CHECK(lease_records() > records_before);
  CHECK(c.estimate["n_ctx"].as_int() == 256);
  CHECK(c.estimate["threads"].as_int() == 2);
  CHECK(c.estimate["kv_type"].as_string() == "f16");
  CHECK(c.estimate["placement"].as_string() == "cpu");
  CHECK(static_cast<uint64_t>(c.estimate["weight_bytes"].as_int()) == m->weight_bytes());
  CHECK(c.estimate["dense_bytes"].as_int() + c.estimate["expert_bytes"].as_int() == c.estimate["weight_bytes"].as_int());
  CHECK(c.estimate["aligned_copy_bytes"].as_int() == 0);
  const StageRecord* session = nullptr;
  for (const auto& r : m->profile().stages())
    if (r.name == "session_state") session = &r;
  REQUIRE(session);
  CHECK(json::serialize(c.estimate["session"]) == json::serialize(session->detail["session_memory"]));
  CHECK(c.estimate["session"]["total_bytes"].as_int() > 0);
  CHECK(c.estimate["memory_available_bytes"].as_int() > 0);
  // The schema of the C ABI's answer.
  const json::Value v = c.to_json();
  CHECK(v["schema"].as_string() == "guild.load-check/1");
  CHECK(v["ok"].as_bool() && v["status"].as_string() == "ok" && v["stage"].is_null() && v["error"].is_null());
}

// The architectures the runtime has no runner for: the load's words, stage runner.
TEST(check_refuses_an_unknown_architecture_as_the_load_does) {
  for (const char* name : {"deepseek2-a-Q4_K_M.gguf", "qwen35moe-a-Q4_K_M.gguf"}) {
    const LoadCheck c = expect_agreement(fixture(name), small_options(), name);
    CHECK(!c.ok);
    CHECK_MSG(c.stage == "runner", "%s: stage %s", name, c.stage.c_str());
    CHECK(c.kind == LoadErrorKind::Unsupported);
    const std::string arch = std::string(name).substr(0, std::string(name).find('-'));
    CHECK_MSG(c.error.find("unknown architecture '" + arch + "'") != std::string::npos, "%s", c.error.c_str());
    CHECK_MSG(c.error.find("(supported: qwen3moe, qwen3, llama, gpt-oss, glm4moe)") != std::string::npos, "%s", c.error.c_str());
    // What ran up to the failure is in the profile; nothing after it.
    CHECK(c.profile["stages"].as_array().back()["name"].as_string() == "runner");
  }
}

// A tensor type GGUF knows but no kernel package has (i32 norm weights): stage
// runner; a type id GGUF does not know at all: stage container.
TEST(check_refuses_tensor_types_as_the_load_does) {
  Edit to_i32;
  to_i32.tensor = [](GgufWriter& w, const TensorInfo& t) {
    if (std::string(t.name) != "blk.0.attn_norm.weight") return false;
    std::string err;
    return w.add_tensor_ref(t.name, static_cast<uint32_t>(TensorType::I32), std::span<const int64_t>(t.ne, t.n_dims),
                            std::span<const uint8_t>(t.data, static_cast<size_t>(t.nbytes)), &err);
  };
  const std::string i32 = edited_copy(fixture(kBase), "check-i32.gguf", to_i32);
  REQUIRE(!i32.empty());
  LoadCheck c = expect_agreement(i32, small_options(), "i32 tensor");
  CHECK(c.stage == "runner");
  CHECK(c.kind == LoadErrorKind::Unsupported);
  CHECK_MSG(c.error.find("tensor 'blk.0.attn_norm.weight' has type i32, which no enabled kernel provider supports") !=
                std::string::npos, "%s", c.error.c_str());

  const std::string unknown = edited_copy(fixture(kBase), "check-type-77.gguf", to_i32);
  REQUIRE(!unknown.empty());
  REQUIRE(patch_tensor_type(unknown, "blk.0.attn_norm.weight", 1, 77));
  c = expect_agreement(unknown, small_options(), "type id 77");
  CHECK(c.stage == "container");
  CHECK(c.kind == LoadErrorKind::Format);
  CHECK_MSG(c.error.find("unsupported tensor type id 77") != std::string::npos, "%s", c.error.c_str());
}

// A context whose session does not fit (stage 13), and one beyond the limit
// any session may have (stage 1): the load's messages, with the numbers.
TEST(check_refuses_a_context_too_big_as_the_load_does) {
  LoadOptions o = small_options();
  o.n_ctx = 1 << 20;
  o.memory_limit_bytes = 64ull << 20;
  LoadCheck c = expect_agreement(fixture(kBase), o, "1M-token context in 64 MiB");
  CHECK(c.stage == "session_state");
  CHECK(c.kind == LoadErrorKind::OutOfMemory);
  CHECK_MSG(c.error.find("the default context: a session of 1048576 tokens needs") != std::string::npos, "%s", c.error.c_str());
  // The estimate says what did not fit, and against what.
  CHECK(c.estimate["session"]["n_ctx"].as_int() == 1 << 20);
  CHECK(c.estimate["session"]["total_bytes"].as_int() > static_cast<long long>(64ull << 20));
  CHECK(c.estimate["memory_available_bytes"].as_int() == static_cast<long long>(64ull << 20));

  o = small_options();
  o.n_ctx = hparam_limits::kMaxContext + 1;
  c = expect_agreement(fixture(kBase), o, "context beyond the limit");
  CHECK(c.stage == "device_policy");
  CHECK(c.kind == LoadErrorKind::InvalidArgument);
}

// Failures only binding finds (stages 9-10): a missing tensor, and aligned
// copies beyond the memory there is. The check finds them without binding.
TEST(check_finds_what_binding_would_refuse) {
  Edit drop;
  drop.tensor = [](GgufWriter&, const TensorInfo& t) { return std::string(t.name) == "blk.1.attn_k.weight"; };
  const std::string missing = edited_copy(fixture(kBase), "check-missing-k.gguf", drop);
  REQUIRE(!missing.empty());
  LoadCheck c = expect_agreement(missing, small_options(), "missing tensor");
  CHECK(c.stage == "dense_weights");
  CHECK_MSG(c.error.find("missing tensor 'blk.1.attn_k.weight'") != std::string::npos, "%s", c.error.c_str());

  // general.alignment = 1 (test_model_limits): the misaligned tensors need copies.
  std::string path, err;
  for (int pad = 1; pad <= 8 && path.empty(); ++pad) {
    Edit e;
    e.alignment = 1;
    e.meta = [pad](GgufWriter& w) { w.add_string("test.pad", std::string(static_cast<size_t>(pad), 'x')); };
    const std::string candidate = edited_copy(fixture("qwen3moe-a-Q4_0.gguf"), "check-align-1.gguf", e);
    REQUIRE(!candidate.empty());
    auto f = GgufFile::open(candidate, &err);
    REQUIRE(f);
    for (const TensorInfo& t : f->tensors())
      if (t.type == static_cast<uint32_t>(TensorType::Q4_0) && reinterpret_cast<uintptr_t>(t.data) % 2 != 0) path = candidate;
  }
  REQUIRE(!path.empty());
  c = expect_agreement(path, small_options(), "aligned copies");
  REQUIRE(c.ok);
  auto m = GuildModel::load(path, small_options(), &err);
  REQUIRE(m);
  long long copied = -1;
  for (const auto& r : m->profile().stages())
    if (r.name == "dense_weights") copied = r.detail["aligned_copy_bytes"].as_int();
  CHECK(copied > 0);
  CHECK(c.estimate["aligned_copy_bytes"].as_int() == copied);  // counted, not made
  LoadOptions tight = small_options();
  tight.memory_limit_bytes = 1;
  c = expect_agreement(path, tight, "aligned copies beyond the limit");
  CHECK(c.stage == "dense_weights");
  CHECK_MSG(c.error.find("not aligned for its type") != std::string::npos, "%s", c.error.c_str());
}

// The GPU choices (docs/CUDA.md): "cuda:0" where it cannot be used is refused
// in stage packages as the load refuses it; where it can, the check places the
// model as the load's budget arithmetic does — a budget too small for the
// dense part fails cuda:0 in stage expert_tiers and falls back to the CPU under
// auto — with nothing uploaded.
TEST(check_agrees_with_the_load_on_the_gpu_choices) {
  LoadOptions o = small_options();
  o.gpu = "cuda:0";
  LoadCheck c = expect_agreement(fixture(kBase), o, "cuda:0");
  if (!c.ok) {
    CHECK_MSG(c.stage == "packages" && c.kind == LoadErrorKind::Unsupported, "%s: %s", c.stage.c_str(), c.error.c_str());
    CHECK_MSG(c.error.rfind("cuda:0 is not usable: ", 0) == 0, "%s", c.error.c_str());
    std::printf("  no usable GPU here: %s (the GPU budget cases need one)\n", c.error.c_str());
    return;
  }
  CHECK(c.estimate["placement"].as_string() == "gpu");
  CHECK(c.estimate["gpu_device"].as_string() == "cuda:0");
  CHECK(c.estimate["gpu"]["budget_gib"].as_double() > 0);
  CHECK(c.estimate["session"]["kv_bytes"].as_int() == 0);  // the KV cache lives on the device
  o.experts_on_cpu = true;
  c = expect_agreement(fixture(kBase), o, "cuda:0, experts on the CPU");
  CHECK(c.ok && c.estimate["placement"].as_string() == "experts on the CPU");
  o.experts_on_cpu = false;
  o.gpu_budget_bytes = 1 << 20;
  c = expect_agreement(fixture(kBase), o, "cuda:0, 1 MiB budget");
  CHECK(!c.ok && c.stage == "expert_tiers" && c.kind == LoadErrorKind::OutOfMemory);
  CHECK_MSG(c.error.find("GPU budget of 0.00 GiB cannot hold the dense weights") != std::string::npos, "%s", c.error.c_str());
  o.gpu = "auto";
  c = expect_agreement(fixture(kBase), o, "auto, 1 MiB budget");
  CHECK(c.ok && c.estimate["placement"].as_string() == "cpu");
  bool fell_back = false;
  for (const json::Value& f : c.profile["fallbacks"].as_array())
    fell_back = fell_back || f["reason"].as_string().find("GPU not used: GPU budget") != std::string::npos;
  CHECK(fell_back);
}

// The budget arithmetic a check stops at on a GPU (GpuExecution::plan_budget,
// which GpuExecution::create runs first), against a stand-in backend: 10 GiB
// free (9 after the 1 GiB reserve); everything on the device 6 GiB, the dense
// part 2 GiB plus 0.5 GiB of prefill staging.
namespace fake_gpu {
constexpr size_t kGiB = size_t{1} << 30;
bool device_memory(int, size_t* free_bytes, size_t* total_bytes, std::string*) {
  *free_bytes = 10 * kGiB;
  *total_bytes = 16 * kGiB;
  return true;
}
bool estimate(const ModelHparams&, const ModelWeights&, const gpu::DecoderOptions& o, gpu::DecoderMemory* m, std::string*) {
  *m = {};
  const bool all = o.expert_cache_slots.empty();
  m->weights = all ? 6 * kGiB : 2 * kGiB;
  m->staging = !all && o.stream_prefill ? kGiB / 2 : 0;
  return true;
}
}  // namespace fake_gpu

TEST(gpu_budget_plan_decides_as_the_load_does) {
  gpu::BackendV1 backend;
  backend.device_memory = &fake_gpu::device_memory;
  backend.estimate = &fake_gpu::estimate;
  ModelHparams hp;
  hp.n_layer = 2;
  hp.n_expert = 8;
  const ModelWeights w;
  struct Case { int64_t budget; bool experts_on_cpu; const char* mode; bool stream_prefill; };
  const Case fits[] = {
      {-1, false, "all on the GPU", true},          // the default budget: 9 GiB
      {4 * int64_t(fake_gpu::kGiB), false, "hybrid", true},
      {int64_t(fake_gpu::kGiB) * 9 / 4, false, "hybrid", false},  // 2.25 GiB: dense fits without the staging area
      {-1, true, "experts on the CPU", true},
  };
  for (const Case& k : fits) {
    GpuLoadOptions o;
    o.budget_bytes = k.budget;
    o.experts_on_cpu = k.experts_on_cpu;
    GpuBudget plan;
    json::Value detail = json::Value::object();
    std::string err;
    CHECK_MSG(GpuExecution::plan_budget(backend, hp, w, o, &plan, &detail, &err), "%s", err.c_str());
    CHECK_MSG(detail["mode"].as_string() == k.mode, "budget %lld: %s", static_cast<long long>(k.budget),
              detail["mode"].as_string().c_str());
    CHECK(plan.stream_prefill == k.stream_prefill);
    CHECK(plan.all_fit == (std::string(k.mode) == "all on the GPU"));
    CHECK(plan.budget == (k.budget < 0 ? 9 * fake_gpu::kGiB : static_cast<uint64_t>(k.budget)));
  }
  GpuLoadOptions o;
  o.budget_bytes = int64_t(fake_gpu::kGiB);
  GpuBudget plan;
  json::Value detail = json::Value::object();
  std::string err;
  CHECK(!GpuExecution::plan_budget(backend, hp, w, o, &plan, &detail, &err));
  CHECK_MSG(err == "GPU budget of 1.00 GiB cannot hold the dense weights, KV cache and workspace (2.00 GiB)", "%s", err.c_str());
  CHECK(!detail["mode"].is_string());
  CHECK(detail["budget_gib"].as_double() == 1.0);
}

// The invariant the app relies on, over every reference model: the check says
// ok exactly when the load succeeds, and otherwise gives its message.
TEST(check_agrees_with_the_load_for_every_fixture) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(check::fixtures_dir() + "/models")) {
    const std::string n = e.path().filename().string();
    if (n.size() > 5 && n.ends_with(".gguf") && n.find("imatrix") == std::string::npos &&
        (n.find("-of-") == std::string::npos || n.find("-00001-of-") != std::string::npos))
      names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() > 10);
  int loadable = 0, refused = 0;
  for (const std::string& n : names) {
    const LoadCheck c = expect_agreement(fixture(n), small_options(), n.c_str());
    (c.ok ? loadable : refused)++;
  }
  std::printf("  %d fixtures: %d loadable, %d refused (check and load agree)\n", static_cast<int>(names.size()), loadable,
              refused);
  CHECK(loadable > 0 && refused > 0);
}
