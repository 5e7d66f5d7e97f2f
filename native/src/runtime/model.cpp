// GuildModel::load: the load stages, in the order of the seed's lifecycle and
// ARCHITECTURE.md §2. Each stage is one StartupProfile entry; a stage with
// nothing to do here still appears, with a detail saying why.
#include "runtime/model.h"

#include "packages/loader.h"
#include "packages/store.h"

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

}  // namespace

GuildModel::~GuildModel() = default;

std::unique_ptr<GuildModel> GuildModel::load(const std::string& path, const LoadOptions& options,
                                             std::string* error, LoadErrorKind* kind) {
  LoadErrorKind ignored;
  if (!kind) kind = &ignored;
  *kind = LoadErrorKind::None;
  std::unique_ptr<GuildModel> m;
  try {
    m.reset(new GuildModel());
  } catch (const std::bad_alloc&) {
    *kind = LoadErrorKind::OutOfMemory;
    *error = path + ": out of memory";
    return nullptr;
  }
  m->path_ = path;
  m->display_name_ = file_name(path);
  m->options_ = options;
  m->queue_.set_max_waiting(options.max_queued);
  StartupProfile& prof = m->profile_;
  int stage_index = 0;
  auto enter = [&](const char* name) -> StageRecord& {
    StageRecord& r = prof.begin(name);
    if (options.progress && !options.progress(name, static_cast<double>(stage_index) / kLoadStageCount))
      throw LoadFailure{LoadErrorKind::Cancelled, "load cancelled during stage " + std::string(name)};
    ++stage_index;
    return r;
  };
  auto fail = [&](LoadErrorKind k, const std::string& msg) { throw LoadFailure{k, msg}; };

  try {
    std::string err;
    ModelExecutionState exec;
    MachineInfo machine;

    // 1. Device policy: what this machine has, and the user's choices.
    {
      StageRecord& st = enter("device_policy");
      if (options.n_threads < 0 || options.n_ctx < 0) fail(LoadErrorKind::InvalidArgument, "negative thread count or context size");
      machine = detect_machine();
      prof.machine() = machine.to_json();
      st.detail.set("threads_requested", options.n_threads);
      st.detail.set("gpu", machine.gpus.empty() ? json::Value(machine.gpu_note) : json::Value(machine.gpus.front()));
      // The CPU kernel table is chosen in stage 2, among the enabled packages.
      // Worker CPUs: one per physical core first.
      const int n_threads = options.n_threads > 0 ? options.n_threads : std::max(1, machine.physical_usable);
      st.detail.set("threads", n_threads);
      exec.n_ctx = options.n_ctx;
      // Keep the CPU list for stage 6.
      json::Value cpus = json::Value::array();
      for (int i = 0; i < n_threads && i < static_cast<int>(machine.worker_cpus.size()); ++i) cpus.push_back(machine.worker_cpus[i]);
      st.detail.set("worker_cpus", std::move(cpus));
    }

    // 2. Enabled kernel packages.
    {
      StageRecord& st = enter("packages");
      // An explicit directory, else $GUILD_PACKAGES_DIR, else the user data dir.
      const std::string pkg_dir = packages::PackageStore::resolve_dir(options.packages_dir);
      packages::PackageLoadResult pr = packages::load_enabled_packages(pkg_dir, m->display_name_);
      st.detail.set("dir", pkg_dir);
      json::Value loaded = json::Value::array();
      for (const auto& p : pr.loaded) {
        json::Value v = json::Value::object();
        v.set("name", p->manifest.name);
        v.set("version", p->manifest.version);
        v.set("score", p->score);
        v.set("library", p->library_path);
        loaded.push_back(std::move(v));
      }
      st.detail.set("loaded", std::move(loaded));
      json::Value skipped = json::Value::array();
      for (const auto& sk : pr.skipped) {
        json::Value v = json::Value::object();
        v.set("name", sk.name);
        v.set("reason", sk.reason);
        skipped.push_back(std::move(v));
        if (sk.reason != "disabled") prof.add_fallback("packages", sk.name + " skipped: " + sk.reason);
      }
      st.detail.set("skipped", std::move(skipped));
      const char* forced = std::getenv("GUILD_FORCE_KERNELS");
      std::string note;
      m->kernel_provider_ = packages::pick_cpu_provider(pr, forced, &note);
      // A forced table that no loaded package provides but the built-in
      // tables do (e.g. its package is disabled) still wins.
      if (!note.empty() && std::string(cpu_kernels_best().name) == forced) {
        m->kernel_provider_.reset();
        note = std::string("GUILD_FORCE_KERNELS=") + forced + ": no loaded package provides it; the built-in table is used";
      }
      if (!note.empty()) prof.add_fallback("packages", note);
      if (m->kernel_provider_) {
        m->kernels_ = m->kernel_provider_->cpu;
        st.detail.set("cpu_source", "package");
        // Other processes (the CLI while the app runs) see this use too; this
        // process's own leases are taken in stage 7.
        packages::record_process_lease(*m->kernel_provider_, pr.dir, "model " + m->display_name_);
      } else {
        m->kernels_ = &cpu_kernels_best();
        const std::string why = !pr.dir_exists ? "no packages directory at " + pkg_dir
                                : !note.empty() ? note
                                                : "no enabled, compatible package with a CPU table in " + pkg_dir;
        st.detail.set("cpu_source", "built-in");
        st.detail.set("note", why + "; the built-in CPU kernel tables are used");
        if (note.empty()) prof.add_fallback("packages", why + "; built-in " + std::string(m->kernels_->name) + " used");
      }
      st.detail.set("cpu_kernels", m->kernels_->name);
      // device_policy.cpu_kernels (profile schema v1) reports the same choice,
      // made here now that it depends on the packages.
      if (StageRecord* policy = prof.find("device_policy")) policy->detail.set("cpu_kernels", m->kernels_->name);
      json::Value providers = json::Value::object();
      providers.set("cpu", m->kernels_->name);
      json::Value ops = json::Value::object();
      for (const char* op : {"dequant", "vec_dot", "gemm", "quantize_act", "float_ops", "attention"})
        ops.set(op, m->kernels_->name);
      providers.set("ops", std::move(ops));
      st.detail.set("providers", std::move(providers));
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
      st.detail.set("rope", exec.rope.style == RopeStyle::Neox ? "neox" : "norm");
      st.detail.set("rope_freq_base", exec.rope.freq_base);
      st.detail.set("shared_kv_layers", 0);
    }
    ScopedModelExecution scope(m->exec_.get());

    // 6. CPU expert pool: affinity installed before any expert page is touched.
    {
      StageRecord& st = enter("expert_pool");
      const int n_threads = options.n_threads > 0 ? options.n_threads : std::max(1, machine.physical_usable);
      std::vector<int> cpus;
      if (options.pin_threads)
        for (int i = 0; i < n_threads && !machine.worker_cpus.empty(); ++i)
          cpus.push_back(machine.worker_cpus[i % machine.worker_cpus.size()]);
      m->pool_ = std::make_unique<ThreadPool>(n_threads, cpus);
      if (!cpus.empty()) pin_current_thread(cpus[0]);  // the caller is worker 0 during the load
      st.detail.set("threads", n_threads);
      st.detail.set("pinned", !cpus.empty());
      st.detail.set("numa_nodes", static_cast<long long>(machine.numa_nodes.size()));
      st.detail.set("first_touch", machine.numa_nodes.size() > 1 ? "per node" : "single node: not needed");
    }

    // 7. Streams and the kernel lease.
    {
      StageRecord& st = enter("stream_and_lease");
      m->kernel_lease_ = Lease(m->kernels_->name, "model " + m->display_name_);
      st.detail.set("gpu_streams", 0);
      st.detail.set("reason", "no GPU in this build: no CUDA stream");
      st.detail.set("leased_providers", json::Value::array({json::Value(m->kernels_->name)}));
    }

    // 8. .gexec resolution: never fails the load.
    {
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
    TensorBinder binder(*m->files_, *m->kernels_);
    {
      StageRecord& st = enter("dense_weights");
      if (!m->runner_->bind_dense(binder, m->hp_, &m->weights_, &err)) {
        const bool unsupported = err.find("does not support") != std::string::npos;
        fail(unsupported ? LoadErrorKind::Unsupported : LoadErrorKind::Format, path + ": " + err);
      }
      st.bytes = binder.bound_bytes();
      st.detail.set("placement", "cpu (mapped)");
      st.detail.set("output_tied", m->weights_.output_tied);
    }

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
      st.detail.set("moe_layers", static_cast<long long>(std::count_if(
          m->weights_.layers.begin(), m->weights_.layers.end(), [](const LayerWeights& L) { return L.is_moe(); })));
      m->weight_bytes_ = binder.bound_bytes();
    }

    // 11. Calibration and the GPU expert cache.
    {
      StageRecord& st = enter("calibration");
      st.detail.set("plan", "all experts on the CPU");
      st.detail.set("reason", "no GPU: nothing to place");
      st.detail.set("gpu_cache_bytes", 0);
      json::Value layers = json::Value::array();
      for (const LayerWeights& L : m->weights_.layers) {
        json::Value v = json::Value::object();
        v.set("gpu_experts", 0);
        v.set("cpu_experts", L.is_moe() ? m->hp_.n_expert : 0);
        v.set("dense", !L.is_moe());
        layers.push_back(std::move(v));
      }
      prof.placement().set("layers", std::move(layers));
    }

    // 12. RAM-resident complement: experts read in place from the mapping.
    {
      StageRecord& st = enter("ram_complement");
      uint64_t expert_bytes = 0;
      for (const LayerWeights& L : m->weights_.layers)
        if (L.is_moe())
          expert_bytes += (L.gate_exps.expert_bytes + L.up_exps.expert_bytes + L.down_exps.expert_bytes) *
                          static_cast<uint64_t>(m->hp_.n_expert);
      st.bytes = expert_bytes;
      st.detail.set("mode", "zero-copy mmap");
      st.detail.set("pinned", false);
      st.detail.set("reason", "no GPU: experts are read by the CPU pool straight from the page cache");
    }

    // 13. Shared session state: what each session will allocate.
    {
      StageRecord& st = enter("session_state");
      const ModelHparams& hp = m->hp_;
      const uint64_t elem = exec.kv_type == KvType::F16 ? 2 : 4;
      const uint64_t kv_bytes = static_cast<uint64_t>(hp.n_layer) * exec.n_ctx *
                                (static_cast<uint64_t>(hp.n_head_kv) * (hp.head_dim_k + hp.head_dim_v)) * elem;
      st.detail.set("kv_bytes_per_session", static_cast<unsigned long long>(kv_bytes));
      st.detail.set("prefill", "batched (up to 512 tokens per pass)");
      st.detail.set("drafter", "none (speculative window T = 1)");
      st.detail.set("verifier", "greedy prefix acceptance with KV rollback");
    }

    // 14. Tokenizer.
    {
      StageRecord& st = enter("tokenizer");
      m->vocab_ = Vocab::from_gguf(*m->files_, &err);
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
    return m;
  } catch (const LoadFailure& f) {
    *kind = f.kind;
    *error = f.message;
  } catch (const std::bad_alloc&) {
    *kind = LoadErrorKind::OutOfMemory;
    *error = path + ": out of memory while loading";
  } catch (const std::exception& e) {
    *kind = LoadErrorKind::Format;
    *error = path + ": " + e.what();
  }
  return nullptr;
}

}  // namespace guild
