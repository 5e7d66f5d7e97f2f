// GuildModel::load: the load stages, in the order of the seed's lifecycle and
// ARCHITECTURE.md §2. Each stage is one StartupProfile entry; a stage with
// nothing to do here still appears, with a detail saying why. GuildModel::check
// runs the same stages as a pre-flight check (check_only): the ones that decide
// whether the load succeeds, minus every side effect.
#include "runtime/model.h"
#include "core/tuning.h"

#include "models/hparam_limits.h"
#include "packages/loader.h"
#include "packages/store.h"
#include "runtime/calibration_text.h"
#include "runtime/gpu_execution.h"
#include "runtime/numa_placement.h"
#include "runtime/session_memory.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <new>

namespace guild {
namespace {

struct LoadFailure {
  LoadErrorKind kind;
  std::string message;
};

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr const char* kVocabOnlySkip = "vocab-only load: only the container and the tokenizer are read";
constexpr const char* kCheckSkip = "pre-flight check: nothing is started, leased, bound or touched here";

// The threads a load uses: the option, else one per physical core.
int load_threads(const LoadOptions& options, const MachineInfo& machine) {
  return options.n_threads > 0 ? options.n_threads : std::max(1, machine.physical_usable);
}

}  // namespace

GuildModel::~GuildModel() = default;

uint64_t GuildModel::session_memory_limit() const {
  return options_.memory_limit_bytes > 0 ? options_.memory_limit_bytes : memory_for_allocations();
}

bool GuildModel::files_unchanged(std::string* error) {
  if (files_->unchanged_on_disk(error)) return true;
  mark_failed(*error);
  return false;
}

// What run_stages did: the model (null only when it could not be made), and
// on failure the load's message and the stage that gave it.
struct GuildModel::StageRun {
  std::unique_ptr<GuildModel> model;
  LoadErrorKind kind = LoadErrorKind::None;
  std::string error;
  std::string stage;
};

std::unique_ptr<GuildModel> GuildModel::load(const std::string& path, const LoadOptions& options,
                                             std::string* error, LoadErrorKind* kind) {
  StageRun run = run_stages(path, options, /*check_only=*/false);
  if (kind) *kind = run.kind;
  if (run.kind != LoadErrorKind::None) {
    *error = run.error;
    return nullptr;
  }
  return std::move(run.model);
}

LoadCheck GuildModel::check(const std::string& path, const LoadOptions& options) {
  LoadOptions full = options;
  full.vocab_only = false;
  StageRun run = run_stages(path, full, /*check_only=*/true);
  LoadCheck c;
  c.ok = run.kind == LoadErrorKind::None;
  c.kind = run.kind;
  c.stage = run.stage;
  c.error = run.error;
  if (!run.model) return c;
  GuildModel& m = *run.model;
  c.profile = m.profile_.to_json();
  c.estimate = std::move(m.estimate_);
  return c;
}

GuildModel::StageRun GuildModel::run_stages(const std::string& path, const LoadOptions& options, bool check_only) {
  StageRun run;
  std::unique_ptr<GuildModel>& m = run.model;
  try {
    m.reset(new GuildModel());
  } catch (const std::bad_alloc&) {
    run.kind = LoadErrorKind::OutOfMemory;
    run.error = path + ": out of memory";
    return run;
  }
  m->path_ = path;
  m->display_name_ = file_name(path);
  m->options_ = options;
  m->queue_.set_max_waiting(options.max_queued);
  StartupProfile& prof = m->profile_;
  json::Value& estimate = m->estimate_;
  int stage_index = 0;
  const char* stage_name = "";
  auto enter = [&](const char* name) -> StageRecord& {
    stage_name = name;
    StageRecord& r = prof.begin(name);
    if (options.progress && !options.progress(name, static_cast<double>(stage_index) / kLoadStageCount))
      throw LoadFailure{LoadErrorKind::Cancelled, "load cancelled during stage " + std::string(name)};
    ++stage_index;
    return r;
  };
  auto fail = [&](LoadErrorKind k, const std::string& msg) { throw LoadFailure{k, msg}; };
  // A stage a check does not run: recorded, with why.
  auto skip_for_check = [&](const char* name) { enter(name).detail.set("skipped", kCheckSkip); };

  try {
    std::string err;
    ModelExecutionState exec;
    MachineInfo machine;
    bool use_gpu = false;  // decided in stage 2, once the GPU package (if any) is loaded
    bool gpu_required = false;  // cuda:N asked for (by option or $GUILD_GPU): no fallback to the CPU
    int gpu_device = 0;
    std::vector<int> peer_devices;
    std::string gpu_choice;  // stage 1: auto / cpu / cuda:N

    // 1. Device policy: what this machine has, and the user's choices.
    {
      StageRecord& st = enter("device_policy");
      if (options.n_threads < 0 || options.n_ctx < 0) fail(LoadErrorKind::InvalidArgument, "negative thread count or context size");
      if (options.n_ctx > hparam_limits::kMaxContext)
        fail(LoadErrorKind::InvalidArgument, "context size " + std::to_string(options.n_ctx) + " exceeds the limit of " +
                                                 std::to_string(hparam_limits::kMaxContext) + " tokens");
      machine = detect_machine();
      prof.machine() = machine.to_json();
      st.detail.set("threads_requested", options.n_threads);
      // GPU: the option, else $GUILD_GPU, else "auto".
      gpu_choice = options.gpu;
      if (gpu_choice.empty()) {
        const char* env = std::getenv("GUILD_GPU");
        gpu_choice = env && *env ? env : "auto";
      }
      if (gpu_choice != "auto" && gpu_choice != "cpu" && gpu_choice.rfind("cuda:", 0) != 0)
        fail(LoadErrorKind::InvalidArgument, "unknown GPU choice '" + gpu_choice + "' (expected auto, cpu or cuda:N)");
      if (options.gpu_budget_bytes == 0) fail(LoadErrorKind::InvalidArgument, "a GPU budget of 0 bytes");
      st.detail.set("gpu_choice", gpu_choice);
      gpu_required = gpu_choice.rfind("cuda:", 0) == 0;
      if (gpu_choice.rfind("cuda:", 0) == 0) {
        char* end = nullptr;
        const long d = std::strtol(gpu_choice.c_str() + 5, &end, 10);
        if (!end || *end || d < 0 || d > 64) fail(LoadErrorKind::InvalidArgument, "bad GPU device '" + gpu_choice + "'");
        gpu_device = static_cast<int>(d);
      }
      // Peer GPUs: "cuda:N" entries separated by commas.
      for (size_t at = 0; at < options.gpu_peers.size();) {
        size_t comma = options.gpu_peers.find(',', at);
        if (comma == std::string::npos) comma = options.gpu_peers.size();
        const std::string item = options.gpu_peers.substr(at, comma - at);
        at = comma + 1;
        char* end = nullptr;
        const long d = item.rfind("cuda:", 0) == 0 ? std::strtol(item.c_str() + 5, &end, 10) : -1;
        if (d < 0 || d > 64 || !end || *end)
          fail(LoadErrorKind::InvalidArgument, "bad peer GPU '" + item + "' (expected cuda:N, comma separated)");
        if (std::find(peer_devices.begin(), peer_devices.end(), static_cast<int>(d)) != peer_devices.end())
          fail(LoadErrorKind::InvalidArgument, "peer GPU " + item + " is named twice");
        peer_devices.push_back(static_cast<int>(d));
      }
      if (!peer_devices.empty()) {
        if (gpu_choice == "cpu") fail(LoadErrorKind::InvalidArgument, "peer GPUs need a GPU (gpu = cpu)");
        json::Value pj = json::Value::array();
        for (int d : peer_devices) pj.push_back("cuda:" + std::to_string(d));
        st.detail.set("gpu_peers", std::move(pj));
      }
      // The devices are known once the GPU package is loaded (stage 2), which
      // completes this record.
      st.detail.set("gpu", gpu_choice == "cpu" ? json::Value("not used (gpu = cpu)") : json::Value("see stage 2"));
      // The CPU kernel table is chosen in stage 2, among the enabled packages.
      // Worker CPUs: one per physical core first.
      const int n_threads = load_threads(options, machine);
      st.detail.set("threads", n_threads);
      estimate.set("threads", n_threads);
      exec.n_ctx = options.n_ctx;
      // Keep the CPU list for stage 6.
      json::Value cpus = json::Value::array();
      for (int i = 0; i < n_threads && i < static_cast<int>(machine.worker_cpus.size()); ++i) cpus.push_back(machine.worker_cpus[i]);
      st.detail.set("worker_cpus", std::move(cpus));
    }

    // 2. Enabled kernel packages. The runtime has no kernels of its own:
    // the CPU table comes from the packages of the user's directory and the
    // bundled ones (docs/PACKAGES.md), or the load fails here.
    if (options.vocab_only) {
      enter("packages").detail.set("skipped", kVocabOnlySkip);
    } else {
      StageRecord& st = enter("packages");
      // An explicit directory, else $GUILD_PACKAGES_DIR, else the user data dir.
      const packages::PackageStore store(packages::PackageStore::resolve_dir(options.packages_dir));
      packages::PackageLoadResult pr = packages::load_enabled_packages(store, m->display_name_);
      // A state file or lease records that cannot be read: refuse, never guess (docs/PACKAGES.md).
      if (!pr.error.empty())
        fail(pr.error_status == packages::PackageStatus::Corrupt ? LoadErrorKind::Format : LoadErrorKind::Io, pr.error);
      st.detail.set("dir", pr.dir);
      st.detail.set("bundled_dir", pr.bundled_dir.empty() ? json::Value() : json::Value(pr.bundled_dir));
      json::Value loaded = json::Value::array();
      for (const auto& p : pr.loaded) {
        json::Value v = json::Value::object();
        v.set("name", p->manifest.name);
        v.set("version", p->manifest.version);
        v.set("source", packages::package_source_name(p->source));
        v.set("score", p->score);
        v.set("library", p->library_path);
        loaded.push_back(std::move(v));
      }
      st.detail.set("loaded", std::move(loaded));
      json::Value skipped = json::Value::array();
      std::string skip_summary;  // for the error when nothing is usable
      for (const auto& sk : pr.skipped) {
        json::Value v = json::Value::object();
        v.set("name", sk.name);
        v.set("reason", sk.reason);
        skipped.push_back(std::move(v));
        skip_summary += (skip_summary.empty() ? "" : "; ") + sk.name + ": " + sk.reason;
        if (sk.reason != "disabled") prof.add_fallback("packages", sk.name + " skipped: " + sk.reason);
      }
      st.detail.set("skipped", std::move(skipped));
      const char* forced = tuning().force_kernels.empty() ? nullptr : tuning().force_kernels.c_str();
      std::string note;
      std::shared_ptr<packages::LoadedProvider> chosen = packages::pick_cpu_provider(pr, forced, &note);
      if (!note.empty()) prof.add_fallback("packages", note);
      if (!chosen) {
        const std::string where = pr.dir + (pr.bundled_dir.empty() ? " (and no bundled packages were found)"
                                                                   : " or the bundled packages in " + pr.bundled_dir);
        fail(LoadErrorKind::Unsupported,
             "no usable CPU kernel package in " + where + ": " +
                 (skip_summary.empty() ? std::string("there are none; install one")
                                       : skip_summary + "; enable or install one") +
                 " (see `guild packages list`)");
      }
      packages::CpuOpProviders op_providers;
      std::string lease_error;
      // A check composes the same table but leases nothing (an empty holder):
      // it holds the libraries only while it runs.
      const std::string holder = check_only ? std::string() : "model " + m->display_name_;
      m->kernel_provider_ = packages::compose_cpu_kernels(chosen, pr, holder, &op_providers, &lease_error);
      if (!m->kernel_provider_) fail(LoadErrorKind::Io, lease_error);
      m->kernels_ = m->kernel_provider_->cpu;
      st.detail.set("cpu_source", "package");
      // Other processes (the CLI while the app runs) see this use too; this
      // process's own leases are taken in stage 7.
      if (!check_only && !packages::record_process_lease(*m->kernel_provider_, pr.dir, holder, &lease_error))
        fail(LoadErrorKind::Io, lease_error);
      if (check_only) st.detail.set("leases", "none (pre-flight check)");
      st.detail.set("cpu_kernels", m->kernels_->name);
      // device_policy.cpu_kernels (profile schema v1) reports the same choice,
      // made here now that it depends on the packages.
      if (StageRecord* policy = prof.find("device_policy")) policy->detail.set("cpu_kernels", m->kernels_->name);
      json::Value providers = json::Value::object();
      providers.set("cpu", m->kernels_->name);
      json::Value ops = json::Value::object();
      for (const char* op : packages::kCpuOpClasses) ops.set(op, op_providers.primary);
      providers.set("ops", std::move(ops));
      // Tensor types and activation quantizers the chosen provider lacks,
      // served by the next provider in priority order that has them.
      json::Value type_rows = json::Value::object();
      for (const auto& [type, provider] : op_providers.type_rows) type_rows.set(type, provider);
      providers.set("type_rows", std::move(type_rows));
      json::Value act = json::Value::object();
      for (const auto& [type, provider] : op_providers.act_quantizers) act.set(type, provider);
      providers.set("quantize_act_types", std::move(act));
      st.detail.set("providers", std::move(providers));

      // The GPU: the best loaded package with a GPU backend, unless the user chose the CPU.
      StageRecord* policy = prof.find("device_policy");
      auto set_policy_gpu = [&](json::Value v) { if (policy) policy->detail.set("gpu", std::move(v)); };
      std::shared_ptr<packages::LoadedProvider> gp = packages::pick_gpu_provider(pr);
      if (gp) {
        const gpu::BackendV1& be = *gp->gpu;
        st.detail.set("gpu_provider", gp->manifest.name);
        if (gpu::DeviceTopology topo; be.topology(&topo, nullptr)) {  // every device and its peers
          json::Value devs = json::Value::array();
          for (size_t i = 0; i < topo.devices.size(); ++i) {
            const gpu::DeviceInfo& d = topo.devices[i];
            json::Value v = json::Value::object();
            v.set("device", static_cast<long long>(i));
            v.set("name", d.name);
            v.set("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
            v.set("total_bytes", static_cast<unsigned long long>(d.total_bytes));
            v.set("free_bytes", static_cast<unsigned long long>(d.free_bytes));
            json::Value peers = json::Value::array();
            for (size_t j = 0; j < topo.devices.size(); ++j)
              if (topo.peer[i][j]) peers.push_back(static_cast<long long>(j));
            v.set("peer_access", std::move(peers));
            devs.push_back(std::move(v));
          }
          if (policy) policy->detail.set("cuda_devices", std::move(devs));
        }
      }
      if (gpu_choice != "cpu") {
        std::string why;
        gpu::DeviceInfo info;
        bool installed = gp != nullptr;
        if (!gp) {
          why = "no GPU package is installed";
          for (const auto& sk : pr.skipped)
            if (sk.name == "cuda") {
              why = "the cuda package is not used: " + sk.reason;
              installed = true;
            }
        } else if (gp->gpu->available(&why) && gp->gpu->device_info(gpu_device, &info, &why) && info.cc_major >= 8) {
          use_gpu = true;
          m->gpu_provider_ = gp;
          if (!check_only) {
            m->gpu_lease_ = Lease(gp->manifest.name, holder);
            if (std::string gpu_lease_error; !packages::record_process_lease(*gp, pr.dir, holder, &gpu_lease_error))
              fail(LoadErrorKind::Io, gpu_lease_error);
          }
          json::Value g = json::Value::object();
          g.set("device", gpu_device);
          g.set("name", info.name);
          g.set("compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
          g.set("sm_count", info.sm_count);
          g.set("total_bytes", static_cast<unsigned long long>(info.total_bytes));
          g.set("free_bytes", static_cast<unsigned long long>(info.free_bytes));
          set_policy_gpu(std::move(g));
          for (int d : peer_devices) {
            gpu::DeviceInfo pi;
            std::string pwhy;
            if (d == gpu_device && !options.gpu_peer_stand_in)
              fail(LoadErrorKind::InvalidArgument, "peer GPU cuda:" + std::to_string(d) + " is the primary device");
            if (!gp->gpu->device_info(d, &pi, &pwhy) || pi.cc_major < 8)
              fail(LoadErrorKind::Unsupported, "peer GPU cuda:" + std::to_string(d) + " is not usable: " +
                                                   (pwhy.empty() ? "compute capability < 8.0" : pwhy));
          }
        } else if (why.empty()) {
          why = "device " + std::to_string(gpu_device) + " has compute capability < 8.0";
        }
        if (!use_gpu) {
          if (gpu_choice != "auto") fail(LoadErrorKind::Unsupported, gpu_choice + " is not usable: " + why);
          set_policy_gpu(json::Value(why));
          // A GPU package that cannot be used is worth a fallback entry; none installed is the normal CPU setup.
          if (installed) prof.add_fallback("device_policy", "no usable GPU (" + why + "); everything runs on the CPU");
        }
      }
    }

    // 3. Container: an explicitly named .gpack must open; otherwise GGUF shards.
    {
      StageRecord& st = enter("container");
      if (ends_with(path, ".gpack"))
        fail(LoadErrorKind::Unsupported, path + ": .gpack containers are not supported by this build");
      if (std::error_code ec; std::filesystem::is_directory(path, ec))
        fail(LoadErrorKind::Io, path + ": is a directory, not a model file");
      m->files_ = gguf::ModelFiles::open(path, &err);
      if (!m->files_) {
        std::error_code ec;
        fail(std::filesystem::exists(path, ec) ? LoadErrorKind::Format : LoadErrorKind::Io, err);
      }
      st.bytes = m->files_->file_bytes();
      st.detail.set("format", "gguf");
      st.detail.set("shards", static_cast<long long>(m->files_->shards().size()));
      st.detail.set("tensors", static_cast<long long>(m->files_->tensors().size()));
      st.detail.set("gguf_version", m->files_->primary().version());
    }

    // A vocab-only load stops here: the tokenizer is built from the metadata
    // and every other stage is recorded as skipped.
    if (options.vocab_only) {
      for (int i = 3; i < kLoadStageCount - 1; ++i) enter(kLoadStages[i]).detail.set("skipped", kVocabOnlySkip);
      StageRecord& st = enter("tokenizer");
      m->vocab_ = Vocab::from_gguf(*m->files_, &err);
      if (!m->vocab_) fail(LoadErrorKind::Format, path + ": " + err);
      st.detail.set("model", std::string(m->vocab_->model_name()));
      st.detail.set("pre", std::string(m->vocab_->pre_name()));
      st.detail.set("tokens", m->vocab_->n_tokens());
      m->vocab_only_ = true;
      m->hp_.n_vocab = m->vocab_->n_tokens();
      m->hp_.n_ctx_train = 0;
      if (auto arch = m->files_->get_string("general.architecture")) {
        m->hp_.arch = std::string(*arch);
        if (auto ctx = m->files_->get_int(m->hp_.arch + ".context_length"); ctx && *ctx > 0 && *ctx <= hparam_limits::kMaxContext)
          m->hp_.n_ctx_train = static_cast<int>(*ctx);
      }
      m->mark_failed("opened for its tokenizer only (vocab only): it cannot generate");
      prof.finish();
      if (options.progress) options.progress("ready", 1.0);
      return run;
    }

    // 4. Runner: architecture and capability checks.
    {
      StageRecord& st = enter("runner");
      auto arch = m->files_->get_string("general.architecture");
      if (!arch) fail(LoadErrorKind::Format, path + ": missing metadata key 'general.architecture'");
      m->runner_ = find_runner(*arch);
      if (!m->runner_) {
        std::string names;
        for (auto n : supported_architectures()) names += (names.empty() ? "" : ", ") + std::string(n);
        fail(LoadErrorKind::Unsupported, path + ": unknown architecture '" + std::string(*arch) + "' (supported: " + names + ")");
      }
      m->hp_.arch = std::string(*arch);
      if (!m->runner_->load_hparams(*m->files_, &m->hp_, &err)) fail(LoadErrorKind::Format, path + ": " + err);
      // Every tensor's type needs a kernel on the device that will run it.
      for (const auto& t : m->files_->tensors()) {
        const bool known = t.type < kTensorTypeIdLimit && m->kernels_->types[t.type].dequant_row;
        if (!known)
          fail(LoadErrorKind::Unsupported, path + ": tensor '" + std::string(t.name) + "' has type " +
                                               std::string(tensor_type_name(t.type)) + ", which no enabled kernel provider supports");
      }
      st.detail.set("architecture", m->hp_.arch);
      st.detail.set("layers", m->hp_.n_layer);
      st.detail.set("experts", m->hp_.n_expert);
      st.detail.set("experts_per_token", m->hp_.n_expert_used);
      json::Value model_info = json::Value::object();
      model_info.set("path", path);
      model_info.set("name", m->display_name_);
      model_info.set("architecture", m->hp_.arch);
      model_info.set("file_bytes", static_cast<unsigned long long>(m->files_->file_bytes()));
      model_info.set("n_layer", m->hp_.n_layer);
      model_info.set("n_expert", m->hp_.n_expert);
      prof.model() = std::move(model_info);
    }

    // 5. Model-scoped execution state, set before any weight is prepared.
    {
      StageRecord& st = enter("execution_state");
      exec.rope = m->hp_.rope;
      exec.kv_type = options.kv_type;
      if (exec.n_ctx <= 0) exec.n_ctx = std::min(m->hp_.n_ctx_train, 4096);
      exec.kv_source_layer.resize(m->hp_.n_layer);
      for (int l = 0; l < m->hp_.n_layer; ++l) exec.kv_source_layer[l] = l;
      exec.kv_resident_tokens = exec.n_ctx;
      m->exec_ = std::make_shared<const ModelExecutionState>(exec);
      st.detail.set("kv_type", exec.kv_type == KvType::F16 ? "f16" : "f32");
      st.detail.set("n_ctx", exec.n_ctx);
      estimate.set("n_ctx", exec.n_ctx);
      estimate.set("kv_type", exec.kv_type == KvType::F16 ? "f16" : "f32");
      st.detail.set("rope", exec.rope.style == RopeStyle::Neox ? "neox" : "norm");
      st.detail.set("rope_freq_base", exec.rope.freq_base);
      st.detail.set("shared_kv_layers", 0);
    }

    // 6. CPU expert pool: affinity installed before any expert page is touched.
    //    With workers on several NUMA nodes, each layer's routed experts are
    //    assigned to nodes and first touched there (runtime/numa_placement.h).
    //    A check starts no pool: the sizes that depend on it use the thread
    //    count it would have.
    if (check_only) {
      skip_for_check("expert_pool");
    } else {
      StageRecord& st = enter("expert_pool");
      const int n_threads = load_threads(options, machine);
      std::vector<int> cpus;
      if (options.pin_threads)
        for (int i = 0; i < n_threads && !machine.worker_cpus.empty(); ++i)
          cpus.push_back(machine.worker_cpus[i % machine.worker_cpus.size()]);
      m->pool_ = std::make_unique<ThreadPool>(n_threads, cpus);
      if (!cpus.empty()) pin_current_thread(cpus[0]);  // the caller is worker 0 during the load
      st.detail.set("threads", n_threads);
      st.detail.set("pinned", !cpus.empty());
      const NumaPlacement numa = place_experts_on_nodes(*m->pool_, machine, *m->files_, m->hp_.n_expert);
      numa.describe(st.detail);
      st.bytes = numa.touched_bytes;
    }

    // 7. Streams and the kernel lease.
    if (check_only) {
      skip_for_check("stream_and_lease");
    } else {
      StageRecord& st = enter("stream_and_lease");
      m->kernel_lease_ = Lease(m->kernels_->name, "model " + m->display_name_);
      if (use_gpu) {
        st.detail.set("gpu_streams", 1);
        st.detail.set("streams", "one compute stream, created with the device state at the end of stage 10; the CPU "
                                 "expert server talks to it through a host-mapped mailbox");
        st.detail.set("device", gpu_device);
      } else {
        st.detail.set("gpu_streams", 0);
        st.detail.set("reason", "no GPU in use: no CUDA stream");
      }
      st.detail.set("leased_providers", json::Value::array({json::Value(m->kernels_->name)}));
    }

    // 8. .gexec resolution: never fails the load (so a check skips it).
    if (check_only) {
      skip_for_check("gexec");
    } else {
      StageRecord& st = enter("gexec");
      const std::string sidecar = path + ".gexec";
      std::error_code ec;
      if (std::filesystem::exists(sidecar, ec)) {
        st.detail.set("path", sidecar);
        prof.add_fallback("gexec", sidecar + ": .gexec artifacts are not supported by this build; default kernels used");
      } else {
        st.detail.set("found", false);
        prof.add_fallback("gexec", "no .gexec artifact next to the model; default kernel choices used");
      }
      st.detail.set("resolved", false);
    }

    // 9. Dense weights and output head (zero-copy views of the mapping on the CPU).
    TensorBinder binder(*m->files_, *m->kernels_, m->weights_);
    // Tensors a small general.alignment leaves misaligned for their type are
    // copied (models/weights.h); the copies must fit in memory.
    binder.set_copy_limit(m->session_memory_limit());
    // A check runs the binder's every test (names, shapes, kernels, the copy
    // limit) but copies and reads nothing: its views are never used.
    binder.set_check_only(check_only);
    {
      StageRecord& st = enter("dense_weights");
      if (!m->runner_->bind_dense(binder, m->hp_, &m->weights_, &err)) {
        const bool unsupported = err.find("does not support") != std::string::npos;
        fail(unsupported ? LoadErrorKind::Unsupported : LoadErrorKind::Format, path + ": " + err);
      }
      st.bytes = binder.bound_bytes();
      st.detail.set("aligned_copies", binder.copied_tensors());
      st.detail.set("aligned_copy_bytes", static_cast<unsigned long long>(binder.copied_bytes()));
      st.detail.set("output_tied", m->weights_.output_tied);
      st.detail.set("placement", check_only ? "checked, not bound (pre-flight check)" : "cpu (mapped)");
      estimate.set("dense_bytes", static_cast<unsigned long long>(binder.bound_bytes()));
    }
    // The GPU side needs the experts bound too (to size its caches): it is
    // created at the end of stage 10, and stage 9's record gets the upload.
    

    // 10. Expert tiers.
    {
      StageRecord& st = enter("expert_tiers");
      const uint64_t before = binder.bound_bytes();
      if (!m->runner_->bind_experts(binder, m->hp_, &m->weights_, &err)) {
        const bool unsupported = err.find("does not support") != std::string::npos;
        fail(unsupported ? LoadErrorKind::Unsupported : LoadErrorKind::Format, path + ": " + err);
      }
      st.bytes = binder.bound_bytes() - before;
      st.detail.set("source", "gguf");
      if (!m->runner_->build_recipe(m->hp_, m->weights_, &m->recipe_, &err)) fail(LoadErrorKind::Format, path + ": " + err);
      if (StageRecord* dense = prof.find("dense_weights")) {  // the copies of both stages, counted in one place
        dense->detail.set("aligned_copies", binder.copied_tensors());
        dense->detail.set("aligned_copy_bytes", static_cast<unsigned long long>(binder.copied_bytes()));
      }
      st.detail.set("moe_layers", static_cast<long long>(std::count_if(
          m->weights_.layers.begin(), m->weights_.layers.end(), [](const LayerWeights& L) { return L.is_moe(); })));
      m->weight_bytes_ = binder.bound_bytes();
      estimate.set("expert_bytes", static_cast<unsigned long long>(st.bytes));
      estimate.set("weight_bytes", static_cast<unsigned long long>(m->weight_bytes_));
      estimate.set("aligned_copy_bytes", static_cast<unsigned long long>(binder.copied_bytes()));
      if (use_gpu) {
        // Dense weights, KV cache and workspace to the device, then the first
        // expert cache fill (no routing statistics yet: equal shares per layer).
        GpuLoadOptions go;
        go.device = gpu_device;
        go.n_ctx = exec.n_ctx;
        go.budget_bytes = options.gpu_budget_bytes;
        go.experts_on_cpu = options.experts_on_cpu;
        go.peer_devices = peer_devices;
        go.peer_budget_bytes = options.gpu_peer_budget_bytes;
        go.peer_stand_in = options.gpu_peer_stand_in;
        go.layers = m->recipe_.executor_layers();
        // The MTP block drafts on the device beside the trunk.
        go.nextn = m->hp_.n_nextn > 0 && !m->weights_.nextn.empty() && m->recipe_.executor_nextn(&go.nextn_layer);
        go.pin_cpu = options.pin_threads && !machine.worker_cpus.empty() ? machine.worker_cpus[0] : -1;
        json::Value gd = json::Value::object();
        // A check stops at the budget arithmetic (the device is asked for its
        // free memory; nothing is allocated or uploaded).
        bool placed = false;
        // The CUDA executor runs the standard layer steps only (models/recipe.h).
        if (const std::string gap = m->recipe_.gpu_gap(); !gap.empty()) {
          err = "the CUDA executor has no step for " + m->hp_.arch + "'s " + gap + " yet";
        } else if (check_only) {
          GpuBudget fit;
          placed = GpuExecution::plan_budget(*m->gpu_provider_->gpu, m->hp_, m->weights_, go, &fit, &gd, &err);
        } else {
          m->gpu_.reset(GpuExecution::create(*m->gpu_provider_->gpu, m->hp_, m->weights_, *m->kernels_, *m->pool_, go, &gd, &err)
                            .release());
          placed = m->gpu_ != nullptr;
        }
        if (!placed) {
          if (!gpu_required) {
            prof.add_fallback("dense_weights", "GPU not used: " + err + "; everything runs on the CPU");
            gd.set("error", err);
            use_gpu = false;
          } else {
            fail(err.find("budget") != std::string::npos ? LoadErrorKind::OutOfMemory : LoadErrorKind::Unsupported, path + ": " + err);
          }
        }
        if (placed) {
          const json::Value& mode = gd["mode"];
          estimate.set("placement", mode.is_string() && mode.as_string() == "all on the GPU" ? "gpu"
                                    : mode.is_string() && mode.as_string() == "experts on the CPU" ? "experts on the CPU"
                                                                                                  : "hybrid");
          estimate.set("gpu_device", "cuda:" + std::to_string(gpu_device));
          estimate.set("gpu", gd);
        }
        if (StageRecord* dense = prof.find("dense_weights")) {
          if (m->gpu_) {
            const auto& mem = m->gpu_->decoder().memory();
            dense->detail.set("placement", "gpu");
            dense->detail.set("gpu_weight_bytes", static_cast<unsigned long long>(mem.weights));
            dense->detail.set("gpu_kv_bytes", static_cast<unsigned long long>(mem.kv_cache));
            dense->detail.set("gpu_scratch_bytes", static_cast<unsigned long long>(mem.scratch));
          }
          dense->detail.set("gpu", std::move(gd));
        }
        if (m->gpu_) {
          json::Value ram = json::Value::object();
          m->gpu_->pin_ram_tier(m->weights_, machine.ram_total, machine.ram_available, &ram);
          st.detail.set("ram_tier", std::move(ram));
          json::Value fill = json::Value::object();
          if (!m->gpu_->fill_initial(&fill, &err)) fail(LoadErrorKind::Unsupported, path + ": GPU expert cache: " + err);
          fill.set("cache_bytes_allocated", static_cast<unsigned long long>(m->gpu_->decoder().memory().expert_cache));
          st.detail.set("gpu_cache", std::move(fill));
          st.detail.set("tiers", m->gpu_->hybrid() ? "gpu cache + ram (cpu expert pool)" : "gpu (all experts)");
        }
      }
      if (!use_gpu) {
        st.detail.set("tiers", "ram (cpu expert pool)");
        estimate.set("placement", "cpu");
      }
    }

    // 11. Calibration and the GPU expert cache (the placement a check does
    // not make: it measures routing on the device).
    if (check_only) {
      skip_for_check("calibration");
    } else {
      StageRecord& st = enter("calibration");
      if (m->gpu_) {
        // Routing statistics need the calibration text as tokens: the
        // tokenizer is built here and kept for stage 14.
        m->vocab_ = Vocab::from_gguf(*m->files_, &err);
        if (!m->vocab_) fail(LoadErrorKind::Format, path + ": " + err);
        const std::vector<int32_t> calib = m->vocab_->tokenize(kCalibrationText, false, false);
        json::Value layers = json::Value::array();
        if (!m->gpu_->calibrate(calib, &st.detail, &layers, &err)) fail(LoadErrorKind::Unsupported, path + ": calibration: " + err);
        st.detail.set("plan", m->gpu_->hybrid() ? "hybrid: hottest experts per byte on the GPU, the rest on the CPU pool"
                                                : "all experts on the GPU");
        st.detail.set("gpu_cache_bytes", static_cast<unsigned long long>(m->gpu_->decoder().memory().expert_cache));
        prof.placement().set("layers", std::move(layers));
        prof.placement().set("device", "cuda:" + std::to_string(gpu_device));
      }
      json::Value layers = json::Value::array();
      if (!m->gpu_) {
      st.detail.set("plan", "all experts on the CPU");
      st.detail.set("reason", "no GPU: nothing to place");
      st.detail.set("gpu_cache_bytes", 0);
      for (const LayerWeights& L : m->weights_.layers) {
        json::Value v = json::Value::object();
        v.set("gpu_experts", 0);
        v.set("cpu_experts", L.is_moe() ? m->hp_.n_expert : 0);
        v.set("dense", !L.is_moe());
        layers.push_back(std::move(v));
      }
      prof.placement().set("layers", std::move(layers));
      }
    }

    // 12. RAM-resident complement: experts read in place from the mapping.
    if (check_only) {
      skip_for_check("ram_complement");
    } else {
      StageRecord& st = enter("ram_complement");
      uint64_t expert_bytes = 0;
      for (const LayerWeights& L : m->weights_.layers)
        if (L.is_moe())
          expert_bytes += (L.gate_exps.expert_bytes + L.up_exps.expert_bytes + L.down_exps.expert_bytes) *
                          static_cast<uint64_t>(m->hp_.n_expert);
      bool pinned = false;
      if (const StageRecord* tiers = prof.find("expert_tiers")) pinned = tiers->detail["ram_tier"]["pinned"].as_bool();
      st.detail.set("mode", pinned ? "pinned copy" : "zero-copy mmap");
      st.detail.set("pinned", pinned);
      if (m->gpu_ && !m->gpu_->hybrid()) {
        expert_bytes = 0;
        st.detail.set("reason", "every expert is on the GPU: no RAM tier");
      } else if (m->gpu_) {
        const uint64_t cached = m->gpu_->decoder().memory().expert_cache;
        expert_bytes = expert_bytes > cached ? expert_bytes - cached : 0;
        st.detail.set("reason", pinned ? "stage 10 copied the experts into page-locked RAM: the CPU pool reads the "
                                         "uncached ones there and streamed prefill copies them by DMA"
                                       : "the CPU pool reads the uncached experts in place from the mapping; streamed "
                                         "prefill copies them through the pinned staging ring");
      }
      if (!m->gpu_) st.detail.set("reason", "no GPU: experts are read by the CPU pool straight from the page cache");
      st.bytes = expert_bytes;
    }

    // 13. Shared session state: what each session will allocate.
    {
      StageRecord& st = enter("session_state");
      // What a session of the default context will allocate, checked now so
      // that a model whose first session cannot fit fails here with the
      // numbers rather than later (every session is checked again).
      // use_gpu: the GPU holds the model (a check: it would).
      const std::vector<int> windows = m->recipe_.attention_windows();  // empty before a recipe: all full
      SessionShape shape;
      shape.windows = windows;
      const SessionMemory need =
          estimate_session_memory(m->hp_, exec.n_ctx, load_threads(options, machine), exec.kv_type, use_gpu, shape);
      const uint64_t kv_bytes = need.kv;
      st.detail.set("session_memory", need.to_json());
      const uint64_t limit = m->session_memory_limit();
      st.detail.set("memory_available_bytes", static_cast<unsigned long long>(limit));
      estimate.set("session", need.to_json());
      estimate.set("memory_available_bytes", static_cast<unsigned long long>(limit));
      if (!session_memory_fits(need, limit, &err))
        fail(LoadErrorKind::OutOfMemory, path + ": the default context: " + err);
      if (use_gpu) {
        // One device KV cache (f16) per model: the session that runs holds it;
        // another session's next turn re-prefills its own history first.
        st.detail.set("kv_bytes_per_session", 0);
        st.detail.set("kv", "one f16 KV cache on the GPU, held by the session that last ran");
      } else {
        st.detail.set("kv_bytes_per_session", static_cast<unsigned long long>(kv_bytes));
      }
      st.detail.set("prefill", "batched (up to 512 tokens per pass)");
      ExecutorLayer nextn_steps;
      const bool has_mtp = m->hp_.n_nextn > 0 && !m->weights_.nextn.empty();
      if (!use_gpu && has_mtp) {
        st.detail.set("drafter", "mtp: the nextn block drafts on the CPU (its own one-layer KV cache per session)");
        st.detail.set("drafter_bytes_per_session", static_cast<unsigned long long>(need.drafter));
      } else if (use_gpu && has_mtp &&
                 (m->gpu_ ? m->gpu_->decoder().has_nextn() : m->recipe_.executor_nextn(&nextn_steps))) {
        st.detail.set("drafter", "mtp: the nextn block drafts on the GPU beside the trunk (its experts resident, its KV "
                                 "on the device, in the dense weights and KV of stage 8)");
        st.detail.set("drafter_bytes_per_session", 0);
      } else {
        st.detail.set("drafter", m->hp_.n_nextn > 0 ? "none (the nextn block drafts on the CPU executor only; T = 1 on the GPU)"
                                                    : "none (the model has no MTP block; speculative window T = 1)");
      }
      st.detail.set("verifier", "greedy prefix acceptance with KV rollback");
    }

    // 14. Tokenizer.
    {
      StageRecord& st = enter("tokenizer");
      if (!m->vocab_) m->vocab_ = Vocab::from_gguf(*m->files_, &err);
      else st.detail.set("note", "built in stage 11 for the calibration text");
      if (!m->vocab_) fail(LoadErrorKind::Format, path + ": " + err);
      if (m->vocab_->n_tokens() != m->hp_.n_vocab)
        fail(LoadErrorKind::Format, path + ": tokenizer has " + std::to_string(m->vocab_->n_tokens()) +
                                        " tokens but token_embd.weight has " + std::to_string(m->hp_.n_vocab) + " rows");
      st.detail.set("model", std::string(m->vocab_->model_name()));
      st.detail.set("pre", std::string(m->vocab_->pre_name()));
      st.detail.set("tokens", m->vocab_->n_tokens());
    }
    prof.finish();
    if (options.progress) options.progress("ready", 1.0);
    return run;
  } catch (const LoadFailure& f) {
    run.kind = f.kind;
    run.error = f.message;
  } catch (const std::bad_alloc&) {
    run.kind = LoadErrorKind::OutOfMemory;
    run.error = path + ": out of memory while loading";
  } catch (const std::exception& e) {
    run.kind = LoadErrorKind::Format;
    run.error = path + ": " + e.what();
  }
  run.stage = stage_name;
  prof.finish();  // the failed stage's record is closed where it stopped
  return run;
}

const char* load_error_kind_name(LoadErrorKind kind) {
  switch (kind) {
    case LoadErrorKind::None: return "ok";
    case LoadErrorKind::Io: return "io";
    case LoadErrorKind::Format: return "format";
    case LoadErrorKind::Unsupported: return "unsupported";
    case LoadErrorKind::OutOfMemory: return "out_of_memory";
    case LoadErrorKind::Cancelled: return "cancelled";
    case LoadErrorKind::InvalidArgument: return "invalid_argument";
  }
  return "internal";
}

json::Value LoadCheck::to_json() const {
  json::Value v = json::Value::object();
  v.set("schema", "guild.load-check/1");
  v.set("ok", ok);
  v.set("status", load_error_kind_name(kind));
  v.set("stage", ok ? json::Value() : json::Value(stage));
  v.set("error", ok ? json::Value() : json::Value(error));
  v.set("estimate", estimate);
  v.set("profile", profile);
  return v;
}

}  // namespace guild
