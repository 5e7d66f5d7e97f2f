#include "models/runner.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "artifact/gguf.h"

namespace guild {

// Each architecture file defines its descriptor.
extern const RunnerDescriptor kQwen3MoeRunner;
extern const RunnerDescriptor kQwen3Runner;
extern const RunnerDescriptor kLlamaRunner;
extern const RunnerDescriptor kGptOssRunner;
extern const RunnerDescriptor kGlm4MoeRunner;

namespace {
const RunnerDescriptor* const kRunners[] = {&kQwen3MoeRunner, &kQwen3Runner, &kLlamaRunner, &kGptOssRunner,
                                            &kGlm4MoeRunner};
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

namespace {

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

bool HparamReader::has(std::string_view key) const { return files_.find(full(key)) != nullptr; }

bool HparamReader::required_int(std::string_view key, int lo, int hi, int* out) {
  if (!has(key)) {
    error_ = "missing metadata key '" + full(key) + "'";
    return false;
  }
  return optional_int(key, lo, hi, out);
}

// An integer of any type, or a per-layer array of them whose entries all
// agree (e.g. head_count_kv); *present says whether the key exists.
bool HparamReader::optional_int64(std::string_view key, int64_t* out, bool* present) {
  const std::string k = full(key);
  const gguf::MetaValue* v = files_.find(k);
  *present = v != nullptr;
  if (!v) return true;
  if (v->type == gguf::ValueType::ARRAY) {
    const gguf::MetaArray& a = *v->array;
    int64_t first = 0;
    if (a.count == 0 || !a.get_i64(0, &first)) { error_ = "metadata key '" + k + "' is an empty or non-integer array"; return false; }
    for (uint64_t i = 1; i < a.count; ++i) {
      int64_t x = 0;
      if (!a.get_i64(i, &x) || x != first) { error_ = "metadata key '" + k + "' varies per layer, which this runner does not support"; return false; }
    }
    *out = first;
    return true;
  }
  if (!v->is_integer()) { error_ = "metadata key '" + k + "' is not an integer"; return false; }
  if (v->type == gguf::ValueType::U64 && v->u > static_cast<uint64_t>(INT64_MAX)) {
    error_ = "metadata key '" + k + "' = " + std::to_string(v->u) + " is out of range";
    return false;
  }
  *out = v->i;
  return true;
}

bool HparamReader::optional_int(std::string_view key, int lo, int hi, int* out) {
  int64_t v = 0;
  bool present = false;
  if (!optional_int64(key, &v, &present)) return false;
  if (!present) return true;
  if (v < lo || v > hi) {
    error_ = "metadata key '" + full(key) + "' = " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
             std::to_string(hi) + " (the limits are in docs/GGUF.md, \"Model limits\")";
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool HparamReader::optional_float(std::string_view key, float* out) {
  const std::string k = full(key);
  const gguf::MetaValue* v = files_.find(k);
  if (!v) return true;
  if (!v->is_float() && !v->is_integer()) { error_ = "metadata key '" + k + "' is not a number"; return false; }
  // An f64 beyond float's range becomes inf here and is refused with it.
  const float f = static_cast<float>(v->f);
  if (!std::isfinite(f)) {
    error_ = "metadata key '" + k + "' = " + number_text(v->f) + " is not a finite number";
    return false;
  }
  *out = f;
  return true;
}

bool HparamReader::optional_positive_float(std::string_view key, float* out) {
  float f = *out;
  if (!optional_float(key, &f)) return false;
  if (has(key) && !(f > 0.0f)) {
    error_ = "metadata key '" + full(key) + "' = " + number_text(f) + " must be greater than 0";
    return false;
  }
  *out = f;
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
