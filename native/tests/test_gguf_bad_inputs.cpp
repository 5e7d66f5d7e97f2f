// Broken GGUF files, crafted with GgufWriter plus byte surgery under
// check::tmp_dir(). Each must be rejected (null) with exactly one line that
// starts with the path, and nothing may crash (the suite also runs under
// ASan + UBSan).
#include <sys/mman.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "check.h"
#include "core/tensor_type.h"
#include "model_file_edit.h"

using namespace guild;
using namespace guild::gguf;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr uint32_t id(TensorType t) { return static_cast<uint32_t>(t); }
constexpr uint64_t kTwo63 = 1ull << 63;

std::string dir() {
  static const std::string d = [] {
    std::string p = check::tmp_dir() + "/bad_inputs";
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

std::string write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return path;
}

void put_u32(Bytes& b, size_t pos, uint32_t v) { std::memcpy(b.data() + pos, &v, 4); }
void put_u64(Bytes& b, size_t pos, uint64_t v) { std::memcpy(b.data() + pos, &v, 8); }

// Position of the first occurrence of `needle` (a key or tensor name).
size_t find(const Bytes& b, std::string_view needle) {
  for (size_t k = 0; k + needle.size() <= b.size(); ++k)
    if (std::memcmp(b.data() + k, needle.data(), needle.size()) == 0) return k;
  std::printf("  test bug: '%.*s' not in the file\n", static_cast<int>(needle.size()), needle.data());
  std::abort();
}
// Byte offset of a metadata value (just after its type tag).
size_t value_pos(const Bytes& b, std::string_view key) { return find(b, key) + key.size() + 4; }
size_t type_tag_pos(const Bytes& b, std::string_view key) { return find(b, key) + key.size(); }

struct TensorFields {
  size_t n_dims, ne, type, offset;
};
TensorFields tensor_fields(const Bytes& b, std::string_view name) {
  const size_t p = find(b, name) + name.size();
  uint32_t nd = 0;
  std::memcpy(&nd, b.data() + p, 4);
  return {p, p + 4, p + 4 + 8 * nd, p + 4 + 8 * nd + 4};
}

// A small valid file: metadata of several kinds and two tensors, the last of
// which ends exactly at the end of the file (so every truncation is an error).
GgufWriter base_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "tiny");
  w.add_u32("tiny.block_count", 1);
  const std::vector<std::string> tokens = {"a", "bc", "def"};
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add("tiny.ids", GgufValue::u32_array(std::vector<uint32_t>{1, 2, 3}));
  w.add_bool("tiny.flag", true);
  w.add("tiny.flags", GgufValue::bool_array({true, false}));
  w.add_f32("tiny.eps", 1e-5f);
  w.add_u32("dup.a1", 1);
  w.add_u32("dup.a2", 2);
  std::string err;
  const int64_t ne_q8[] = {32, 2}, ne_norm[] = {8};
  const Bytes q8(2 * 34, 0x11), norm(8 * 4, 0x22);
  w.add_tensor("w.q8", id(TensorType::Q8_0), ne_q8, q8, &err);
  w.add_tensor("w.norm", id(TensorType::F32), ne_norm, norm, &err);
  return w;
}
Bytes base_bytes() { return base_writer().to_bytes(); }

// The one-line rule and the path prefix.
void check_message(const std::string& path, const std::string& err, const char* what) {
  CHECK_MSG(!err.empty(), "%s: empty error", what);
  CHECK_MSG(err.find('\n') == std::string::npos && err.find('\r') == std::string::npos, "%s: multi-line: %s", what,
            err.c_str());
  CHECK_MSG(err.rfind(path + ": ", 0) == 0, "%s: does not start with the path: %s", what, err.c_str());
}

// GgufFile::open and ModelFiles::open must both reject the file; the error
// must contain `expect` (when given).
void expect_reject_path(const std::string& path, const char* expect, const char* what) {
  std::string err = "unset";
  auto f = GgufFile::open(path, &err);
  CHECK_MSG(f == nullptr, "%s: accepted", what);
  check_message(path, err, what);
  if (expect) CHECK_MSG(err.find(expect) != std::string::npos, "%s: got '%s', wanted '%s'", what, err.c_str(), expect);
  std::string merr = "unset";
  auto m = ModelFiles::open(path, &merr);
  CHECK_MSG(m == nullptr, "%s: ModelFiles accepted", what);
  check_message(path, merr, what);
}

void expect_reject(const Bytes& b, const char* name, const char* expect) {
  expect_reject_path(write_bytes(dir() + "/" + name + ".gguf", b), expect, name);
}

void expect_reject(const GgufWriter& w, const char* name, const char* expect) { expect_reject(w.to_bytes(), name, expect); }

// Only ModelFiles::open must fail (each shard is a valid file by itself).
void expect_model_reject(const std::string& path, const char* expect, const char* what) {
  std::string err = "unset";
  auto m = ModelFiles::open(path, &err);
  CHECK_MSG(m == nullptr, "%s: accepted", what);
  check_message(path, err, what);
  if (expect) CHECK_MSG(err.find(expect) != std::string::npos, "%s: got '%s', wanted '%s'", what, err.c_str(), expect);
}

}  // namespace

TEST(base_file_is_valid) {
  const std::string path = write_bytes(dir() + "/base.gguf", base_bytes());
  std::string err;
  auto f = GgufFile::open(path, &err);
  CHECK_MSG(f != nullptr, "%s", err.c_str());
  REQUIRE(f != nullptr);
  CHECK(f->tensors().size() == 2);
  CHECK(f->tensors()[1].data + f->tensors()[1].nbytes == f->mapping() + f->file_size());
  CHECK(ModelFiles::open(path, &err) != nullptr);
}

TEST(truncated_everywhere) {
  const Bytes full = base_bytes();
  std::vector<size_t> cuts;
  for (size_t n = 0; n < full.size(); n += 7) cuts.push_back(n);
  cuts.push_back(full.size() - 1);
  for (size_t n : cuts) {
    const Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string what = "truncated at " + std::to_string(n);
    const std::string path = write_bytes(dir() + "/truncated.gguf", cut);
    expect_reject_path(path, n == 0 ? "empty file" : "truncated file", what.c_str());
  }
  // The message says what was cut and where, e.g. inside the last tensor's data.
  std::string err;
  const Bytes cut(full.begin(), full.end() - 1);
  CHECK(GgufFile::open(write_bytes(dir() + "/truncated.gguf", cut), &err) == nullptr);
  CHECK_MSG(err.find("tensor 'w.norm'") != std::string::npos &&
                err.find("but the file has " + std::to_string(full.size() - 1) + " bytes") != std::string::npos,
            "%s", err.c_str());
  // Inside the tensor infos.
  const size_t in_info = tensor_fields(full, "w.norm").type + 2;
  CHECK(GgufFile::open(write_bytes(dir() + "/truncated.gguf", Bytes(full.begin(), full.begin() + in_info)), &err) ==
        nullptr);
  CHECK_MSG(err.find("tensor info 2 of 2 ('w.norm'): type extends to byte " + std::to_string(in_info + 2)) !=
                std::string::npos,
            "%s", err.c_str());
}

TEST(header_problems) {
  Bytes b = base_bytes();
  b[0] = 'X';
  expect_reject(b, "bad_magic", "not a GGUF file");
  expect_reject(Bytes{'G', 'G'}, "two_bytes", "truncated file");
  expect_reject(Bytes{'G', 'G', 'U', 'F', 3, 0}, "six_bytes", "truncated file");

  b = base_bytes();
  put_u32(b, 4, 1);
  expect_reject(b, "version_1", "version 1 is not supported");
  put_u32(b, 4, 99);
  expect_reject(b, "version_99", "unsupported GGUF version 99");
  put_u32(b, 4, 0);
  expect_reject(b, "version_0", "unsupported GGUF version 0");
  put_u32(b, 4, 0x03000000u);
  expect_reject(b, "version_big_endian", "big-endian");

  b = base_bytes();
  put_u64(b, 8, kTwo63);
  expect_reject(b, "n_tensors_2p63", "tensor count 9223372036854775808 needs more than 2^64 bytes");
  put_u64(b, 8, ~0ull);
  expect_reject(b, "n_tensors_max", "tensor count");
  put_u64(b, 8, 3);  // one more than present: runs into the data section
  expect_reject(b, "n_tensors_plus_one", nullptr);
  b = base_bytes();
  put_u64(b, 16, kTwo63);
  expect_reject(b, "n_kv_2p63", "metadata entry count 9223372036854775808 needs more than 2^64 bytes");
  put_u64(b, 16, ~0ull);
  expect_reject(b, "n_kv_max", "metadata entry count");
}

TEST(string_lengths) {
  Bytes b = base_bytes();
  put_u64(b, 24, kTwo63);  // the first key's length
  expect_reject(b, "key_len_2p63", "key length 9223372036854775808 exceeds the limit");
  b = base_bytes();
  const size_t v = value_pos(b, "general.architecture");
  put_u64(b, v, kTwo63);
  expect_reject(b, "string_len_2p63", "string value length 9223372036854775808 exceeds the limit");
  put_u64(b, v, ~0ull);
  expect_reject(b, "string_len_max", "exceeds the limit");
  put_u64(b, v, limits::kMaxStringBytes + 1);
  expect_reject(b, "string_len_cap", "exceeds the limit");
  put_u64(b, v, b.size() - (v + 8) + 1);  // one byte more than the file has
  expect_reject(b, "string_len_past_eof", "truncated file");
  // A string element inside an array.
  b = base_bytes();
  put_u64(b, find(b, "tokenizer.ggml.tokens") + 21 + 4 + 4 + 8, kTwo63);
  expect_reject(b, "string_elem_len", "string element length");

  GgufWriter w = base_writer();
  w.add_u32(std::string(limits::kMaxKeyBytes + 1, 'k'), 1);
  expect_reject(w, "key_too_long", "exceeds the limit of 4096");
  w = base_writer();
  w.add_u32("", 1);
  expect_reject(w, "empty_key", "empty key");
  // Control characters in a key must not break the one-line rule.
  w = base_writer();
  w.add_u32("bad\nkey\x01", 1);
  w.add_u32("bad\nkey\x02", 2);
  Bytes dup = w.to_bytes();
  dup[find(dup, "bad\nkey\x02") + 7] = 0x01;
  expect_reject(dup, "dup_key_with_newline", "duplicate metadata key 'bad\\x0akey\\x01'");
}

TEST(value_and_array_types) {
  Bytes b = base_bytes();
  put_u32(b, type_tag_pos(b, "tiny.block_count"), 13);
  expect_reject(b, "kv_type_13", "unknown value type 13");
  put_u32(b, type_tag_pos(b, "tiny.block_count"), 0xFFFFFFFFu);
  expect_reject(b, "kv_type_max", "unknown value type 4294967295");
  b = base_bytes();
  put_u32(b, value_pos(b, "tiny.ids"), 99);
  expect_reject(b, "array_elem_type_99", "unknown array element type 99");
  b = base_bytes();
  b[value_pos(b, "tiny.flag")] = 2;
  expect_reject(b, "bool_2", "bool value 2");
  b = base_bytes();
  b[value_pos(b, "tiny.flags") + 12 + 1] = 7;
  expect_reject(b, "bool_array_7", "bool array element 1 is 7");
}

TEST(array_counts) {
  Bytes b = base_bytes();
  const size_t count_pos = value_pos(b, "tiny.ids") + 4;
  put_u64(b, count_pos, (1ull << 62) + 1);  // x 4 bytes wraps to 4
  expect_reject(b, "u32_array_count_wraps", "array of 4611686018427387905 u32 elements needs more than 2^64 bytes");
  put_u64(b, count_pos, kTwo63);
  expect_reject(b, "u32_array_count_2p63", "truncated file");
  put_u64(b, count_pos, 4);  // one more than present
  expect_reject(b, "u32_array_count_plus_one", nullptr);
  b = base_bytes();
  const size_t tok_count = value_pos(b, "tokenizer.ggml.tokens") + 4;
  put_u64(b, tok_count, 1ull << 62);  // strings: at least 8 bytes each
  expect_reject(b, "string_array_count_2p62", "array of 4611686018427387904 string elements");
  put_u64(b, tok_count, ~0ull);
  expect_reject(b, "string_array_count_max", "string elements");
  // Nested arrays: each element needs at least 12 bytes.
  GgufWriter w = base_writer();
  const GgufValue one[] = {GgufValue::u8_array(std::vector<uint8_t>{1})};
  w.add("nest", GgufValue::array_of(ValueType::ARRAY, one));
  b = w.to_bytes();
  put_u64(b, value_pos(b, "nest") + 4, kTwo63);
  expect_reject(b, "nested_array_count_2p63", "array elements");
}

TEST(nesting_too_deep) {
  for (uint32_t depth : {limits::kMaxArrayDepth + 1, 200u}) {
    GgufValue v = GgufValue::u32_array(std::vector<uint32_t>{1});
    for (uint32_t k = 1; k < depth; ++k) {
      const GgufValue one[] = {v};
      v = GgufValue::array_of(ValueType::ARRAY, one);
    }
    GgufWriter w = base_writer();
    w.add("deep", v);
    expect_reject(w, ("nesting_" + std::to_string(depth)).c_str(), "arrays are nested deeper than 8 levels");
  }
  // Deep nesting of empty arrays is no cheaper to get past the limit.
  GgufValue v = GgufValue::array_of(ValueType::ARRAY, {});
  for (int k = 0; k < 20; ++k) {
    const GgufValue one[] = {v};
    v = GgufValue::array_of(ValueType::ARRAY, one);
  }
  GgufWriter w = base_writer();
  w.add("deep_empty", v);
  expect_reject(w, "nesting_empty", "nested deeper");
}

TEST(bad_alignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    GgufWriter w = base_writer();
    w.add_u32("general.alignment", a);
    expect_reject(w, ("alignment_" + std::to_string(a)).c_str(), "is not a nonzero power of two");
  }
  GgufWriter w = base_writer();
  w.add_u64("general.alignment", 32);
  expect_reject(w, "alignment_u64", "general.alignment has type u64, expected u32");
  w = base_writer();
  w.add_string("general.alignment", "32");
  expect_reject(w, "alignment_string", "expected u32");
}

TEST(tensor_shapes) {
  const Bytes four(4, 0);
  auto with_raw = [&](std::string_view name, uint32_t type, std::vector<int64_t> ne, const Bytes& data) {
    GgufWriter w = base_writer();
    w.add_raw_tensor(name, type, ne, data);
    return w;
  };
  expect_reject(with_raw("w.bad", id(TensorType::F32), {}, four), "n_dims_0", "n_dims 0 is outside 1..4");
  expect_reject(with_raw("w.bad", id(TensorType::F32), {1, 1, 1, 1, 1}, four), "n_dims_5", "n_dims 5 is outside 1..4");
  Bytes b = with_raw("w.bad", id(TensorType::F32), {1}, four).to_bytes();
  put_u32(b, tensor_fields(b, "w.bad").n_dims, 0xFFFFFFFFu);
  expect_reject(b, "n_dims_max", "n_dims 4294967295");
  expect_reject(with_raw("w.bad", id(TensorType::F32), {-1}, four), "ne_negative", "negative dimension ne[0] = -1");
  expect_reject(with_raw("w.bad", id(TensorType::F32), {4, INT64_MIN}, four), "ne_int64_min", "negative dimension ne[1]");
  expect_reject(with_raw("w.bad", id(TensorType::F32), {1ll << 32, 1ll << 32, 1ll << 32}, four), "ne_product_overflow",
                "overflows int64");
  // ne[0] = 0 makes the element count 0, but the row count still overflows.
  expect_reject(with_raw("w.bad", id(TensorType::F32), {0, 1ll << 40, 1ll << 40}, {}), "ne_rows_overflow",
                "overflows int64");
  expect_reject(with_raw("w.bad", id(TensorType::F64), {1ll << 62}, four), "bytes_overflow", "overflows 64 bits");
  expect_reject(with_raw("w.bad", id(TensorType::F32), {1ll << 40, 1ll << 22}, four), "bytes_overflow_rows",
                "overflows 64 bits");
  expect_reject(with_raw("w.bad", id(TensorType::Q8_0), {33, 1}, Bytes(34, 0)), "ne0_not_block_multiple",
                "ne[0] = 33 is not a multiple of the q8_0 block size 32");
  expect_reject(with_raw("w.bad", id(TensorType::Q4_K), {32}, Bytes(144, 0)), "ne0_not_k_block",
                "block size 256");
  expect_reject(with_raw("w.bad", 200, {4}, four), "type_200", "unsupported tensor type id 200 for tensor 'w.bad'");
  expect_reject(with_raw("w.bad", 4, {4}, four), "type_4_removed", "unsupported tensor type id 4 for tensor 'w.bad'");
  expect_reject(with_raw("w.bad", 0xFFFFFFFFu, {4}, four), "type_max", "unsupported tensor type id 4294967295");
  expect_reject(with_raw("", id(TensorType::F32), {1}, four), "empty_tensor_name", "empty tensor name");
  expect_reject(with_raw(std::string(limits::kMaxTensorNameBytes + 1, 'n'), id(TensorType::F32), {1}, four),
                "tensor_name_too_long", "name length 4097 exceeds the limit");
  // Sizes that fit the arithmetic but not the file.
  expect_reject(with_raw("w.bad", id(TensorType::F32), {1ll << 40}, four), "data_past_eof", "truncated file");
}

TEST(tensor_placement) {
  Bytes b = base_bytes();
  const TensorFields norm = tensor_fields(b, "w.norm");
  put_u64(b, norm.offset, 97);
  expect_reject(b, "offset_misaligned", "data offset 97 is not a multiple of the alignment 32");
  put_u64(b, norm.offset, 1ull << 40);
  expect_reject(b, "offset_beyond_file", "tensor 'w.norm' (offset 1099511627776, 32 bytes) ends at byte");
  put_u64(b, norm.offset, ~0ull - 31);  // aligned, and offset + size wraps
  expect_reject(b, "offset_wraps", "ends beyond byte 2^64");
  put_u64(b, norm.offset, 128);  // the data section is 128 bytes: starts at its end
  expect_reject(b, "offset_at_end", "truncated file");
  b = base_bytes();
  put_u64(b, norm.ne, 16);  // twice the bytes that are there
  expect_reject(b, "data_range_past_eof", "tensor 'w.norm' (offset 96, 64 bytes) ends at byte");
  b = base_bytes();
  put_u64(b, tensor_fields(b, "w.q8").ne + 8, 1000);  // rows: overlaps w.norm and runs past EOF
  expect_reject(b, "q8_rows_past_eof", "truncated file");
  // Overlapping tensors are allowed: both point at the same bytes.
  b = base_bytes();
  put_u64(b, norm.offset, 0);
  std::string err;
  auto f = GgufFile::open(write_bytes(dir() + "/overlap.gguf", b), &err);
  CHECK_MSG(f != nullptr, "%s", err.c_str());
  if (f) CHECK(f->tensors()[0].data == f->tensors()[1].data);
}

TEST(duplicates) {
  Bytes b = base_bytes();
  b[find(b, "dup.a2") + 5] = '1';
  expect_reject(b, "duplicate_key", "duplicate metadata key 'dup.a1' (entries 8 and 9)");
  GgufWriter w = base_writer();
  w.add_raw_tensor("w.q8", id(TensorType::F32), std::vector<int64_t>{1}, Bytes(4, 0));
  expect_reject(w, "duplicate_tensor", "duplicate tensor name 'w.q8' (tensor infos 1 and 3)");
}

TEST(filesystem_problems) {
  expect_reject_path(dir(), "is a directory", "directory");
  expect_reject_path(write_bytes(dir() + "/empty.gguf", {}), "empty file", "empty");
  expect_reject_path(dir() + "/does-not-exist.gguf", "No such file or directory", "nonexistent");
  expect_reject_path(dir() + "/no-such-dir/x.gguf", "cannot open", "nonexistent dir");
  // A control character in the path is escaped, so the message stays one line.
  std::string err;
  CHECK(GgufFile::open(dir() + "/line\nbreak.gguf", &err) == nullptr);
  CHECK(err.find('\n') == std::string::npos && err.find("line\\x0abreak.gguf") != std::string::npos);
}

// --- split models ------------------------------------------------------------

namespace {

struct ShardSpec {
  int64_t no = 0, count = 3, tensors_count = 3;
  bool write_no = true;
  const char* tensor = nullptr;  // tensor name in this shard
};

GgufWriter shard_writer(const ShardSpec& s) {
  GgufWriter w;
  if (s.no == 0) {
    w.add_string("general.architecture", "tiny");
    w.add_u32("tiny.block_count", 1);
  }
  if (s.write_no) w.add_u16("split.no", static_cast<uint16_t>(s.no));
  w.add_u16("split.count", static_cast<uint16_t>(s.count));
  w.add_i32("split.tensors.count", static_cast<int32_t>(s.tensors_count));
  const int64_t ne[] = {8};
  std::vector<uint8_t> data(32);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(s.no * 50 + k);
  std::string err;
  w.add_tensor(s.tensor ? s.tensor : ("t" + std::to_string(s.no)).c_str(), id(TensorType::F32), ne, data, &err);
  return w;
}

std::string shard_name(const std::string& sub, int k, int count = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/m-%05d-of-%05d.gguf", k, count);
  return dir() + "/" + sub + buf;
}

// Writes a 3-shard model into its own subdirectory, letting `edit` change
// shard k's spec (or drop it by returning false).
template <typename Edit>
void write_split(const std::string& sub, Edit edit) {
  std::filesystem::remove_all(dir() + "/" + sub);
  std::filesystem::create_directories(dir() + "/" + sub);
  for (int k = 0; k < 3; ++k) {
    ShardSpec s;
    s.no = k;
    if (!edit(k, s)) continue;
    std::string err;
    const bool ok = shard_writer(s).write(shard_name(sub, k + 1), &err);
    CHECK_MSG(ok, "%s", err.c_str());
  }
}

}  // namespace

TEST(split_valid_set_opens_from_every_shard) {
  write_split("split_ok", [](int, ShardSpec&) { return true; });
  for (int k = 1; k <= 3; ++k) {
    std::string err;
    auto m = ModelFiles::open(shard_name("split_ok", k), &err);
    CHECK_MSG(m != nullptr, "%s", err.c_str());
    if (!m) continue;
    CHECK(m->shards().size() == 3 && m->tensors().size() == 3);
    CHECK(m->get_string("general.architecture") == std::optional<std::string_view>("tiny"));
    const TensorInfo* t2 = m->find_tensor("t2");
    CHECK(t2 != nullptr && t2->shard == 2 && t2->data[0] == 100);
  }
}

TEST(split_problems) {
  write_split("split_missing", [](int k, ShardSpec&) { return k != 1; });
  for (int k : {1, 3}) {
    const std::string what = "missing shard via " + std::to_string(k);
    expect_model_reject(shard_name("split_missing", k), "cannot open shard 2 of 3", what.c_str());
    std::string err;
    ModelFiles::open(shard_name("split_missing", k), &err);
    CHECK_MSG(err.find(shard_name("split_missing", 2) + ": cannot open: No such file or directory") != std::string::npos,
              "%s", err.c_str());
  }
  // Shard 1 missing, opened through shard 3.
  write_split("split_missing_first", [](int k, ShardSpec&) { return k != 0; });
  expect_model_reject(shard_name("split_missing_first", 3), "cannot open shard 1 of 3", "missing first shard");

  write_split("split_wrong_no", [](int k, ShardSpec& s) {
    if (k == 1) s.no = 2;
    return true;
  });
  // Shard 2's file claims to be shard 3: opening it directly trips the name
  // check, opening shard 1 trips the split.no check.
  expect_model_reject(shard_name("split_wrong_no", 1), "shard 2 of 3", "wrong split.no");
  std::string err;
  ModelFiles::open(shard_name("split_wrong_no", 1), &err);
  CHECK_MSG(err.find("split.no is 2, expected 1") != std::string::npos, "%s", err.c_str());
  expect_model_reject(shard_name("split_wrong_no", 2), "does not end in '-00003-of-00003.gguf'", "wrong split.no direct");

  write_split("split_wrong_count", [](int k, ShardSpec& s) {
    if (k == 2) s.count = 4;
    return true;
  });
  expect_model_reject(shard_name("split_wrong_count", 1), "split.count is 4, expected 3", "wrong split.count");

  write_split("split_no_missing", [](int k, ShardSpec& s) {
    if (k == 2) s.write_no = false;
    return true;
  });
  expect_model_reject(shard_name("split_no_missing", 1), "split.no is missing", "split.no missing");

  write_split("split_tensor_count", [](int, ShardSpec& s) {
    s.tensors_count = 4;
    return true;
  });
  expect_model_reject(shard_name("split_tensor_count", 2), "split.tensors.count is 4", "split.tensors.count");

  write_split("split_dup_tensor", [](int k, ShardSpec& s) {
    if (k == 2) s.tensor = "t0";
    return true;
  });
  expect_model_reject(shard_name("split_dup_tensor", 1), "duplicate tensor name 't0' in shard 1 and shard 3",
                      "duplicate tensor across shards");

  // A broken shard: its own error is part of the message.
  write_split("split_truncated", [](int, ShardSpec&) { return true; });
  {
    const std::string p = shard_name("split_truncated", 3);
    std::string bytes = check::read_file(p);
    write_bytes(p, Bytes(bytes.begin(), bytes.begin() + 40));
  }
  expect_model_reject(shard_name("split_truncated", 1), "cannot open shard 3 of 3", "truncated shard");
  ModelFiles::open(shard_name("split_truncated", 1), &err);
  CHECK_MSG(err.find(shard_name("split_truncated", 3) + ": truncated file") != std::string::npos, "%s", err.c_str());
  // n_kv = 3 needs at least 42 bytes after the header.
  CHECK_MSG(err.find("metadata entry count 3 needs at least 42 bytes (14 per entry) but only 16 bytes follow the header") !=
                std::string::npos,
            "%s", err.c_str());

  // A shard under a name that does not follow the pattern.
  write_split("split_renamed", [](int, ShardSpec&) { return true; });
  std::filesystem::rename(shard_name("split_renamed", 1), dir() + "/split_renamed/model.gguf");
  expect_model_reject(dir() + "/split_renamed/model.gguf", "does not end in '-00001-of-00003.gguf'", "renamed shard");

  // Split keys of the wrong type or range.
  GgufWriter w = shard_writer(ShardSpec{});
  w.add_string("split.count", "3");
  const std::string p = dir() + "/split_count_string.gguf";
  REQUIRE(w.write(p, &err));
  expect_model_reject(p, "split.count has type string, expected an integer", "split.count string");
  w = shard_writer(ShardSpec{});
  w.add_u16("split.no", 5);
  REQUIRE(w.write(p, &err));
  expect_model_reject(p, "split.no 5 is outside 0..2", "split.no out of range");
  w = shard_writer(ShardSpec{});
  w.add_i32("split.count", -2);
  REQUIRE(w.write(p, &err));
  expect_model_reject(p, "split.count -2 is negative", "negative split.count");
  w = shard_writer(ShardSpec{});
  w.add_u32("split.count", 70000);
  REQUIRE(w.write(p, &err));
  expect_model_reject(p, "exceeds the limit of 65535", "huge split.count");
  w = shard_writer(ShardSpec{});
  w.add_u16("split.count", 1);
  w.add_u16("split.no", 2);
  REQUIRE(w.write(p, &err));
  expect_model_reject(p, "split.no is 2 but the file is not split", "split.no without split");
  // split.count 1 with split.no 0 is a plain file.
  w = shard_writer(ShardSpec{});
  w.add_u16("split.count", 1);
  w.add_i32("split.tensors.count", 1);
  REQUIRE(w.write(p, &err));
  auto single = ModelFiles::open(p, &err);
  CHECK_MSG(single != nullptr && single->shards().size() == 1, "%s", err.c_str());
}

// Reads every byte the parsed structure points at, so ASan sees any view that
// escapes the mapping.
uint64_t touch_value(const MetaValue& v) {
  uint64_t sum = v.u + static_cast<uint64_t>(v.i);
  for (char c : v.str) sum += static_cast<uint8_t>(c);
  if (v.array) {
    const MetaArray& a = *v.array;
    for (uint64_t k = 0; k < a.count; ++k) {
      int64_t i = 0;
      double d = 0;
      if (a.get_i64(k, &i)) sum += static_cast<uint64_t>(i);
      if (a.get_f64(k, &d)) sum += d != 0;
    }
    for (std::string_view s : a.strings)
      for (char c : s) sum += static_cast<uint8_t>(c);
    for (const MetaValue& n : a.nested) sum += touch_value(n);
  }
  return sum;
}

uint64_t touch_all(const GgufFile& f) {
  uint64_t sum = 0;
  for (const auto& [key, value] : f.metadata()) sum += key.size() + touch_value(value);
  for (const TensorInfo& t : f.tensors())
    if (t.nbytes > 0) sum += t.data[0] + t.data[t.nbytes - 1];
  return sum;
}

// base_writer() plus every scalar type and nested arrays, for the mutations.
Bytes rich_bytes() {
  GgufWriter w = base_writer();
  w.add_u8("r.u8", 1);
  w.add_i8("r.i8", -1);
  w.add_u16("r.u16", 2);
  w.add_i16("r.i16", -2);
  w.add_i32("r.i32", -3);
  w.add_u64("r.u64", 4);
  w.add_i64("r.i64", -4);
  w.add_f64("r.f64", 0.5);
  w.add("r.i16s", GgufValue::i16_array(std::vector<int16_t>{1, -1}));
  w.add("r.f64s", GgufValue::f64_array(std::vector<double>{1.0}));
  const std::vector<std::string_view> ab = {"a", "b"};
  const GgufValue inner[] = {GgufValue::string_array(std::span<const std::string_view>(ab)),
                             GgufValue::array_of(ValueType::STRING, {})};
  const GgufValue outer[] = {GgufValue::array_of(ValueType::ARRAY, inner)};
  w.add("r.nested", GgufValue::array_of(ValueType::ARRAY, outer));
  return w.to_bytes();
}

// Random corruption of the structure bytes: the reader either accepts the
// file (then every tensor lies inside it) or rejects it with one line. Mostly
// a target for ASan/UBSan.
TEST(random_mutations) {
  for (const Bytes& base : {base_bytes(), rich_bytes()}) {
    std::string err;
    auto ref = GgufFile::open(write_bytes(dir() + "/base.gguf", base), &err);
    REQUIRE(ref != nullptr);
    const size_t structure = ref->data_offset();
    std::mt19937_64 rng(12345);
    const std::string path = dir() + "/mutated.gguf";
    int accepted = 0, rejected = 0;
    uint64_t touched = 0;
    for (int iter = 0; iter < 3000; ++iter) {
      Bytes b = base;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && b.size() > 24; ++e) {
        const size_t pos = rng() % std::min(structure, b.size());
        switch (rng() % 4) {
          case 0: b[pos] = static_cast<uint8_t>(rng()); break;
          case 1: b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
          case 2: b[pos] = 0xFF; break;
          default: b.resize(pos + (rng() % (b.size() - pos))); break;  // pos < size, so no % 0
        }
      }
      write_bytes(path, b);
      auto f = GgufFile::open(path, &err);
      if (f) {
        ++accepted;
        for (const TensorInfo& t : f->tensors())
          CHECK(t.data >= f->mapping() && t.data + t.nbytes <= f->mapping() + f->file_size());
        touched += touch_all(*f);
      } else {
        ++rejected;
        check_message(path, err, "mutation");
      }
      auto m = ModelFiles::open(path, &err);
      if (!m) check_message(path, err, "mutation (ModelFiles)");
    }
    std::printf("  random mutations: %d accepted, %d rejected (checksum %llu)\n", accepted, rejected,
                static_cast<unsigned long long>(touched));
    CHECK(rejected > 1000);
  }
}

// A file cut short while it is mapped (what `cp other.gguf served.gguf`
// does first): reads of the pages that are gone must not kill the process
// (SIGBUS). The guard answers them with zeros and records the fault; the
// file reports itself changed. In a child: without the guard SIGBUS kills it.
TEST(file_truncated_while_mapped_is_survived) {
  GgufWriter w = base_writer();
  std::string err;
  const int64_t ne_big[] = {32, 512};  // 17 KiB: several pages past the header
  const Bytes big(512 * 34, 0x5A);
  REQUIRE(w.add_tensor("w.big", id(TensorType::Q8_0), ne_big, big, &err));
  const std::string path = write_bytes(dir() + "/truncated-while-mapped.gguf", w.to_bytes());
  const std::string report = model_file_edit::in_child([&]() -> std::string {
    std::string e;
    auto f = GgufFile::open(path, &e);
    if (!f) return "open failed: " + e;
    const TensorInfo* t = nullptr;
    for (const TensorInfo& x : f->tensors())
      if (x.name == "w.big") t = &x;
    if (!t) return "no w.big";
    if (f->changed_on_disk()) return "changed before anything happened";
    if (f->read_faulted()) return "faulted before anything happened";
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
    if (fd < 0) return "cannot truncate";
    ::close(fd);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < t->nbytes; i += 512) sum += t->data[i];  // every page of the tensor
    if (sum != 0) return "read " + std::to_string(sum) + " instead of zeros";
    if (!f->read_faulted()) return "the fault was not recorded";
    std::string why;
    if (!f->changed_on_disk(&why) || why.empty()) return "not reported as changed";
    return "";
  });
  CHECK_MSG(report.empty(), "%s", report.c_str());
}

// Faults outside any model mapping still take their normal course: the
// guard chains to the previous handler (here the default: death by SIGBUS).
TEST(sigbus_elsewhere_is_not_swallowed) {
  std::string err;
  const std::string path = write_bytes(dir() + "/guard-installed.gguf", base_bytes());
  auto f = GgufFile::open(path, &err);  // installs the guard in this process
  REQUIRE(f);
  const std::string other = dir() + "/not-a-model.bin";
  write_bytes(other, Bytes(8192, 1));
  const std::string report = model_file_edit::in_child([&]() -> std::string {
    const int fd = ::open(other.c_str(), O_RDWR);
    if (fd < 0) return "cannot open";
    auto* p = static_cast<volatile uint8_t*>(::mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED) return "cannot map";
    if (::ftruncate(fd, 0) != 0) return "cannot truncate";
    const uint8_t v = p[4096];  // SIGBUS: not a model mapping
    return "survived a fault outside every model mapping (read " + std::to_string(v) + ")";
  });
  // Killed by SIGBUS, or (under AddressSanitizer, whose handler came first)
  // reported and ended by it.
  const bool died = report.rfind("child killed by signal", 0) == 0 || report.rfind("child exited with status", 0) == 0;
  CHECK_MSG(died, "%s", report.c_str());
}
