#include "packages/provider_check.h"

#include <dlfcn.h>

#include <cstring>
#include <string_view>

#include "packages/provider_abi.h"

namespace guild::packages {
namespace {

std::string bounded(const char* s, size_t max) { return s ? std::string(s, ::strnlen(s, max)) : std::string(); }

constexpr std::string_view kFactFields[] = {
    "struct_size", "abi_version",   "name",        "version",     "description",           "score",
    "cpu_table_size", "tensor_type_limit", "cpu_table", "cpu_table_name", "cpu_table_has_float_helpers",
    "gpu_backend", "gpu_backend_matches", "gpu_backend_abi"};

}  // namespace

json::Value ProviderFacts::to_json() const {
  json::Value v = json::Value::object();
  v.set("struct_size", struct_size);
  v.set("abi_version", abi_version);
  v.set("name", name);
  v.set("version", version);
  v.set("description", description);
  v.set("score", score);
  v.set("cpu_table_size", cpu_table_size);
  v.set("tensor_type_limit", tensor_type_limit);
  v.set("cpu_table", cpu_table);
  v.set("cpu_table_name", cpu_table_name);
  v.set("cpu_table_has_float_helpers", cpu_table_has_float_helpers);
  v.set("gpu_backend", gpu_backend);
  v.set("gpu_backend_matches", gpu_backend_matches);
  v.set("gpu_backend_abi", gpu_backend_abi);
  return v;
}

std::optional<ProviderFacts> ProviderFacts::from_json(const json::Value& v, std::string* error) {
  auto bad = [&](const std::string& msg) -> std::optional<ProviderFacts> {
    *error = msg;
    return std::nullopt;
  };
  if (!v.is_object()) return bad("the facts are not an object");
  for (const auto& [key, value] : v.as_object()) {
    bool known = false;
    for (std::string_view k : kFactFields) known = known || key == k;
    if (!known) return bad("unknown field '" + key.substr(0, 64) + "'");
  }
  ProviderFacts f;
  auto u32 = [&](const char* key, uint32_t* out) {
    const json::Value& x = v[key];
    if (!x.is_int() || x.as_int() < 0 || x.as_int() > UINT32_MAX) return false;
    *out = static_cast<uint32_t>(x.as_int());
    return true;
  };
  auto str = [&](const char* key, std::string* out) {
    if (!v[key].is_string()) return false;
    *out = v[key].as_string();
    return true;
  };
  auto flag = [&](const char* key, bool* out) {
    if (!v[key].is_bool()) return false;
    *out = v[key].as_bool();
    return true;
  };
  const json::Value& score = v["score"];
  if (!u32("struct_size", &f.struct_size) || !u32("abi_version", &f.abi_version) || !str("name", &f.name) ||
      !str("version", &f.version) || !str("description", &f.description) || !score.is_int() || score.as_int() < INT32_MIN ||
      score.as_int() > INT32_MAX || !u32("cpu_table_size", &f.cpu_table_size) ||
      !u32("tensor_type_limit", &f.tensor_type_limit) || !flag("cpu_table", &f.cpu_table) ||
      !str("cpu_table_name", &f.cpu_table_name) || !flag("cpu_table_has_float_helpers", &f.cpu_table_has_float_helpers) ||
      !flag("gpu_backend", &f.gpu_backend) || !flag("gpu_backend_matches", &f.gpu_backend_matches) ||
      !u32("gpu_backend_abi", &f.gpu_backend_abi))
    return bad("a field is missing or has the wrong type");
  f.score = static_cast<int32_t>(score.as_int());
  return f;
}

std::string read_provider_facts(void* handle, ProviderFacts* f, ProviderTables* tables, size_t max_string) {
  *f = ProviderFacts{};
  ProviderTables local;
  if (!tables) tables = &local;
  *tables = {};
  auto query = reinterpret_cast<guild_kernel_provider_query_fn>(::dlsym(handle, GUILD_KERNEL_PROVIDER_QUERY_SYMBOL));
  auto cpu_table = reinterpret_cast<guild_kernel_provider_cpu_table_fn>(::dlsym(handle, GUILD_KERNEL_PROVIDER_CPU_TABLE_SYMBOL));
  if (!query || !cpu_table)
    return std::string("not a Guild kernel provider (missing ") +
           (!query ? GUILD_KERNEL_PROVIDER_QUERY_SYMBOL : GUILD_KERNEL_PROVIDER_CPU_TABLE_SYMBOL) + ")";
  const guild_kernel_provider_info* info = query();
  // The struct's size is read first: the fields after it exist only when it is big enough.
  if (!info || info->struct_size < sizeof(guild_kernel_provider_info)) return "provider query returned no or a truncated info struct";
  f->struct_size = info->struct_size;
  f->abi_version = info->abi_version;
  f->name = bounded(info->name, max_string);
  f->version = bounded(info->version, max_string);
  f->description = bounded(info->description, max_string);
  f->score = info->score;
  f->cpu_table_size = info->cpu_table_size;
  f->tensor_type_limit = info->tensor_type_limit;
  // The table is read only with this runtime's layout (otherwise its bytes mean something else).
  if (info->cpu_table_size == sizeof(CpuKernelTable) && info->tensor_type_limit == kTensorTypeIdLimit) {
    if (const auto* table = reinterpret_cast<const CpuKernelTable*>(cpu_table())) {
      f->cpu_table = true;
      f->cpu_table_name = bounded(table->name, max_string);
      f->cpu_table_has_float_helpers = table->dot_f32 && table->axpy_f32 && table->fp16_to_f32_row && table->f32_to_fp16_row;
      tables->cpu = table;
    }
  }
  if (auto query_gpu = reinterpret_cast<gpu::BackendQueryFn>(::dlsym(handle, gpu::kBackendSymbol))) {
    const gpu::BackendV1* b = query_gpu();
    f->gpu_backend = true;
    f->gpu_backend_abi = b ? b->abi : 0;
    f->gpu_backend_matches = b && b->struct_size == sizeof(gpu::BackendV1) && b->abi == gpu::kBackendAbi && b->available &&
                             b->create && b->estimate && b->device_memory && b->device_info && b->topology &&
                             b->expert_cache_bytes;
    if (f->gpu_backend_matches) tables->gpu = b;
  }
  return "";
}

std::string provider_facts_problem(const ProviderFacts& f, const Manifest& manifest) {
  if (f.struct_size < sizeof(guild_kernel_provider_info)) return "provider query returned no or a truncated info struct";
  if (f.abi_version != GUILD_KERNEL_PROVIDER_ABI_VERSION)
    return "provider ABI " + std::to_string(f.abi_version) + ", this runtime speaks ABI " +
           std::to_string(GUILD_KERNEL_PROVIDER_ABI_VERSION);
  if (f.abi_version != static_cast<uint32_t>(manifest.abi))
    return "the library reports ABI " + std::to_string(f.abi_version) + " but the manifest says " + std::to_string(manifest.abi);
  if (f.name != manifest.name || f.version != manifest.version)
    return "the library is " + f.name + " " + f.version + " but the manifest says " + manifest.name + " " + manifest.version;
  if (f.cpu_table_size != 0) {
    if (f.cpu_table_size != sizeof(CpuKernelTable) || f.tensor_type_limit != kTensorTypeIdLimit)
      return "CPU table layout mismatch (table " + std::to_string(f.cpu_table_size) + " bytes, " +
             std::to_string(f.tensor_type_limit) + " types; this runtime: " + std::to_string(sizeof(CpuKernelTable)) +
             " bytes, " + std::to_string(kTensorTypeIdLimit) + " types): rebuild the package";
    if (f.cpu_table) {
      if (f.cpu_table_name != manifest.name) return "its CPU table is named '" + f.cpu_table_name + "', not '" + manifest.name + "'";
      if (!f.cpu_table_has_float_helpers) return "its CPU table lacks the float helpers every table must have";
    }
  }
  if (f.gpu_backend && !f.gpu_backend_matches)
    return "GPU backend table mismatch (GPU ABI " + std::to_string(f.gpu_backend_abi) + ", this runtime: " +
           std::to_string(gpu::kBackendAbi) + "): rebuild the package";
  if (!f.cpu_table && !f.gpu_backend) return "provides neither a CPU table nor a GPU backend";
  return "";
}

}  // namespace guild::packages
