// The .gkmetadata manifest of a kernel package (docs/PACKAGES.md, "Manifest"):
// parsing, validation, and whether this machine meets its requirements.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace guild::packages {

inline constexpr const char* kManifestSuffix = ".gkmetadata";

struct ProvidedOp {
  std::string op;                  // "dequant", "vec_dot", "gemm", "quantize_act", "float_ops", "attention"
  std::vector<std::string> types;  // tensor type names ("Q8_0", ...) or ["*"]
  std::string device;              // "cpu" or "cuda"
};

struct Manifest {
  std::string name;         // [a-z0-9][a-z0-9._-]{0,63}
  std::string version;      // non-empty, [0-9A-Za-z.+-]
  int abi = 0;              // GUILD_KERNEL_PROVIDER_ABI_VERSION it was built for
  std::string description;
  std::vector<ProvidedOp> provides;
  std::vector<std::string> cpu_features;          // requires.cpu_features
  std::string cuda_compute_capability;            // requires.cuda_compute_capability ("" = none)
  std::string cuda_driver;                        // requires.cuda_driver ("" = none)
  std::string library;      // file name inside the package directory
  std::string sha256;       // lower-case hex of the library's bytes

  json::Value to_json() const;
};

bool valid_package_name(std::string_view name);
// Parses and validates; nullopt and *error ("field: problem") on failure.
std::optional<Manifest> parse_manifest(std::string_view text, std::string* error);
std::optional<Manifest> read_manifest_file(const std::string& path, std::string* error);

// "" when the running machine meets the manifest's requirements (and this
// build's ABI), else the reason it does not ("requires CPU feature avx512f,
// which this CPU lacks").
std::string requirement_problem(const Manifest& m);
// Whether the running CPU has a feature by manifest name ("avx2", "fma", ...);
// nullopt for a name this build does not know.
std::optional<bool> cpu_has_feature(std::string_view name);

}  // namespace guild::packages
