// Loading kernel package libraries (docs/PACKAGES.md, "Loading"): for each
// enabled, compatible package, the library's sha256 is checked against its
// manifest BEFORE dlopen (the bytes hashed are the bytes opened: the file is
// opened once and dlopen'd through /proc/self/fd), then
// dlopen(RTLD_NOW | RTLD_LOCAL), the ABI checked and the provider scored.
// A package that fails any step is skipped with a reason; loading never throws.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/kernel_table.h"
#include "gpu/gpu_backend.h"
#include "packages/manifest.h"
#include "packages/provider_abi.h"
#include "packages/store.h"
#include "runtime/leases.h"

namespace guild::packages {

// One opened package library; dlclose when the last reference goes.
struct LoadedProvider {
  Manifest manifest;
  std::string library_path;
  PackageSource source = PackageSource::User;
  void* handle = nullptr;
  int score = 0;
  const CpuKernelTable* cpu = nullptr;  // null: provides no CPU table
  const gpu::BackendV1* gpu = nullptr;  // a GPU package's backend (gpu/gpu_backend.h), else null
  std::string lease_file;               // cross-process lease record (see record_process_lease)
  // Set on the provider compose_cpu_kernels makes when other providers fill
  // in ops the chosen one lacks: `cpu` points at `composed`, and the
  // contributing providers stay open (and leased) as long as it lives.
  CpuKernelTable composed{};
  std::vector<std::shared_ptr<LoadedProvider>> contributors;
  std::vector<Lease> contributor_leases;
  LoadedProvider() = default;
  LoadedProvider(const LoadedProvider&) = delete;
  LoadedProvider& operator=(const LoadedProvider&) = delete;
  ~LoadedProvider();
};

struct SkippedPackage {
  std::string name;
  std::string reason;
};

struct PackageLoadResult {
  // Set when the packages cannot be decided at all (the state file or the
  // lease records cannot be read): nothing is loaded, and a model load must
  // fail with this line rather than guess.
  std::string error;
  PackageStatus error_status = PackageStatus::Ok;
  std::string dir;          // the user's packages directory ("" when none is configured)
  bool dir_exists = false;
  std::string bundled_dir;  // the bundled packages searched too ("" when none)
  std::vector<std::shared_ptr<LoadedProvider>> loaded;  // by priority, best first
  std::vector<SkippedPackage> skipped;
};

// Opens a library the way load_enabled_packages does (checksum first) and
// checks its provider ABI against the manifest. nullptr and *error on failure.
std::shared_ptr<LoadedProvider> open_provider(const std::string& library_path, const Manifest& manifest, std::string* error);

// Loads every enabled, compatible package of the store's two layers (the
// user's directory and the bundled packages; a user package hides a bundled
// one of the same name). model_name: the model file name whose version pins
// (state.json) apply; "" for none.
PackageLoadResult load_enabled_packages(const PackageStore& store, const std::string& model_name);
// The same over PackageStore(dir): dir and the discovered bundled packages.
PackageLoadResult load_enabled_packages(const std::string& dir, const std::string& model_name);

// Records, for other processes, that this process uses the provider:
// <dir>/.leases/<pid>-<n>.json = {pid, package, holder}, removed when the
// provider is released (or found stale: its process is gone). LeaseRegistry
// covers this process; these files let the CLI see the app's models. False
// and *error when the record cannot be written (.leases is not a directory
// of ours, not writable, ...): a use other processes cannot see must not
// begin, or they could uninstall the package under it.
[[nodiscard]] bool record_process_lease(LoadedProvider& p, const std::string& dir, const std::string& holder, std::string* error);

// The priority rule: the CPU table comes from the loaded provider with the
// highest score (ties: the lower name). `forced` (GUILD_FORCE_KERNELS) names a
// provider to use instead when it is loaded; *note says why it was not used.
// nullptr when no loaded package has a CPU table.
std::shared_ptr<LoadedProvider> pick_cpu_provider(const PackageLoadResult& r, const char* forced, std::string* note);

// The GPU backend: the loaded provider with a backend table and the highest
// score (a score of 0 means no usable device: such packages are skipped at
// load). nullptr when none is loaded.
std::shared_ptr<LoadedProvider> pick_gpu_provider(const PackageLoadResult& r);

// The op classes of a CPU table (docs/PACKAGES.md, "Priority"), as the
// profile names them.
inline constexpr const char* kCpuOpClasses[] = {"dequant", "vec_dot", "gemm", "quantize_act", "float_ops", "attention"};

// Which provider serves each op: op class -> provider name for the ops that
// come from one provider for every type, plus the per-type exceptions.
struct CpuOpProviders {
  std::string primary;                           // serves float_ops and attention, and every row it has
  std::vector<std::pair<std::string, std::string>> type_rows;     // tensor type -> provider, rows not from primary
  std::vector<std::pair<std::string, std::string>> act_quantizers;  // activation type -> provider, not from primary
};

// Per-op priority: the chosen provider (`primary`, from pick_cpu_provider)
// serves every op it has; a tensor type whose row (dequant + vec_dot + gemm,
// one unit: gemm must give vec_dot's bits) it lacks, or an activation
// quantizer it lacks, comes from the next loaded provider in priority order
// that has it. Returns `primary` itself when it lacks nothing another
// provider has; otherwise a provider whose `cpu` is the composed table, that
// keeps the contributors open and leases them for `holder` (in this process
// and, through `dir`'s .leases, for others). nullptr and *error when such a
// lease cannot be recorded (record_process_lease). An empty holder (a
// pre-flight check, GuildModel::check) composes the same table and leases
// nothing.
std::shared_ptr<LoadedProvider> compose_cpu_kernels(const std::shared_ptr<LoadedProvider>& primary, const PackageLoadResult& r,
                                                    const std::string& holder, CpuOpProviders* ops, std::string* error);

}  // namespace guild::packages
