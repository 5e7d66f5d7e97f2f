// GuildModel: a loaded model — its files (mapped), runner, hyper-parameters,
// bound weights, kernel table, execution state, CPU expert pool and
// tokenizer. GuildModel::load runs the 14 load stages in the seed's order and
// records each in the StartupProfile. Loading never throws: it returns null
// and a one-line message. GuildModel::check runs the same stage code as a
// pre-flight check: what decides whether the load would succeed, and nothing
// that starts, leases, copies or uploads anything.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/window_costs.h"
#include "artifact/gguf.h"
#include "core/json.h"
#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "models/hparams.h"
#include "models/recipe.h"
#include "models/runner.h"
#include "models/weights.h"
#include "runtime/execution_state.h"
#include "runtime/generation_queue.h"
#include "runtime/kv_cache.h"
#include "runtime/leases.h"
#include "runtime/machine.h"
#include "runtime/startup_profile.h"
#include "tokenizer/vocab.h"

namespace guild {
namespace packages { struct LoadedProvider; }
class GpuExecution;
// Destroys a GpuExecution (defined where the type is complete; a CPU-only
// build never creates one).
struct GpuExecutionDeleter { void operator()(GpuExecution* g) const; };

enum class LoadErrorKind { None, Io, Format, Unsupported, OutOfMemory, Cancelled, InvalidArgument };

// The answer of GuildModel::check: "ok" with what the load would take, or the
// error the load would fail with and the stage that gives it.
struct LoadCheck {
  bool ok = false;
  LoadErrorKind kind = LoadErrorKind::None;
  std::string stage;    // the stage that failed ("" when ok)
  std::string error;    // the load's one-line message, word for word ("" when ok)
  // What the load would take, from the stages that ran (docs/C_ABI.md,
  // "Pre-flight check"): context, threads, weight bytes (dense, experts,
  // aligned copies), one session's memory and the limit it was held to, and
  // where the weights go (cpu, or the GPU budget arithmetic).
  json::Value estimate = json::Value::object();
  json::Value profile;  // the StartupProfile of the stages that ran (null: none did)
  json::Value to_json() const;  // schema "guild.load-check/1"
};
const char* load_error_kind_name(LoadErrorKind kind);  // the C ABI's status names ("ok", "unsupported", ...)

struct LoadOptions {
  int n_threads = 0;        // CPU expert pool threads; 0 = physical cores
  int n_ctx = 0;            // default session context; 0 = min(train ctx, 4096)
  KvType kv_type = KvType::F16;
  bool pin_threads = true;  // install worker affinity in stage 6
  // Kernel packages directory (docs/PACKAGES.md); "" = $GUILD_PACKAGES_DIR,
  // else the user data dir. The bundled packages are searched too; a load
  // with no usable CPU package fails (the runtime has no kernels of its own).
  std::string packages_dir;
  size_t max_queued = 64;   // generation requests that may wait behind the running one
  // GPU (builds with CUDA; docs/CUDA.md): "" = $GUILD_GPU, else "auto" (device 0
  // when usable, else the CPU); "cpu"; "cuda:N" (fails when unusable).
  std::string gpu;
  int64_t gpu_budget_bytes = -1;  // device bytes for this model; < 0: free memory less 1 GiB
  bool experts_on_cpu = false;    // every routed expert on the CPU, dense weights and KV on the GPU
  // Peer GPUs for a hybrid model (docs/CUDA.md, "Several GPUs"): "" none, or
  // "cuda:1,cuda:2": each holds an expert cache of its own (its budget:
  // gpu_peer_budget_bytes, < 0 its free memory less 1 GiB) and computes the
  // choices routed to it beside the primary and the CPU.
  std::string gpu_peers;
  int64_t gpu_peer_budget_bytes = -1;
  // Tests only: lets the primary device be named as its own peer (a second
  // stream and memory on one GPU stand in for a second GPU).
  bool gpu_peer_stand_in = false;
  // Open the file for its tokenizer only: stages 1, 3 and 14 run, the others
  // are recorded as skipped (no kernel packages, no weights). The model
  // tokenizes and detokenizes; sessions are refused and ready() is false.
  bool vocab_only = false;
  // Most bytes one session may allocate (and the aligned weight copies a
  // file with a small general.alignment needs); 0 = what the machine can
  // give now (runtime/machine.h memory_for_allocations()). Hosts that share
  // the machine, and tests, set it.
  uint64_t memory_limit_bytes = 0;
  // Called when a stage starts (fraction = stages done / 14) and as bytes
  // are processed; return false to cancel the load.
  std::function<bool(const char* stage, double fraction)> progress;
};

class GuildModel {
 public:
  static std::unique_ptr<GuildModel> load(const std::string& path, const LoadOptions& options,
                                          std::string* error, LoadErrorKind* kind = nullptr);
  // Pre-flight check: would load(path, options) succeed? Runs the stages that
  // decide it with load's own code — device policy, packages (picked as a load
  // picks them, the GPU package included; no lease), container, runner
  // (architecture, hyper-parameter bounds and shape checks, a kernel for every
  // tensor type), execution state, the dense and expert tensors checked as
  // stages 9-10 bind them (nothing copied or read; on a GPU the budget plan,
  // nothing uploaded), session memory and the tokenizer — and records the
  // others as skipped. Starts no worker pool, takes no lease, touches no
  // weight page. vocab_only is ignored (a check is of a full load).
  static LoadCheck check(const std::string& path, const LoadOptions& options);
  ~GuildModel();

  const std::string& path() const { return path_; }
  const gguf::ModelFiles& files() const { return *files_; }
  const ModelHparams& hparams() const { return hp_; }
  const ModelWeights& weights() const { return weights_; }
  // The speculative window's measured costs in this placement (set by the
  // first drafting request; read and written only inside a queue turn).
  const WindowCosts& window_costs() const { return window_costs_; }
  void set_window_costs(const WindowCosts& c) { window_costs_ = c; }
  // The layers as executor steps (models/recipe.h), built at load stage 10.
  const ModelRecipe& recipe() const { return recipe_; }
  const CpuKernelTable& kernels() const { return *kernels_; }
  const Vocab& vocab() const { return *vocab_; }
  ThreadPool& pool() const { return *pool_; }
  const LoadOptions& options() const { return options_; }
  const std::shared_ptr<const ModelExecutionState>& execution_state() const { return exec_; }
  int default_n_ctx() const { return exec_ ? exec_->n_ctx : 0; }  // 0 for a vocab-only model
  uint64_t weight_bytes() const { return weight_bytes_; }
  const StartupProfile& profile() const { return profile_; }
  // The GPU side, or null when the model runs on the CPU.
  GpuExecution* gpu() const { return gpu_.get(); }
  const std::string& display_name() const { return display_name_; }

  // Opened with LoadOptions::vocab_only: tokenizer and metadata only.
  bool vocab_only() const { return vocab_only_; }
  // What a new session may allocate (LoadOptions::memory_limit_bytes, else
  // what the machine can give now).
  uint64_t session_memory_limit() const;
  // False once a shard of the model file changed on disk since the load
  // (gguf::ModelFiles::unchanged_on_disk; a read of a shard that was cut
  // short is survived and counts too): *error says which, and the model is
  // marked failed (fail-closed). A few fstat calls: cheap enough per step.
  bool files_unchanged(std::string* error);

  // One generation at a time per model, FIFO (seed §2).
  GenerationQueue& queue() const { return queue_; }

  // Fail-closed readiness (seed §2): cleared when a generation starts and set
  // again only when it ends cleanly; once false, requests are refused.
  bool ready() const { return ready_.load(); }
  const std::string& not_ready_reason() const { return not_ready_reason_; }
  void begin_device_work() { ready_.store(false); }
  void end_device_work_ok() { ready_.store(true); }
  void mark_failed(const std::string& reason) { not_ready_reason_ = reason; ready_.store(false); }

  // Test-only fault hook: makes the next generation fail after its first
  // device work, as a device error would. Never set in normal runs.
  void inject_fault_for_testing() { inject_fault_.store(true); }
  bool take_injected_fault() { return inject_fault_.exchange(false); }

 private:
  GuildModel() = default;
  struct StageRun;
  // The stages of load() (check_only = false) and check() (true): one body,
  // so that the check cannot drift from the load.
  static StageRun run_stages(const std::string& path, const LoadOptions& options, bool check_only);
  // The kernel package whose table kernels_ points into (null: built-in
  // tables). Declared first so its library is closed last.
  std::shared_ptr<packages::LoadedProvider> kernel_provider_;
  // The GPU package whose backend gpu_ uses (null: no GPU). Declared before
  // gpu_ so the library stays open until the decoder is gone.
  std::shared_ptr<packages::LoadedProvider> gpu_provider_;
  Lease gpu_lease_;
  std::string path_;
  std::string display_name_;
  LoadOptions options_;
  std::unique_ptr<gguf::ModelFiles> files_;
  const RunnerDescriptor* runner_ = nullptr;
  ModelRecipe recipe_;
  ModelHparams hp_;
  ModelWeights weights_;
  WindowCosts window_costs_;
  const CpuKernelTable* kernels_ = nullptr;
  std::shared_ptr<const ModelExecutionState> exec_;
  std::unique_ptr<Vocab> vocab_;
  std::unique_ptr<ThreadPool> pool_;
  // Declared after pool_ and weights: destroyed first (its CPU expert runner
  // uses the pool; its caches were filled from the mapping).
  std::unique_ptr<GpuExecution, GpuExecutionDeleter> gpu_;
  Lease kernel_lease_;
  uint64_t weight_bytes_ = 0;
  StartupProfile profile_;
  json::Value estimate_ = json::Value::object();  // what the load takes: check()'s answer (docs/C_ABI.md)
  mutable GenerationQueue queue_;
  bool vocab_only_ = false;
  std::atomic<bool> ready_{true};
  std::atomic<bool> inject_fault_{false};
  std::string not_ready_reason_;
};

}  // namespace guild
