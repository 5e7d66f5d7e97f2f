#include "packages/manifest.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>

#include <dlfcn.h>

#include "core/cpu_features.h"
#include "core/tensor_type.h"
#include "packages/provider_abi.h"

namespace guild::packages {
namespace {

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool valid_version(const std::string& v) {
  if (v.empty() || v.size() > 64) return false;
  for (char c : v)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+')) return false;
  return true;
}

bool valid_library_name(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return s[0] != '.';
}

// The fields of each object of the format (docs/PACKAGES.md, "Manifest").
constexpr std::string_view kManifestFields[] = {"name", "version", "abi", "description", "provides", "requires", "library", "sha256"};
constexpr std::string_view kProvidesFields[] = {"op", "types", "device"};
constexpr std::string_view kRequiresFields[] = {"cpu_features", "cuda_compute_capability", "cuda_driver"};
// The CPU table's op classes (loader.h kCpuOpClasses) and a GPU package's decoder.
constexpr std::string_view kOpClasses[] = {"dequant", "vec_dot", "gemm", "quantize_act", "float_ops", "attention", "decoder"};

template <size_t N>
bool known(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

template <size_t N>
std::string joined(const std::string_view (&names)[N]) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// The first member of `object` that is not in `names` ("" when none).
template <size_t N>
std::string unknown_field(const json::Value& object, const std::string_view (&names)[N]) {
  for (const auto& [key, value] : object.as_object())
    if (!known(names, key)) return key.size() > 64 ? key.substr(0, 64) + "..." : key;
  return "";
}

// A tensor type this runtime knows, by its ggml name in any case ("Q8_0", "q4_K", "F16").
bool known_tensor_type(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string want = lower(name);
  for (uint32_t t = 0; t < kTensorTypeIdLimit; ++t) {
    const TensorTypeInfo& info = tensor_type_info(t);
    if (info.block_bytes != 0 && lower(info.name) == want) return true;
  }
  return false;
}

}  // namespace

bool valid_package_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto lower_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_digit(name[0])) return false;
  for (char c : name)
    if (!(lower_digit(c) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

std::optional<bool> cpu_has_feature(std::string_view n) {
  const CpuFeatures& f = cpu_features();
  struct Row { const char* name; bool value; };
  const Row rows[] = {
      {"sse3", f.sse3},         {"ssse3", f.ssse3},         {"sse4.1", f.sse41},        {"sse41", f.sse41},
      {"sse4.2", f.sse42},      {"sse42", f.sse42},         {"avx", f.avx},             {"avx2", f.avx2},
      {"fma", f.fma},           {"f16c", f.f16c},           {"bmi2", f.bmi2},           {"avx512f", f.avx512f},
      {"avx512bw", f.avx512bw}, {"avx512dq", f.avx512dq},   {"avx512vl", f.avx512vl},   {"avx512vnni", f.avx512vnni},
      {"avx512bf16", f.avx512bf16}, {"avx_vnni", f.avx_vnni}, {"avxvnni", f.avx_vnni}, {"amx_tile", f.amx_tile},
      {"amx_int8", f.amx_int8}, {"amx_bf16", f.amx_bf16},
  };
  for (const Row& r : rows)
    if (n == r.name) return r.value;
  return std::nullopt;
}

json::Value Manifest::to_json() const {
  json::Value v = json::Value::object();
  v.set("name", name);
  v.set("version", version);
  v.set("abi", abi);
  v.set("description", description);
  json::Value ops = json::Value::array();
  for (const ProvidedOp& p : provides) {
    json::Value o = json::Value::object();
    o.set("op", p.op);
    json::Value types = json::Value::array();
    for (const auto& t : p.types) types.push_back(t);
    o.set("types", std::move(types));
    o.set("device", p.device);
    ops.push_back(std::move(o));
  }
  v.set("provides", std::move(ops));
  json::Value req = json::Value::object();
  json::Value feats = json::Value::array();
  for (const auto& f : cpu_features) feats.push_back(f);
  req.set("cpu_features", std::move(feats));
  if (!cuda_compute_capability.empty()) req.set("cuda_compute_capability", cuda_compute_capability);
  if (!cuda_driver.empty()) req.set("cuda_driver", cuda_driver);
  v.set("requires", std::move(req));
  v.set("library", library);
  v.set("sha256", sha256);
  return v;
}

std::optional<Manifest> parse_manifest(std::string_view text, std::string* error) {
  std::string perr;
  json::ParseOptions strict;
  strict.reject_duplicate_keys = true;  // a second "sha256" must not quietly win
  strict.max_depth = 16;                // the format nests four levels
  auto doc = json::parse(text, &perr, strict);
  auto bad = [&](const std::string& msg) -> std::optional<Manifest> {
    if (error) *error = msg;
    return std::nullopt;
  };
  if (!doc) return bad("not valid JSON: " + perr);
  if (!doc->is_object()) return bad("the manifest is not a JSON object");
  const json::Value& d = *doc;
  // Unknown fields are refused, not ignored: a field this runtime does not
  // know could be a requirement it would silently not enforce.
  if (std::string unknown = unknown_field(d, kManifestFields); !unknown.empty())
    return bad("unknown field '" + unknown + "' (known: " + joined(kManifestFields) + ")");
  Manifest m;
  auto req_string = [&](const char* key, std::string* out) -> bool {
    const json::Value* v = d.find(key);
    if (!v || !v->is_string()) return false;
    *out = v->as_string();
    return true;
  };
  if (!req_string("name", &m.name)) return bad("name: missing or not a string");
  if (!valid_package_name(m.name)) return bad("name: '" + m.name + "' is not a valid package name ([a-z0-9][a-z0-9._-]*, at most 64)");
  if (!req_string("version", &m.version)) return bad("version: missing or not a string");
  if (!valid_version(m.version)) return bad("version: '" + m.version + "' is not a valid version");
  const json::Value* abi = d.find("abi");
  if (!abi || !abi->is_int() || abi->as_int() <= 0 || abi->as_int() > 1000000) return bad("abi: missing or not a positive integer");
  m.abi = static_cast<int>(abi->as_int());
  if (const json::Value* desc = d.find("description")) {
    if (!desc->is_string()) return bad("description: not a string");
    m.description = desc->as_string();
  }
  const json::Value* provides = d.find("provides");
  if (!provides || !provides->is_array() || provides->empty()) return bad("provides: missing or not a non-empty array");
  size_t index = 0;
  for (const json::Value& p : provides->as_array()) {
    const std::string at = "provides[" + std::to_string(index++) + "]";
    if (!p.is_object()) return bad(at + ": not an object");
    if (std::string unknown = unknown_field(p, kProvidesFields); !unknown.empty())
      return bad(at + ": unknown field '" + unknown + "' (known: " + joined(kProvidesFields) + ")");
    ProvidedOp op;
    if (!p["op"].is_string() || p["op"].as_string().empty()) return bad(at + ".op: missing or not a string");
    op.op = p["op"].as_string();
    if (!known(kOpClasses, op.op)) return bad(at + ".op: unknown op '" + op.op + "' (known: " + joined(kOpClasses) + ")");
    if (!p["types"].is_array() || p["types"].empty()) return bad(at + ".types: missing or not a non-empty array");
    for (const json::Value& t : p["types"].as_array()) {
      if (!t.is_string()) return bad(at + ".types: not all strings");
      const std::string& type = t.as_string();
      if (type == "*") {
        if (p["types"].size() != 1) return bad(at + ".types: \"*\" (every type) must be the only entry");
      } else if (!known_tensor_type(type)) {
        return bad(at + ".types: unknown tensor type '" + type + "' (tensor type names such as Q8_0, Q4_K, F16, or \"*\")");
      }
      if (std::find(op.types.begin(), op.types.end(), type) != op.types.end())
        return bad(at + ".types: '" + type + "' is listed twice");
      op.types.push_back(type);
    }
    if (const json::Value* device = p.find("device")) {
      if (!device->is_string()) return bad(at + ".device: not a string");
      op.device = device->as_string();
    } else {
      op.device = "cpu";
    }
    if (op.device != "cpu" && op.device != "cuda") return bad(at + ".device: '" + op.device + "' (expected cpu or cuda)");
    m.provides.push_back(std::move(op));
  }
  if (const json::Value* req = d.find("requires")) {
    if (!req->is_object()) return bad("requires: not an object");
    if (std::string unknown = unknown_field(*req, kRequiresFields); !unknown.empty())
      return bad("requires: unknown field '" + unknown + "' (known: " + joined(kRequiresFields) + ")");
    if (const json::Value* cf = req->find("cpu_features")) {
      if (!cf->is_array()) return bad("requires.cpu_features: not an array");
      for (const json::Value& f : cf->as_array()) {
        if (!f.is_string()) return bad("requires.cpu_features: not all strings");
        m.cpu_features.push_back(f.as_string());
      }
    }
    if (const json::Value* cc = req->find("cuda_compute_capability")) {
      if (!cc->is_string()) return bad("requires.cuda_compute_capability: not a string");
      m.cuda_compute_capability = cc->as_string();
    }
    if (const json::Value* cd = req->find("cuda_driver")) {
      if (!cd->is_string()) return bad("requires.cuda_driver: not a string");
      m.cuda_driver = cd->as_string();
    }
  }
  if (!req_string("library", &m.library)) return bad("library: missing or not a string");
  if (!valid_library_name(m.library)) return bad("library: '" + m.library + "' must be a plain file name inside the package directory");
  if (!req_string("sha256", &m.sha256)) return bad("sha256: missing or not a string");
  if (!is_hex64(m.sha256)) return bad("sha256: expected 64 lower-case hex digits");
  return m;
}

std::optional<Manifest> read_manifest_file(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": cannot open";
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string err;
  auto m = parse_manifest(ss.str(), &err);
  if (!m && error) *error = path + ": " + err;
  return m;
}

std::string requirement_problem(const Manifest& m) {
  if (m.abi != GUILD_KERNEL_PROVIDER_ABI_VERSION)
    return "built for provider ABI " + std::to_string(m.abi) + ", this runtime speaks ABI " +
           std::to_string(GUILD_KERNEL_PROVIDER_ABI_VERSION);
  for (const std::string& f : m.cpu_features) {
    auto has = cpu_has_feature(f);
    if (!has) return "requires CPU feature '" + f + "', which this runtime does not know";
    if (!*has) return "requires CPU feature " + f + ", which this CPU lacks";
  }
  bool wants_cuda = !m.cuda_compute_capability.empty() || !m.cuda_driver.empty();
  for (const ProvidedOp& p : m.provides) wants_cuda = wants_cuda || p.device == "cuda";
  if (wants_cuda) {
    // The driver library, without loading the package (the device itself is
    // checked by the package's query: score 0 without a usable device).
    void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) return "requires a CUDA driver (libcuda.so.1 not found)";
    ::dlclose(driver);
  }
  return "";
}

}  // namespace guild::packages
