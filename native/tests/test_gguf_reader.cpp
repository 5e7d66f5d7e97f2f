// GGUF reader on the llama.cpp-written fixture models (versions, tensor
// counts and types per file as the fixtures' README lists them, metadata
// values, the split model against the single file) and a writer round trip.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "check.h"
#include "core/tensor_type.h"

using namespace guild;
using namespace guild::gguf;

namespace {

std::string model_path(const std::string& file) { return check::fixtures_dir() + "/models/" + file; }

// Tensor type histogram as "name:count" pairs keyed by type id.
std::map<uint32_t, int> type_counts(const std::vector<TensorInfo>& tensors) {
  std::map<uint32_t, int> m;
  for (const TensorInfo& t : tensors) ++m[t.type];
  return m;
}

std::string_view meta_str(const GgufFile& f, std::string_view key) {
  const MetaValue* v = f.find(key);
  return v && v->type == ValueType::STRING ? v->str : std::string_view("<missing>");
}

// Structural invariants every valid file must satisfy, checked independently
// of how the parser computed them.
void check_layout(const GgufFile& f) {
  CHECK(f.data_offset() % f.alignment() == 0 || f.tensors().empty());
  CHECK(f.data_offset() <= f.file_size());
  uint64_t expected_offset = 0;
  for (const TensorInfo& t : f.tensors()) {
    const TensorTypeInfo& info = tensor_type_info(t.type);
    REQUIRE(info.block_bytes != 0);
    CHECK(t.n_dims >= 1 && t.n_dims <= 4);
    CHECK(static_cast<uint64_t>(t.n_elements()) / info.block_elems * info.block_bytes == t.nbytes);
    CHECK(t.data == f.mapping() + f.data_offset() + t.offset);
    CHECK(t.offset % f.alignment() == 0);
    CHECK(f.data_offset() + t.offset + t.nbytes <= f.file_size());
    // llama.cpp's writers place tensors back to back, each padded to the alignment.
    CHECK_MSG(t.offset == expected_offset, "%.*s", static_cast<int>(t.name.size()), t.name.data());
    expected_offset = t.offset + (t.nbytes + f.alignment() - 1) / f.alignment() * f.alignment();
  }
  if (!f.tensors().empty()) CHECK(f.data_offset() + expected_offset == f.file_size());
}

struct FixtureFile {
  const char* file;
  uint64_t bytes;
  const char* arch;
  std::map<uint32_t, int> types;
};

constexpr uint32_t id(TensorType t) { return static_cast<uint32_t>(t); }

const std::vector<FixtureFile>& fixture_table() {
  using T = TensorType;
  static const std::vector<FixtureFile> table = {
      {"qwen3moe-a-F32.gguf", 11637056, "qwen3moe", {{id(T::F32), 27}}},
      {"qwen3moe-a-Q8_0.gguf", 3166528, "qwen3moe", {{id(T::Q8_0), 16}, {id(T::F32), 11}}},
      {"qwen3moe-a-Q4_0.gguf", 2024768, "qwen3moe",
       {{id(T::Q4_0), 11}, {id(T::Q8_0), 4}, {id(T::Q6_K), 1}, {id(T::F32), 11}}},
      {"qwen3moe-a-Q4_K_M.gguf", 2139456, "qwen3moe",
       {{id(T::Q4_K), 7}, {id(T::Q5_K), 2}, {id(T::Q6_K), 1}, {id(T::Q8_0), 5}, {id(T::Q5_0), 1}, {id(T::F32), 11}}},
      {"qwen3moe-a-Q6_K.gguf", 2595136, "qwen3moe", {{id(T::Q6_K), 10}, {id(T::Q8_0), 6}, {id(T::F32), 11}}},
      {"mixtral-a-F32.gguf", 10686272, "llama", {{id(T::F32), 23}}},
      {"mixtral-a-Q4_K_M.gguf", 1905600, "llama",
       {{id(T::Q4_K), 7}, {id(T::Q5_K), 2}, {id(T::Q6_K), 1}, {id(T::Q8_0), 5}, {id(T::Q5_0), 1}, {id(T::F32), 7}}},
      {"gptoss-a-BF16.gguf", 7253568, "gpt-oss", {{id(T::BF16), 16}, {id(T::F32), 25}}},
      {"gptoss-a-MXFP4_MOE.gguf", 3100224, "gpt-oss", {{id(T::MXFP4), 6}, {id(T::Q8_0), 10}, {id(T::F32), 25}}},
      {"glm4moe-a-F32.gguf", 11419136, "glm4moe", {{id(T::F32), 78}}},
      {"glm4moe-a-Q4_K_M.gguf", 2085888, "glm4moe",
       {{id(T::Q4_K), 21}, {id(T::Q8_0), 12}, {id(T::Q5_K), 4}, {id(T::Q5_0), 2}, {id(T::Q6_K), 1}, {id(T::F32), 38}}},
      {"deepseek2-a-F32.gguf", 10446784, "deepseek2", {{id(T::F32), 52}}},
      {"deepseek2-a-Q4_K_M.gguf", 1802944, "deepseek2",
       {{id(T::Q4_K), 21}, {id(T::Q5_0), 11}, {id(T::Q8_0), 2}, {id(T::Q6_K), 1}, {id(T::F32), 17}}},
      {"qwen3-vocab.gguf", 5932320, "qwen3moe", {}},
  };
  return table;
}

}  // namespace

TEST(fixture_models_versions_types_architectures) {
  for (const FixtureFile& fx : fixture_table()) {
    std::string err;
    auto f = GgufFile::open(model_path(fx.file), &err);
    CHECK_MSG(f != nullptr, "%s", err.c_str());
    if (!f) continue;
    CHECK(f->version() == 3);
    CHECK(f->file_size() == fx.bytes);
    CHECK(f->alignment() == 32);
    CHECK_MSG(meta_str(*f, "general.architecture") == fx.arch, "%s", fx.file);
    CHECK_MSG(type_counts(f->tensors()) == fx.types, "%s", fx.file);
    check_layout(*f);
    // The same file through ModelFiles is one shard with the same tensors.
    auto m = ModelFiles::open(model_path(fx.file), &err);
    CHECK_MSG(m != nullptr, "%s", err.c_str());
    if (!m) continue;
    CHECK(m->shards().size() == 1);
    CHECK(m->tensors().size() == f->tensors().size());
    CHECK(m->get_string("general.architecture") == std::optional<std::string_view>(fx.arch));
    uint64_t sum = 0;
    for (const TensorInfo& t : m->tensors()) {
      sum += t.nbytes;
      CHECK(t.shard == 0);
      CHECK(m->find_tensor(t.name) == &t);
    }
    CHECK(m->total_bytes() == sum);
  }
}

TEST(qwen3moe_metadata_values) {
  std::string err;
  auto m = ModelFiles::open(model_path("qwen3moe-a-Q4_K_M.gguf"), &err);
  REQUIRE(m != nullptr);
  const GgufFile& f = m->primary();
  CHECK(f.metadata().size() == 28);
  CHECK(f.metadata().front().first == "general.architecture");
  CHECK(m->get_string("general.name") == std::optional<std::string_view>("qwen3moe-a"));
  CHECK(m->get_int("qwen3moe.block_count") == 2);
  CHECK(m->get_int("qwen3moe.context_length") == 4096);
  CHECK(m->get_int("qwen3moe.embedding_length") == 256);
  CHECK(m->get_int("qwen3moe.feed_forward_length") == 768);
  CHECK(m->get_int("qwen3moe.attention.head_count") == 4);
  CHECK(m->get_int("qwen3moe.attention.head_count_kv") == 2);
  CHECK(m->get_int("qwen3moe.attention.key_length") == 128);
  CHECK(m->get_int("qwen3moe.attention.value_length") == 128);
  CHECK(m->get_int("qwen3moe.expert_count") == 8);
  CHECK(m->get_int("qwen3moe.expert_used_count") == 2);
  CHECK(m->get_int("qwen3moe.expert_feed_forward_length") == 64);
  CHECK(m->get_int("general.file_type") == 15);
  CHECK(m->get_int("general.quantization_version") == 2);
  CHECK(f.find("qwen3moe.block_count")->type == ValueType::U32);
  // f32 values, read as written (single precision).
  CHECK(m->get_float("qwen3moe.rope.freq_base") == 1e6);
  CHECK(f.find("qwen3moe.attention.layer_norm_rms_epsilon")->type == ValueType::F32);
  CHECK(m->get_float("qwen3moe.attention.layer_norm_rms_epsilon") == static_cast<double>(1e-6f));
  CHECK(m->get_float("qwen3moe.expert_count") == 8.0);  // integers read as numbers too
  CHECK(m->get_bool("tokenizer.ggml.add_bos_token") == false);
  CHECK(m->get_int("tokenizer.ggml.bos_token_id") == 2500);
  CHECK(m->get_int("tokenizer.ggml.eos_token_id") == 2502);
  CHECK(m->get_int("tokenizer.ggml.padding_token_id") == 2500);
  CHECK(m->get_string("tokenizer.ggml.model") == std::optional<std::string_view>("gpt2"));
  CHECK(m->get_string("tokenizer.ggml.pre") == std::optional<std::string_view>("qwen2"));
  auto tmpl = m->get_string("tokenizer.chat_template");
  REQUIRE(tmpl.has_value());
  CHECK(tmpl->find("<|im_start|>") != std::string_view::npos);

  const MetaArray* tokens = m->get_array("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->elem_type == ValueType::STRING);
  CHECK(tokens->count == 2560);
  CHECK(tokens->strings.size() == 2560);
  CHECK(tokens->strings[0] == "!");
  CHECK(tokens->strings[2500] == "<|endoftext|>");
  CHECK(tokens->strings[2502] == "<|im_end|>");
  const MetaArray* types = m->get_array("tokenizer.ggml.token_type");
  REQUIRE(types != nullptr);
  CHECK(types->elem_type == ValueType::I32);
  CHECK(types->count == 2560);
  int64_t tt = 0;
  CHECK(types->get_i64(0, &tt) && tt == 1);
  CHECK(types->get_i64(2500, &tt) && tt == 3);  // <|endoftext|> is CONTROL
  CHECK(!types->get_i64(2560, &tt));            // out of range
  double td = 0;
  CHECK(types->get_f64(1, &td) && td == 1.0);
  const MetaArray* merges = m->get_array("tokenizer.ggml.merges");
  REQUIRE(merges != nullptr);
  CHECK(merges->count == 2244);
  CHECK(merges->strings[0] == "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"

  // Typed getters: absent keys are nullopt without an error, wrong types set one.
  std::string terr;
  CHECK(!m->get_int("no.such.key", &terr).has_value() && terr.empty());
  CHECK(m->get_array("no.such.key", &terr) == nullptr && terr.empty());
  CHECK(!m->get_int("general.name", &terr).has_value());
  CHECK(terr.find("general.name") != std::string::npos && terr.find("string") != std::string::npos);
  CHECK(terr.find("qwen3moe-a-Q4_K_M.gguf") != std::string::npos);
  terr.clear();
  CHECK(!m->get_string("qwen3moe.block_count", &terr).has_value() && !terr.empty());
  terr.clear();
  CHECK(!m->get_bool("qwen3moe.block_count", &terr).has_value() && !terr.empty());
  terr.clear();
  CHECK(!m->get_float("tokenizer.ggml.tokens", &terr).has_value() && !terr.empty());
  terr.clear();
  CHECK(m->get_array("general.name", &terr) == nullptr && !terr.empty());

  // Tensor shapes and types (read from the file with an independent script).
  const TensorInfo* t = m->find_tensor("blk.0.ffn_down_exps.weight");
  REQUIRE(t != nullptr);
  CHECK(t->n_dims == 3 && t->ne[0] == 64 && t->ne[1] == 256 && t->ne[2] == 8 && t->ne[3] == 1);
  CHECK(t->type == id(TensorType::Q5_0));
  CHECK(t->nbytes == 64 / 32 * 22 * 256 * 8);
  CHECK(t->offset == 1212416);
  CHECK(t->n_rows() == 256 * 8);
  CHECK(m->find_tensor("blk.1.ffn_down_exps.weight")->type == id(TensorType::Q8_0));
  t = m->find_tensor("token_embd.weight");
  REQUIRE(t != nullptr);
  CHECK(t->type == id(TensorType::Q4_K) && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 2560);
  CHECK(m->find_tensor("output.weight")->type == id(TensorType::Q6_K));
  CHECK(m->find_tensor("output_norm.weight")->n_dims == 1);
  CHECK(m->find_tensor("nonexistent.weight") == nullptr);
  CHECK(m->tensors().front().name == "output.weight");  // file order kept
}

TEST(other_architectures_metadata) {
  std::string err;
  auto mix = ModelFiles::open(model_path("mixtral-a-Q4_K_M.gguf"), &err);
  REQUIRE(mix != nullptr);
  CHECK(mix->get_int("llama.block_count") == 2);
  const MetaArray* scores = mix->get_array("tokenizer.ggml.scores");
  REQUIRE(scores != nullptr);
  CHECK(scores->elem_type == ValueType::F32 && scores->count == 3000);
  double s = 1;
  CHECK(scores->get_f64(0, &s) && s == 0.0);
  int64_t not_int = 0;
  CHECK(!scores->get_i64(0, &not_int));  // floats are not integers
  const MetaArray* tokens = mix->get_array("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->count == 3000 && tokens->strings[0] == "<unk>" && tokens->strings[1] == "<s>");

  auto oss = ModelFiles::open(model_path("gptoss-a-MXFP4_MOE.gguf"), &err);
  REQUIRE(oss != nullptr);
  CHECK(oss->get_int("gpt-oss.expert_count") == 16);
  CHECK(oss->get_int("gpt-oss.expert_used_count") == 4);
  CHECK(oss->get_int("gpt-oss.attention.sliding_window") == 16);
  CHECK(oss->get_string("gpt-oss.rope.scaling.type") == std::optional<std::string_view>("yarn"));
  CHECK(oss->get_float("gpt-oss.rope.scaling.factor") == 32.0);

  auto ds = ModelFiles::open(model_path("deepseek2-a-Q4_K_M.gguf"), &err);
  REQUIRE(ds != nullptr);
  CHECK(ds->get_int("deepseek2.block_count") == 3);
  CHECK(ds->get_int("deepseek2.expert_group_count") == 4);
  CHECK(ds->get_int("deepseek2.attention.kv_lora_rank") == 64);
  CHECK(ds->get_bool("deepseek2.expert_weights_norm") == true);
  CHECK(ds->get_float("deepseek2.expert_weights_scale") == 2.5);
  const TensorInfo* kb = ds->find_tensor("blk.1.attn_k_b.weight");
  REQUIRE(kb != nullptr);
  CHECK(kb->n_dims == 3 && kb->ne[0] == 32 && kb->ne[1] == 64 && kb->ne[2] == 4);

  auto glm = ModelFiles::open(model_path("glm4moe-a-Q4_K_M.gguf"), &err);
  REQUIRE(glm != nullptr);
  CHECK(glm->get_int("glm4moe.block_count") == 4);
  CHECK(glm->get_int("glm4moe.nextn_predict_layers") == 1);
  CHECK(glm->find_tensor("blk.3.nextn.eh_proj.weight") != nullptr);
  CHECK(glm->find_tensor("blk.3.nextn.eh_proj.weight")->type == id(TensorType::Q4_K));
}

TEST(vocab_only_files) {
  std::string err;
  // Written by llama.cpp's tools without padding after the infos: still valid.
  auto v = GgufFile::open(model_path("qwen3-vocab.gguf"), &err);
  REQUIRE(v != nullptr);
  CHECK(v->tensors().empty());
  CHECK(v->data_offset() == v->file_size());
  const MetaValue* tokens = v->find("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr && tokens->type == ValueType::ARRAY);
  CHECK(tokens->array->count == 151936);
  CHECK(tokens->array->strings[151643] == "<|endoftext|>");
  CHECK(v->find("tokenizer.ggml.merges")->array->count == 151387);

  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-gpt-2.gguf",
                           "ggml-vocab-deepseek-coder.gguf"}) {
    auto m = ModelFiles::open(check::fixtures_dir() + "/vocab/" + name, &err);
    CHECK_MSG(m != nullptr, "%s", err.c_str());
    if (!m) continue;
    CHECK(m->tensors().empty());
    CHECK(m->primary().data_offset() <= m->primary().file_size());
    const MetaArray* t = m->get_array("tokenizer.ggml.tokens");
    CHECK(t != nullptr && t->count > 1000 && t->strings.size() == t->count);
  }
}

// The split model (3 shards of llama-gguf-split) equals the single Q8_0 file,
// whichever shard it is opened through.
TEST(split_model_matches_single_file) {
  std::string err;
  auto single = ModelFiles::open(model_path("qwen3moe-a-Q8_0.gguf"), &err);
  REQUIRE(single != nullptr);
  for (int shard = 1; shard <= 3; ++shard) {
    const std::string path = model_path("qwen3moe-a-Q8_0-split-0000" + std::to_string(shard) + "-of-00003.gguf");
    auto split = ModelFiles::open(path, &err);
    CHECK_MSG(split != nullptr, "%s", err.c_str());
    if (!split) continue;
    REQUIRE(split->shards().size() == 3);
    CHECK(split->primary().path().find("-00001-of-00003.gguf") != std::string::npos);
    CHECK(split->shards()[1]->path().find("-00002-of-00003.gguf") != std::string::npos);
    CHECK(split->shards()[0]->tensors().size() == 10);
    CHECK(split->shards()[1]->tensors().size() == 10);
    CHECK(split->shards()[2]->tensors().size() == 7);
    REQUIRE(split->tensors().size() == 27);
    // Metadata comes from shard 1 even when opened through another shard.
    CHECK(split->get_string("general.architecture") == std::optional<std::string_view>("qwen3moe"));
    CHECK(split->get_int("qwen3moe.expert_count") == 8);
    CHECK(split->get_int("split.count") == 3);
    CHECK(split->get_int("split.no") == 0);
    CHECK(split->get_int("split.tensors.count") == 27);
    CHECK(split->total_bytes() == single->total_bytes());
    for (size_t k = 0; k < split->tensors().size(); ++k) {
      const TensorInfo& t = split->tensors()[k];
      CHECK(t.shard == (k < 10 ? 0u : k < 20 ? 1u : 2u));
      CHECK(t.data == split->shards()[t.shard]->mapping() + split->shards()[t.shard]->data_offset() + t.offset);
      const TensorInfo* s = single->find_tensor(t.name);
      CHECK(s != nullptr);
      if (!s) continue;
      CHECK(s->type == t.type && s->n_dims == t.n_dims && s->nbytes == t.nbytes);
      for (int d = 0; d < 4; ++d) CHECK(s->ne[d] == t.ne[d]);
      CHECK_MSG(std::memcmp(s->data, t.data, t.nbytes) == 0, "tensor data differs: %.*s",
                static_cast<int>(t.name.size()), t.name.data());
      CHECK(single->tensors()[k].name == t.name);  // same order as the single file
    }
  }
}

// Every value type, nested arrays, an alignment of 64 and several tensor
// types written by GgufWriter read back equal.
TEST(writer_round_trip) {
  GgufWriter w;
  std::string err;
  REQUIRE(w.set_alignment(64, &err));
  w.add_string("general.architecture", "roundtrip");
  w.add_u8("t.u8", 250);
  w.add_i8("t.i8", -120);
  w.add_u16("t.u16", 65000);
  w.add_i16("t.i16", -32000);
  w.add_u32("t.u32", 4000000000u);
  w.add_i32("t.i32", -2000000000);
  w.add_f32("t.f32", 1.5f);
  w.add_bool("t.bool", true);
  w.add_string("t.string", "h\xC3\xA9llo\nworld");
  w.add_string("t.empty_string", "");
  w.add_u64("t.u64", 18000000000000000000ull);
  w.add_i64("t.i64", -9000000000000000000ll);
  w.add_f64("t.f64", -2.25e300);
  const std::vector<std::string> strs = {"a", "", "\xE2\x96\x81pi\xC3\xA8" "ce", std::string("nul\0byte", 8)};
  w.add_string_array("t.strings", strs);
  const std::vector<uint8_t> u8s = {0, 1, 255};
  const std::vector<int8_t> i8s = {-128, 0, 127};
  const std::vector<uint16_t> u16s = {0, 65535};
  const std::vector<int16_t> i16s = {-32768, 32767};
  const std::vector<uint32_t> u32s = {1, 2, 4294967295u};
  const std::vector<int32_t> i32s = {-5, 7};
  const std::vector<float> f32s = {0.25f, -1e30f};
  const std::vector<uint64_t> u64s = {0, 18446744073709551615ull};
  const std::vector<int64_t> i64s = {-9223372036854775807ll - 1, 9223372036854775807ll};
  const std::vector<double> f64s = {3.141592653589793, -0.0};
  w.add("a.u8", GgufValue::u8_array(u8s));
  w.add("a.i8", GgufValue::i8_array(i8s));
  w.add("a.u16", GgufValue::u16_array(u16s));
  w.add("a.i16", GgufValue::i16_array(i16s));
  w.add("a.u32", GgufValue::u32_array(u32s));
  w.add("a.i32", GgufValue::i32_array(i32s));
  w.add("a.f32", GgufValue::f32_array(f32s));
  w.add("a.u64", GgufValue::u64_array(u64s));
  w.add("a.i64", GgufValue::i64_array(i64s));
  w.add("a.f64", GgufValue::f64_array(f64s));
  w.add("a.bool", GgufValue::bool_array({true, false, true}));
  w.add("a.empty", GgufValue::array_of(ValueType::U32, {}));
  // [[["x", "y"], []], [["z"]]]: arrays of arrays of strings, 3 levels.
  const std::vector<std::string_view> xy = {"x", "y"}, z = {"z"};
  const GgufValue inner[] = {GgufValue::string_array(std::span<const std::string_view>(xy)),
                             GgufValue::array_of(ValueType::STRING, {})};
  const GgufValue inner2[] = {GgufValue::string_array(std::span<const std::string_view>(z))};
  const GgufValue mid[] = {GgufValue::array_of(ValueType::ARRAY, inner), GgufValue::array_of(ValueType::ARRAY, inner2)};
  w.add("a.nested", GgufValue::array_of(ValueType::ARRAY, mid));
  w.add_u32("t.replaced", 1);
  w.add_u32("t.replaced", 2);  // replaces in place, no duplicate key
  CHECK(w.has_key("t.replaced") && !w.has_key("t.absent"));

  // Tensors: F32 1-D, F16 2-D, Q8_0 3-D, Q4_K 2-D, an I32 4-D, an empty one.
  auto bytes_of = [](size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed + k * 31);
    return b;
  };
  const std::vector<uint8_t> d_f32 = bytes_of(5 * 4, 1), d_f16 = bytes_of(3 * 7 * 2, 2),
                             d_q8 = bytes_of(2 * 3 * 2 * 34, 3), d_q4k = bytes_of(1 * 2 * 144, 4),
                             d_i32 = bytes_of(2 * 2 * 2 * 2 * 4, 5);
  const int64_t ne_f32[] = {5}, ne_f16[] = {7, 3}, ne_q8[] = {64, 3, 2}, ne_q4k[] = {256, 2},
                ne_i32[] = {2, 2, 2, 2}, ne_empty[] = {0, 4};
  CHECK(w.add_tensor("t.f32", id(TensorType::F32), ne_f32, d_f32, &err));
  CHECK(w.add_tensor("t.f16", id(TensorType::F16), ne_f16, d_f16, &err));
  CHECK(w.add_tensor_ref("t.q8", id(TensorType::Q8_0), ne_q8, d_q8, &err));
  CHECK(w.add_tensor("t.q4k", id(TensorType::Q4_K), ne_q4k, d_q4k, &err));
  CHECK(w.add_tensor("t.i32", id(TensorType::I32), ne_i32, d_i32, &err));
  CHECK(w.add_tensor("t.empty", id(TensorType::F32), ne_empty, {}, &err));
  // The writer refuses inconsistent tensors.
  CHECK(!w.add_tensor("t.f32", id(TensorType::F32), ne_f32, d_f32, &err));  // duplicate
  CHECK(err.find("duplicate") != std::string::npos);
  const int64_t ne_bad[] = {33};
  CHECK(!w.add_tensor("t.bad", id(TensorType::Q8_0), ne_bad, d_q8, &err));
  CHECK(!w.add_tensor("t.bad", id(TensorType::F32), ne_f16, d_f32, &err));  // size mismatch
  CHECK(!w.add_tensor("t.bad", 4, ne_f32, d_f32, &err));                   // removed type id
  CHECK(!w.add_tensor("", id(TensorType::F32), ne_f32, d_f32, &err));
  CHECK(!w.set_alignment(48, &err));
  CHECK(w.n_tensors() == 6);

  const std::string path = check::tmp_dir() + "/roundtrip.gguf";
  REQUIRE(w.write(path, &err));
  const std::string written = check::read_file(path);
  CHECK(w.to_bytes() == std::vector<uint8_t>(written.begin(), written.end()));
  auto f = GgufFile::open(path, &err);
  CHECK_MSG(f != nullptr, "%s", err.c_str());
  REQUIRE(f != nullptr);
  CHECK(f->version() == 3);
  CHECK(f->alignment() == 64);
  CHECK(f->data_offset() % 64 == 0);
  CHECK(f->file_size() % 64 == 0);
  check_layout(*f);

  auto scalar = [&](const char* key, ValueType t) -> const MetaValue& {
    static const MetaValue none;
    const MetaValue* v = f->find(key);
    CHECK_MSG(v != nullptr && v->type == t, "%s", key);
    return v && v->type == t ? *v : none;
  };
  CHECK(scalar("t.u8", ValueType::U8).u == 250 && scalar("t.u8", ValueType::U8).i == 250);
  CHECK(scalar("t.i8", ValueType::I8).i == -120);
  CHECK(scalar("t.u16", ValueType::U16).u == 65000);
  CHECK(scalar("t.i16", ValueType::I16).i == -32000 && scalar("t.i16", ValueType::I16).f == -32000.0);
  CHECK(scalar("t.u32", ValueType::U32).u == 4000000000u);
  CHECK(scalar("t.i32", ValueType::I32).i == -2000000000);
  CHECK(scalar("t.f32", ValueType::F32).f == 1.5);
  CHECK(scalar("t.bool", ValueType::BOOL).u == 1);
  CHECK(scalar("t.string", ValueType::STRING).str == "h\xC3\xA9llo\nworld");
  CHECK(scalar("t.empty_string", ValueType::STRING).str.empty());
  CHECK(scalar("t.u64", ValueType::U64).u == 18000000000000000000ull);
  CHECK(scalar("t.i64", ValueType::I64).i == -9000000000000000000ll);
  CHECK(scalar("t.f64", ValueType::F64).f == -2.25e300);
  CHECK(scalar("t.replaced", ValueType::U32).u == 2);
  CHECK(scalar("general.alignment", ValueType::U32).u == 64);
  CHECK(f->metadata().size() == 30);
  CHECK(f->metadata()[1].first == "general.architecture");  // insertion order (alignment first)
  CHECK(scalar("t.bool", ValueType::BOOL).is_integer() == false);
  CHECK(scalar("t.u64", ValueType::U64).is_integer() && scalar("t.f64", ValueType::F64).is_float());

  auto array = [&](const char* key, ValueType elem, uint64_t count) -> const MetaArray* {
    const MetaValue* v = f->find(key);
    const bool ok = v && v->type == ValueType::ARRAY && v->array && v->array->elem_type == elem &&
                    v->array->count == count;
    CHECK_MSG(ok, "%s", key);
    return ok ? v->array.get() : nullptr;
  };
  auto ints_equal = [&](const char* key, ValueType elem, const auto& expected) {
    const MetaArray* a = array(key, elem, expected.size());
    if (!a) return;
    for (size_t k = 0; k < expected.size(); ++k) {
      int64_t got = 0;
      CHECK_MSG(a->get_i64(k, &got) && got == static_cast<int64_t>(expected[k]), "%s[%zu]", key, k);
    }
  };
  ints_equal("a.u8", ValueType::U8, u8s);
  ints_equal("a.i8", ValueType::I8, i8s);
  ints_equal("a.u16", ValueType::U16, u16s);
  ints_equal("a.i16", ValueType::I16, i16s);
  ints_equal("a.u32", ValueType::U32, u32s);
  ints_equal("a.i32", ValueType::I32, i32s);
  ints_equal("a.i64", ValueType::I64, i64s);
  if (const MetaArray* a = array("a.u64", ValueType::U64, 2)) {
    int64_t got = -1;
    CHECK(a->get_i64(0, &got) && got == 0);
    CHECK(!a->get_i64(1, &got));  // 2^64-1 does not fit in int64
    uint64_t raw = 0;
    std::memcpy(&raw, a->raw + 8, 8);
    CHECK(raw == u64s[1]);
  }
  if (const MetaArray* a = array("a.f32", ValueType::F32, 2)) {
    double d = 0;
    CHECK(a->get_f64(0, &d) && d == 0.25);
    CHECK(a->get_f64(1, &d) && d == static_cast<double>(-1e30f));
  }
  if (const MetaArray* a = array("a.f64", ValueType::F64, 2)) {
    double d = 0;
    CHECK(a->get_f64(0, &d) && d == 3.141592653589793);
    CHECK(a->get_f64(1, &d) && d == 0.0 && std::signbit(d));
  }
  if (const MetaArray* a = array("a.bool", ValueType::BOOL, 3)) {
    int64_t b = -1;
    CHECK(a->get_i64(0, &b) && b == 1);
    CHECK(a->get_i64(1, &b) && b == 0);
  }
  array("a.empty", ValueType::U32, 0);
  if (const MetaArray* a = array("t.strings", ValueType::STRING, strs.size())) {
    for (size_t k = 0; k < strs.size(); ++k) CHECK(a->strings[k] == strs[k]);
    int64_t x = 0;
    CHECK(!a->get_i64(0, &x));
  }
  if (const MetaArray* a = array("a.nested", ValueType::ARRAY, 2)) {
    const MetaArray& m0 = *a->nested[0].array;
    CHECK(m0.elem_type == ValueType::ARRAY && m0.count == 2);
    CHECK(m0.nested[0].array->elem_type == ValueType::STRING);
    CHECK(m0.nested[0].array->strings == std::vector<std::string_view>({"x", "y"}));
    CHECK(m0.nested[1].array->count == 0);
    const MetaArray& m1 = *a->nested[1].array;
    CHECK(m1.count == 1 && m1.nested[0].array->strings[0] == "z");
  }

  REQUIRE(f->tensors().size() == 6);
  const std::vector<std::pair<const std::vector<uint8_t>*, uint32_t>> expect = {
      {&d_f32, id(TensorType::F32)}, {&d_f16, id(TensorType::F16)}, {&d_q8, id(TensorType::Q8_0)},
      {&d_q4k, id(TensorType::Q4_K)}, {&d_i32, id(TensorType::I32)}};
  for (size_t k = 0; k < expect.size(); ++k) {
    const TensorInfo& t = f->tensors()[k];
    CHECK(t.type == expect[k].second);
    CHECK(t.nbytes == expect[k].first->size());
    CHECK(std::memcmp(t.data, expect[k].first->data(), t.nbytes) == 0);
    CHECK(reinterpret_cast<uintptr_t>(t.data) % 64 == 0);  // mapping is page-aligned
  }
  CHECK(f->tensors()[1].n_dims == 2 && f->tensors()[1].ne[0] == 7 && f->tensors()[1].ne[1] == 3);
  CHECK(f->tensors()[2].n_dims == 3 && f->tensors()[2].ne[2] == 2);
  CHECK(f->tensors()[4].n_dims == 4 && f->tensors()[4].n_elements() == 16);
  CHECK(f->tensors()[5].nbytes == 0 && f->tensors()[5].n_elements() == 0 && f->tensors()[5].ne[1] == 4);

  // A second GgufFile over the same path is independent; destruction unmaps.
  auto again = ModelFiles::open(path, &err);
  REQUIRE(again != nullptr);
  CHECK(again->get_int("t.u64", &err) == std::nullopt);  // > INT64_MAX
  CHECK(err.find("t.u64") != std::string::npos);
  CHECK(again->get_int("t.i64") == -9000000000000000000ll);
  CHECK(again->get_float("t.f32") == 1.5);
  CHECK(again->get_bool("t.bool") == true);
}

// Arrays nested up to the depth limit are accepted.
TEST(nesting_at_the_limit) {
  GgufValue v = GgufValue::u32_array(std::vector<uint32_t>{7});
  for (uint32_t depth = 1; depth < limits::kMaxArrayDepth; ++depth) {
    const GgufValue one[] = {v};
    v = GgufValue::array_of(ValueType::ARRAY, one);
  }
  GgufWriter w;
  w.add("deep", v);
  const std::string path = check::tmp_dir() + "/deep_ok.gguf";
  std::string err;
  REQUIRE(w.write(path, &err));
  auto f = GgufFile::open(path, &err);
  CHECK_MSG(f != nullptr, "%s", err.c_str());
  REQUIRE(f != nullptr);
  const MetaArray* a = f->find("deep")->array.get();
  for (uint32_t depth = 1; depth < limits::kMaxArrayDepth; ++depth) a = a->nested.at(0).array.get();
  int64_t x = 0;
  CHECK(a->elem_type == ValueType::U32 && a->get_i64(0, &x) && x == 7);
}

TEST(writer_reports_unwritable_path) {
  GgufWriter w;
  std::string err;
  CHECK(!w.write(check::tmp_dir() + "/no/such/dir/x.gguf", &err));
  CHECK(err.find("no/such/dir") != std::string::npos);
  bool threw = false;
  try {
    const GgufValue mixed[] = {GgufValue::u8(1)};
    (void)GgufValue::array_of(ValueType::U16, mixed);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CHECK(threw);
}
