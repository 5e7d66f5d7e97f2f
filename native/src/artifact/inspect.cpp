#include "artifact/inspect.h"

#include <map>

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

  uint64_t params = 0, tensor_bytes = 0;
  std::map<std::string, int64_t> by_type;
  for (const auto& t : files.tensors()) {
    params += static_cast<uint64_t>(t.n_elements());
    tensor_bytes += t.nbytes;
    ++by_type[std::string(tensor_type_name(t.type))];
  }
  out.set("parameter_count", static_cast<unsigned long long>(params));
  out.set("tensor_count", static_cast<unsigned long long>(files.tensors().size()));
  out.set("tensor_bytes", static_cast<unsigned long long>(tensor_bytes));
  json::Value types = json::Value::object();
  for (const auto& [name, count] : by_type) types.set(name, static_cast<long long>(count));
  out.set("tensor_types", std::move(types));

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
