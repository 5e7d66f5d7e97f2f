#include "models/runner.h"

#include "artifact/gguf.h"

namespace guild {

// Each architecture file defines its descriptor.
extern const RunnerDescriptor kQwen3MoeRunner;
extern const RunnerDescriptor kQwen3Runner;
extern const RunnerDescriptor kLlamaRunner;

namespace {
const RunnerDescriptor* const kRunners[] = {&kQwen3MoeRunner, &kQwen3Runner, &kLlamaRunner};
}

const RunnerDescriptor* find_runner(std::string_view arch) {
  for (const RunnerDescriptor* r : kRunners)
    if (r->arch == arch) return r;
  return nullptr;
}

std::vector<std::string_view> supported_architectures() {
  std::vector<std::string_view> names;
  for (const RunnerDescriptor* r : kRunners) names.push_back(r->arch);
  return names;
}

bool HparamReader::required_int(std::string_view key, int* out) {
  if (!optional_int(key, out)) return false;
  if (!files_.find(full(key))) {
    error_ = "missing metadata key '" + full(key) + "'";
    return false;
  }
  return true;
}

bool HparamReader::optional_int(std::string_view key, int* out) {
  const std::string k = full(key);
  const gguf::MetaValue* v = files_.find(k);
  if (!v) return true;
  if (v->type == gguf::ValueType::ARRAY) {
    // Per-layer arrays (e.g. head_count_kv): accept when all entries agree.
    const gguf::MetaArray& a = *v->array;
    int64_t first = 0;
    if (a.count == 0 || !a.get_i64(0, &first)) { error_ = "metadata key '" + k + "' is an empty or non-integer array"; return false; }
    for (uint64_t i = 1; i < a.count; ++i) {
      int64_t x = 0;
      if (!a.get_i64(i, &x) || x != first) { error_ = "metadata key '" + k + "' varies per layer, which this runner does not support"; return false; }
    }
    *out = static_cast<int>(first);
    return true;
  }
  if (!v->is_integer()) { error_ = "metadata key '" + k + "' is not an integer"; return false; }
  if (v->i < 0 || v->i > (1LL << 31) - 1) { error_ = "metadata key '" + k + "' is out of range"; return false; }
  *out = static_cast<int>(v->i);
  return true;
}

bool HparamReader::optional_float(std::string_view key, float* out) {
  const std::string k = full(key);
  const gguf::MetaValue* v = files_.find(k);
  if (!v) return true;
  if (!v->is_float() && !v->is_integer()) { error_ = "metadata key '" + k + "' is not a number"; return false; }
  *out = static_cast<float>(v->f);
  return true;
}

bool HparamReader::optional_string(std::string_view key, std::string* out) {
  const std::string k = full(key);
  const gguf::MetaValue* v = files_.find(k);
  if (!v) return true;
  if (v->type != gguf::ValueType::STRING) { error_ = "metadata key '" + k + "' is not a string"; return false; }
  *out = std::string(v->str);
  return true;
}

}  // namespace guild
