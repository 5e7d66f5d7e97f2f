// GGUF reader: versions 2 and 3, every metadata value type, tensor infos,
// general.alignment, the data section memory-mapped, split shards opened as
// one model. Every count, length, dimension, offset and byte range read from
// a file is checked against the file before use (docs/GGUF.md lists the checks).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace guild::gguf {

// Limits the reader enforces on top of "fits in the file" (docs/GGUF.md).
namespace limits {
inline constexpr uint64_t kMaxKeyBytes = 4096;              // metadata key length
inline constexpr uint64_t kMaxTensorNameBytes = 4096;       // tensor name length
inline constexpr uint64_t kMaxStringBytes = 256ull << 20;   // one string value / element
inline constexpr uint32_t kMaxArrayDepth = 8;               // array nesting (top-level array = 1)
inline constexpr uint32_t kMaxDims = 4;                     // tensor n_dims is 1..kMaxDims
inline constexpr uint64_t kMaxSplitCount = 65535;           // split.count (u16 in llama.cpp)
// The smallest possible encodings, used to bound counts by the bytes left.
inline constexpr uint64_t kMinMetaEntryBytes = 8 + 1 + 4 + 1;        // key len, 1-byte key, type, 1-byte value
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name len, name, n_dims, ne[0], type, offset
}  // namespace limits

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

struct MetaValue;

// An array value. Numeric/bool elements stay in the mapped file (raw, packed,
// little-endian); strings are views into the mapping; nested arrays are parsed.
struct MetaArray {
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;                 // numeric/bool elements
  std::vector<std::string_view> strings;        // STRING elements
  std::vector<MetaValue> nested;                // ARRAY elements

  // Element i converted; false if out of range or not convertible. get_i64
  // takes integer and bool elements (not a u64 above INT64_MAX); get_f64
  // takes every numeric and bool element. Strings and arrays: false.
  bool get_i64(uint64_t i, int64_t* out) const;
  bool get_f64(uint64_t i, double* out) const;
};

struct MetaValue {
  ValueType type = ValueType::U8;
  uint64_t u = 0;        // unsigned integer and bool types (also set for signed when >= 0)
  int64_t i = 0;         // signed integer types (also set for unsigned when it fits, and bool)
  double f = 0.0;        // float types (also set for integer and bool types)
  std::string_view str;  // STRING
  std::shared_ptr<MetaArray> array;  // ARRAY

  bool is_integer() const;
  bool is_float() const;
};

struct TensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the fastest-varying (row length)
  uint32_t type = 0;             // TensorType id (core/tensor_type.h)
  uint64_t offset = 0;           // relative to the shard's data section
  uint64_t nbytes = 0;           // validated: whole blocks, inside the file
  const uint8_t* data = nullptr; // in the shard's mapping
  uint32_t shard = 0;            // index of the shard that holds the data

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

// One mapped .gguf file.
class GgufFile {
 public:
  // Returns null and sets *error to one line naming the file and the problem.
  static std::unique_ptr<GgufFile> open(const std::string& path, std::string* error);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  // Start of the data section: the end of the tensor infos rounded up to
  // alignment(). A file without tensors may lack that padding; then this is
  // the file size.
  uint64_t data_offset() const { return data_offset_; }
  const uint8_t* mapping() const { return base_; }

  // Whether the bytes behind the mapping may no longer be the ones parsed at
  // open: the open file (same inode) now has another size or modification
  // time, or a read of the mapping faulted because the file shrank (the
  // fault was survived: artifact/mapping_guard.h). A file replaced by rename
  // is not a change: the mapping still holds the old, intact inode. One
  // fstat; fills *why (if given) with what differs.
  bool changed_on_disk(std::string* why = nullptr) const;
  // True once a read of the mapping faulted (the file shrank) and was
  // answered with zeros by the SIGBUS guard.
  bool read_faulted() const;

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, MetaValue>>& metadata() const { return meta_; }
  const MetaValue* find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  GgufFile() = default;
  friend class GgufParser;
  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  int64_t mtime_sec_ = 0, mtime_nsec_ = 0;  // at open
  int guard_slot_ = -1;                     // mapping_guard slot, -1 when unguarded
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, MetaValue>> meta_;
  std::unordered_map<std::string_view, size_t> meta_index_;
  std::vector<TensorInfo> tensors_;
};

// A model's GGUF files: one file, or the shards NAME-0000i-of-0000N.gguf found
// from any one of them (split.count / split.no checked; every shard must be
// present). Metadata comes from the first shard; tensors from all of them.
class ModelFiles {
 public:
  static std::unique_ptr<ModelFiles> open(const std::string& path, std::string* error);

  const GgufFile& primary() const { return *shards_.front(); }
  const std::vector<std::unique_ptr<GgufFile>>& shards() const { return shards_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const MetaValue* find(std::string_view key) const { return primary().find(key); }
  uint64_t file_bytes() const;  // sum of the shards' file sizes
  // The first shard that changed on disk since it was opened
  // (GgufFile::changed_on_disk): false and a one-line message
  // "model file X changed on disk since it was loaded (...); reload it".
  bool unchanged_on_disk(std::string* error) const;
  uint64_t total_bytes() const;  // sum of the tensors' data bytes

  // Typed metadata reads. They return nullopt when the key is absent and set
  // *error (if given) when present with the wrong type (or, for get_int, a u64
  // above INT64_MAX); *error is left alone otherwise.
  std::optional<std::string_view> get_string(std::string_view key, std::string* error = nullptr) const;
  std::optional<int64_t> get_int(std::string_view key, std::string* error = nullptr) const;  // any integer type
  std::optional<double> get_float(std::string_view key, std::string* error = nullptr) const; // float or integer
  std::optional<bool> get_bool(std::string_view key, std::string* error = nullptr) const;
  const MetaArray* get_array(std::string_view key, std::string* error = nullptr) const;

 private:
  std::vector<std::unique_ptr<GgufFile>> shards_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace guild::gguf
