// What a package library says about itself through the provider ABI
// (provider_abi.h; for a GPU package also gpu/gpu_backend.h), and whether that
// fits its manifest and this runtime. Read in-process at model load
// (open_provider, after the user enabled the package) and in the
// guild-package-probe child process at install (docs/PACKAGES.md, "Install
// checks"), so both decide by the same rules.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/kernel_table.h"
#include "gpu/gpu_backend.h"
#include "packages/manifest.h"

namespace guild::packages {

struct ProviderFacts {
  uint32_t struct_size = 0;
  uint32_t abi_version = 0;
  std::string name;
  std::string version;
  std::string description;
  int32_t score = 0;
  uint32_t cpu_table_size = 0;
  uint32_t tensor_type_limit = 0;
  // cpu_table() returned a table (asked only when the layout fields match this runtime's).
  bool cpu_table = false;
  std::string cpu_table_name;
  bool cpu_table_has_float_helpers = false;
  // The library exports the GPU backend symbol; whether its table is one this runtime can use.
  bool gpu_backend = false;
  bool gpu_backend_matches = false;
  uint32_t gpu_backend_abi = 0;

  json::Value to_json() const;
  // Strict: every field present with its type, no other field.
  static std::optional<ProviderFacts> from_json(const json::Value& v, std::string* error);
};

// The tables behind the facts, for the process that opened the library.
struct ProviderTables {
  const CpuKernelTable* cpu = nullptr;
  const gpu::BackendV1* gpu = nullptr;
};

// Reads the facts from a dlopen'd library: resolves the provider symbols and
// calls query() (and cpu_table() / the GPU query). "" on success, else why it
// is not a provider at all ("not a Guild kernel provider (missing …)",
// "provider query returned no or a truncated info struct"). Strings longer
// than max_string bytes are cut (the probe reports through a bounded pipe).
std::string read_provider_facts(void* handle, ProviderFacts* facts, ProviderTables* tables, size_t max_string = SIZE_MAX);

// "" when the facts fit the manifest and this runtime (ABI, name and version,
// CPU table layout and contents, GPU backend table), else the problem.
std::string provider_facts_problem(const ProviderFacts& f, const Manifest& manifest);

}  // namespace guild::packages
