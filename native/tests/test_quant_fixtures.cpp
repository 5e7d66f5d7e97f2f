// Dequantization against llama.cpp: for every expected/*/dequant/dequant.json
// in the fixtures, read the tensor's raw blocks from the model GGUF, dequantize
// the first rows_written rows with every kernel table this CPU can run, and
// require the floats to be bit-identical to ggml's reference to_float output.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "check.h"
#include "core/cpu_features.h"
#include "core/kernel_table.h"
#include "core/tensor_type.h"

using namespace guild;

namespace {

// ---- minimal reader for dequant.json (fixed, flat format) ------------------------

// Position just after `"key":` (and any spaces) at or after `from`, within [from, to).
size_t value_at(const std::string& s, const std::string& key, size_t from, size_t to) {
  const std::string pat = "\"" + key + "\"";
  size_t p = s.find(pat, from);
  if (p == std::string::npos || p >= to) return std::string::npos;
  p = s.find(':', p + pat.size());
  if (p == std::string::npos || p >= to) return std::string::npos;
  ++p;
  while (p < to && (s[p] == ' ' || s[p] == '\n' || s[p] == '\r' || s[p] == '\t')) ++p;
  return p < to ? p : std::string::npos;
}

bool get_string(const std::string& s, const std::string& key, size_t from, size_t to, std::string* out) {
  size_t p = value_at(s, key, from, to);
  if (p == std::string::npos || s[p] != '"') return false;
  const size_t e = s.find('"', p + 1);
  if (e == std::string::npos || e >= to) return false;
  *out = s.substr(p + 1, e - p - 1);
  return true;
}

bool get_int(const std::string& s, const std::string& key, size_t from, size_t to, int64_t* out) {
  size_t p = value_at(s, key, from, to);
  if (p == std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtoll(s.c_str() + p, &end, 10);
  return end != s.c_str() + p;
}

bool get_int_array(const std::string& s, const std::string& key, size_t from, size_t to, std::vector<int64_t>* out) {
  size_t p = value_at(s, key, from, to);
  if (p == std::string::npos || s[p] != '[') return false;
  const size_t e = s.find(']', p);
  if (e == std::string::npos || e >= to) return false;
  out->clear();
  const char* c = s.c_str() + p + 1;
  const char* stop = s.c_str() + e;
  while (c < stop) {
    char* end = nullptr;
    const long long v = std::strtoll(c, &end, 10);
    if (end == c) {
      ++c;  // skip separators / whitespace
      continue;
    }
    out->push_back(v);
    c = end;
  }
  return !out->empty();
}

struct Entry {
  std::string tensor, type, file;
  std::vector<int64_t> ne;
  int64_t rows_written = 0;
};

struct DequantJson {
  std::string model;
  std::vector<Entry> entries;
};

bool parse_dequant_json(const std::string& text, DequantJson* out, std::string* err) {
  if (!get_string(text, "model", 0, text.size(), &out->model)) {
    *err = "no \"model\"";
    return false;
  }
  // Every tensor object starts with its "tensor" key; an object ends where
  // the next one starts.
  std::vector<size_t> starts;
  for (size_t p = text.find("\"tensor\""); p != std::string::npos; p = text.find("\"tensor\"", p + 1))
    starts.push_back(p);
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t from = starts[k], to = k + 1 < starts.size() ? starts[k + 1] : text.size();
    Entry e;
    if (!get_string(text, "tensor", from, to, &e.tensor) || !get_string(text, "type", from, to, &e.type) ||
        !get_string(text, "file", from, to, &e.file) || !get_int(text, "rows_written", from, to, &e.rows_written) ||
        !get_int_array(text, "ne", from, to, &e.ne)) {
      *err = "tensor entry " + std::to_string(k) + " lacks tensor/type/file/rows_written/ne";
      return false;
    }
    out->entries.push_back(std::move(e));
  }
  if (out->entries.empty()) {
    *err = "no tensor entries";
    return false;
  }
  return true;
}

std::vector<const CpuKernelTable*> runnable_tables() {
  std::vector<const CpuKernelTable*> t{&cpu_kernels_generic()};
  if (cpu_kernels_avx2() && cpu_features().has_avx2_table_isa())
    t.push_back(cpu_kernels_avx2());
  else
    std::printf("  (cpu-avx2 not checked: %s)\n",
                cpu_kernels_avx2() ? "this CPU lacks AVX2+FMA+F16C" : "binary built without it");
  if (cpu_kernels_avx512() && cpu_features().has_avx512_table_isa())
    t.push_back(cpu_kernels_avx512());
  else
    std::printf("  (cpu-avx512 not checked: %s)\n",
                cpu_kernels_avx512() ? "this CPU lacks AVX-512 F/BW/VL/DQ + VNNI" : "binary built without it");
  return t;
}

}  // namespace

TEST(dequant_json_reader) {
  const std::string text = R"({ "model": "models/x.gguf", "tensors": [
    { "tensor": "a.weight", "type": "q4_K", "ne": [ 256, 3, 1, 1 ], "rows_written": 2, "file": "dequant/a.f32" },
    { "tensor": "b", "type": "bf16", "ne": [8], "nbytes": 16, "rows_written": 1, "file": "dequant/b.f32" } ] })";
  DequantJson j;
  std::string err;
  REQUIRE(parse_dequant_json(text, &j, &err));
  CHECK(j.model == "models/x.gguf");
  REQUIRE(j.entries.size() == 2);
  CHECK(j.entries[0].tensor == "a.weight" && j.entries[0].type == "q4_K" && j.entries[0].rows_written == 2);
  CHECK((j.entries[0].ne == std::vector<int64_t>{256, 3, 1, 1}));
  CHECK(j.entries[1].file == "dequant/b.f32" && j.entries[1].ne.size() == 1 && j.entries[1].ne[0] == 8);
}

TEST(fixture_dequant_bit_exact) {
  const std::string root = check::fixtures_dir();
  const auto tables = runnable_tables();
  std::vector<std::filesystem::path> jsons;
  for (const auto& dir : std::filesystem::directory_iterator(root + "/expected")) {
    const auto p = dir.path() / "dequant" / "dequant.json";
    if (std::filesystem::exists(p)) jsons.push_back(p);
  }
  std::sort(jsons.begin(), jsons.end());
  REQUIRE(!jsons.empty());

  std::map<std::string, int> per_type;
  int64_t values = 0;
  int tensors = 0;
  for (const auto& jp : jsons) {
    DequantJson j;
    std::string err;
    if (!parse_dequant_json(check::read_file(jp.string()), &j, &err)) {
      CHECK_MSG(false, "%s: %s", jp.string().c_str(), err.c_str());
      continue;
    }
    const std::string model_path = root + "/" + j.model;
    auto model = gguf::ModelFiles::open(model_path, &err);
    if (!model) {
      CHECK_MSG(false, "%s: %s", model_path.c_str(), err.c_str());
      continue;
    }
    for (const Entry& e : j.entries) {
      const std::string what = jp.parent_path().parent_path().filename().string() + ":" + e.tensor;
      const gguf::TensorInfo* ti = model->find_tensor(e.tensor);
      if (!ti) {
        CHECK_MSG(false, "%s: tensor not in the GGUF", what.c_str());
        continue;
      }
      CHECK_MSG(tensor_type_name(ti->type) == e.type, "%s: GGUF type %s, json %s", what.c_str(),
                std::string(tensor_type_name(ti->type)).c_str(), e.type.c_str());
      for (size_t d = 0; d < 4; ++d)
        CHECK_MSG(ti->ne[d] == (d < e.ne.size() ? e.ne[d] : 1), "%s: ne[%zu] %lld vs json %lld", what.c_str(), d,
                  (long long)ti->ne[d], (long long)(d < e.ne.size() ? e.ne[d] : 1));
      const int64_t ne0 = ti->ne[0];
      uint64_t row_bytes = 0;
      if (!tensor_row_bytes(ti->type, static_cast<uint64_t>(ne0), &row_bytes) || e.rows_written > ti->n_rows()) {
        CHECK_MSG(false, "%s: bad geometry", what.c_str());
        continue;
      }
      const std::vector<float> expected = check::read_f32((jp.parent_path().parent_path() / e.file).string());
      if (static_cast<int64_t>(expected.size()) != e.rows_written * ne0) {
        CHECK_MSG(false, "%s: %zu floats in %s, want %lld", what.c_str(), expected.size(), e.file.c_str(),
                  (long long)(e.rows_written * ne0));
        continue;
      }
      for (const CpuKernelTable* t : tables) {
        const DequantRowFn dq = t->types[ti->type].dequant_row;
        if (!dq) {
          CHECK_MSG(false, "%s: %s has no dequantizer for %s", what.c_str(), t->name, e.type.c_str());
          continue;
        }
        // Row by row (as the runtime calls it), then the whole slab in one call.
        std::vector<float> got(expected.size() + 1, -1.0f);
        for (int64_t r = 0; r < e.rows_written; ++r) dq(ti->data + r * row_bytes, got.data() + r * ne0, ne0);
        std::vector<float> slab(expected.size() + 1, -1.0f);
        dq(ti->data, slab.data(), e.rows_written * ne0);
        CHECK(got.back() == -1.0f && slab.back() == -1.0f);  // no write past the end
        int64_t bad = 0, first = -1;
        for (size_t i = 0; i < expected.size(); ++i) {
          const bool same = std::memcmp(&got[i], &expected[i], 4) == 0 && std::memcmp(&slab[i], &expected[i], 4) == 0;
          if (!same && bad++ == 0) first = static_cast<int64_t>(i);
        }
        CHECK_MSG(bad == 0, "%s [%s, %s]: %lld of %zu values differ; first at %lld: got %.9g want %.9g", what.c_str(),
                  t->name, e.type.c_str(), (long long)bad, expected.size(), (long long)first, got[first],
                  expected[first]);
      }
      ++tensors;
      ++per_type[e.type];
      values += static_cast<int64_t>(expected.size());
    }
  }
  std::string types;
  for (const auto& [name, n] : per_type) types += " " + name + "x" + std::to_string(n);
  std::printf("  %d tensors, %lld values, %zu table(s); types:%s\n", tensors, (long long)values, tables.size(),
              types.c_str());
  CHECK(tensors > 0);
}
