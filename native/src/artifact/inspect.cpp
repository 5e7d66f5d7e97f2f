#include "artifact/inspect.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor_type.h"

namespace guild {
namespace {

json::Value array_element(const gguf::MetaArray& a, uint64_t i, size_t max_items) {
  using gguf::ValueType;
  switch (a.elem_type) {
    case ValueType::STRING: return json::Value(std::string(a.strings[i]));
    case ValueType::ARRAY: return metadata_value_json(a.nested[i], max_items);
    case ValueType::BOOL: { int64_t x = 0; a.get_i64(i, &x); return json::Value(x != 0); }
    case ValueType::F32:
    case ValueType::F64: { double d = 0; a.get_f64(i, &d); return json::Value(d); }
    default: { int64_t x = 0; a.get_i64(i, &x); return json::Value(static_cast<long long>(x)); }
  }
}

}  // namespace

json::Value metadata_value_json(const gguf::MetaValue& v, size_t max_items) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::STRING: return json::Value(std::string(v.str));
    case ValueType::BOOL: return json::Value(v.u != 0);
    case ValueType::F32:
    case ValueType::F64: return json::Value(v.f);
    case ValueType::U64: return json::Value(static_cast<unsigned long long>(v.u));
    case ValueType::ARRAY: {
      const gguf::MetaArray& a = *v.array;
      json::Value items = json::Value::array();
      const uint64_t n = a.count <= max_items ? a.count : max_items;
      for (uint64_t i = 0; i < n; ++i) items.push_back(array_element(a, i, max_items));
      if (a.count <= max_items) return items;
      json::Value s = json::Value::object();
      s.set("type", "array");
      s.set("elem_type", std::string(gguf::value_type_name(a.elem_type)));
      s.set("count", static_cast<unsigned long long>(a.count));
      s.set("head", std::move(items));
      return s;
    }
    default: return json::Value(static_cast<long long>(v.i));
  }
}

json::Value inspect_model(const gguf::ModelFiles& files) {
  json::Value out = json::Value::object();
  const auto arch = files.get_string("general.architecture");
  const std::string a = arch ? std::string(*arch) : "";
  out.set("path", files.primary().path());
  out.set("architecture", a);
  if (auto name = files.get_string("general.name")) out.set("name", std::string(*name));
  out.set("gguf_version", files.primary().version());
  out.set("n_shards", static_cast<unsigned long long>(files.shards().size()));
  out.set("file_size", static_cast<unsigned long long>(files.file_bytes()));

  // Per tensor type and per role: routed-expert stacks ("*_exps.*", read a
  // few experts per token) against everything else (read for every token).
  struct Share {
    uint64_t tensors = 0, params = 0, bytes = 0;
    void add(const gguf::TensorInfo& t) {
      ++tensors;
      params += static_cast<uint64_t>(t.n_elements());
      bytes += t.nbytes;
    }
  };
  Share all, experts, dense;
  std::map<std::string, Share> by_type;
  for (const auto& t : files.tensors()) {
    all.add(t);
    (t.name.find("_exps.") != std::string::npos ? experts : dense).add(t);
    by_type[std::string(tensor_type_name(t.type))].add(t);
  }
  auto bits_per_weight = [](const Share& s) {
    return s.params ? json::Value(8.0 * static_cast<double>(s.bytes) / static_cast<double>(s.params)) : json::Value();
  };
  out.set("parameter_count", static_cast<unsigned long long>(all.params));
  out.set("tensor_count", static_cast<unsigned long long>(all.tensors));
  out.set("tensor_bytes", static_cast<unsigned long long>(all.bytes));
  out.set("bits_per_weight", bits_per_weight(all));
  out.set("expert_bits_per_weight", bits_per_weight(experts));
  out.set("dense_bits_per_weight", bits_per_weight(dense));
  json::Value types = json::Value::object();
  for (const auto& [name, share] : by_type) types.set(name, static_cast<long long>(share.tensors));
  out.set("tensor_types", std::move(types));
  // The type mix, largest share of the tensor bytes first.
  std::vector<std::pair<std::string, Share>> mix(by_type.begin(), by_type.end());
  std::stable_sort(mix.begin(), mix.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  json::Value mix_json = json::Value::array();
  for (const auto& [name, share] : mix) {
    json::Value row = json::Value::object();
    row.set("type", name);
    row.set("tensors", static_cast<unsigned long long>(share.tensors));
    row.set("parameters", static_cast<unsigned long long>(share.params));
    row.set("bytes", static_cast<unsigned long long>(share.bytes));
    row.set("bits_per_weight", bits_per_weight(share));
    row.set("byte_share", all.bytes ? static_cast<double>(share.bytes) / static_cast<double>(all.bytes) : 0.0);
    mix_json.push_back(std::move(row));
  }
  out.set("type_mix", std::move(mix_json));

  auto int_or_null = [&](const std::string& key) -> json::Value {
    auto v = files.get_int(key);
    return v ? json::Value(static_cast<long long>(*v)) : json::Value();
  };
  out.set("context_length", int_or_null(a + ".context_length"));
  out.set("block_count", int_or_null(a + ".block_count"));
  out.set("embedding_length", int_or_null(a + ".embedding_length"));
  out.set("expert_count", int_or_null(a + ".expert_count"));
  out.set("expert_used_count", int_or_null(a + ".expert_used_count"));
  if (const gguf::MetaArray* toks = files.get_array("tokenizer.ggml.tokens"))
    out.set("vocab_size", static_cast<unsigned long long>(toks->count));

  json::Value meta = json::Value::object();
  for (const auto& [key, value] : files.primary().metadata()) meta.set(key, metadata_value_json(value));
  out.set("metadata", std::move(meta));
  return out;
}

}  // namespace guild
