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
#include "packages/manifest.h"
#include "packages/provider_abi.h"

namespace guild::packages {

// One opened package library; dlclose when the last reference goes.
struct LoadedProvider {
  Manifest manifest;
  std::string library_path;
  void* handle = nullptr;
  int score = 0;
  const CpuKernelTable* cpu = nullptr;  // null: provides no CPU table
  std::string lease_file;               // cross-process lease record (see record_process_lease)
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
  std::string dir;          // "" when no packages directory is configured
  bool dir_exists = false;
  std::vector<std::shared_ptr<LoadedProvider>> loaded;  // by priority, best first
  std::vector<SkippedPackage> skipped;
};

// Opens a library the way load_enabled_packages does (checksum first) and
// checks its provider ABI against the manifest. nullptr and *error on failure.
std::shared_ptr<LoadedProvider> open_provider(const std::string& library_path, const Manifest& manifest, std::string* error);

// Loads every enabled, compatible package of dir. model_name: the model file
// name whose version pins (state.json) apply; "" for none.
PackageLoadResult load_enabled_packages(const std::string& dir, const std::string& model_name);

// Records, for other processes, that this process uses the provider:
// <dir>/.leases/<pid>-<n>.json = {pid, package, holder}, removed when the
// provider is released (or found stale: its process is gone). LeaseRegistry
// covers this process; these files let the CLI see the app's models.
void record_process_lease(LoadedProvider& p, const std::string& dir, const std::string& holder);

// The priority rule: the CPU table comes from the loaded provider with the
// highest score (ties: the lower name). `forced` (GUILD_FORCE_KERNELS) names a
// provider to use instead when it is loaded; *note says why it was not used.
std::shared_ptr<LoadedProvider> pick_cpu_provider(const PackageLoadResult& r, const char* forced, std::string* note);

}  // namespace guild::packages
