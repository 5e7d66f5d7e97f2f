// A small GGUF v3 writer: metadata of every value type (nested arrays too) and
// tensors, laid out the way llama.cpp's writers do it (infos, padding to the
// alignment, each tensor's data padded to the alignment). Used by tests to
// craft files, by the synthetic-model generator and by `guild pack`.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/gguf.h"

namespace guild::gguf {

// One metadata value, already encoded: its type tag and the little-endian
// bytes that follow the tag in a file. Arrays nest by encoding their elements.
class GgufValue {
 public:
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string_view v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f64(double v);

  static GgufValue u8_array(std::span<const uint8_t> v);
  static GgufValue i8_array(std::span<const int8_t> v);
  static GgufValue u16_array(std::span<const uint16_t> v);
  static GgufValue i16_array(std::span<const int16_t> v);
  static GgufValue u32_array(std::span<const uint32_t> v);
  static GgufValue i32_array(std::span<const int32_t> v);
  static GgufValue f32_array(std::span<const float> v);
  static GgufValue u64_array(std::span<const uint64_t> v);
  static GgufValue i64_array(std::span<const int64_t> v);
  static GgufValue f64_array(std::span<const double> v);
  static GgufValue bool_array(const std::vector<bool>& v);
  static GgufValue string_array(std::span<const std::string> v);
  static GgufValue string_array(std::span<const std::string_view> v);
  // An array whose elements are the given values; each must have type
  // elem_type (std::invalid_argument otherwise: a programming error). Use it
  // for arrays of arrays, and for empty arrays of any element type.
  static GgufValue array_of(ValueType elem_type, std::span<const GgufValue> elems);
  // The same value as one read from a file (arrays of every kind, nested
  // too): copying a file's metadata, e.g. to write an edited copy of it.
  static GgufValue from_meta(const MetaValue& v);

  ValueType type() const { return type_; }
  const std::vector<uint8_t>& payload() const { return payload_; }

 private:
  explicit GgufValue(ValueType t) : type_(t) {}
  ValueType type_;
  std::vector<uint8_t> payload_;
};

class GgufWriter {
 public:
  // Metadata, written in insertion order. Adding a key that exists replaces
  // its value in place (a file never gets duplicate keys from the writer).
  void add(std::string_view key, GgufValue value);
  void add_u8(std::string_view key, uint8_t v) { add(key, GgufValue::u8(v)); }
  void add_i8(std::string_view key, int8_t v) { add(key, GgufValue::i8(v)); }
  void add_u16(std::string_view key, uint16_t v) { add(key, GgufValue::u16(v)); }
  void add_i16(std::string_view key, int16_t v) { add(key, GgufValue::i16(v)); }
  void add_u32(std::string_view key, uint32_t v) { add(key, GgufValue::u32(v)); }
  void add_i32(std::string_view key, int32_t v) { add(key, GgufValue::i32(v)); }
  void add_f32(std::string_view key, float v) { add(key, GgufValue::f32(v)); }
  void add_bool(std::string_view key, bool v) { add(key, GgufValue::boolean(v)); }
  void add_string(std::string_view key, std::string_view v) { add(key, GgufValue::string(v)); }
  void add_u64(std::string_view key, uint64_t v) { add(key, GgufValue::u64(v)); }
  void add_i64(std::string_view key, int64_t v) { add(key, GgufValue::i64(v)); }
  void add_f64(std::string_view key, double v) { add(key, GgufValue::f64(v)); }
  void add_string_array(std::string_view key, std::span<const std::string> v) { add(key, GgufValue::string_array(v)); }
  bool has_key(std::string_view key) const;

  // Writes general.alignment (u32). It must be a nonzero power of two; the
  // writer pads with it. Without it, the GGUF default of 32 is used.
  bool set_alignment(uint32_t alignment, std::string* error);
  uint64_t alignment() const;

  // A tensor whose bytes match its type and shape (n_dims 1..4, ne >= 0,
  // ne[0] a whole number of blocks, known type, unique name); false and
  // *error otherwise. add_tensor copies the bytes; add_tensor_ref keeps only
  // a view, which must stay valid until write()/to_bytes() has returned.
  bool add_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                  std::span<const uint8_t> data, std::string* error);
  bool add_tensor_ref(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                      std::span<const uint8_t> data, std::string* error);
  // Writes the tensor info exactly as given (any n_dims, ne, type id, name)
  // with `data` as its bytes: for crafting invalid files in tests.
  void add_raw_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                      std::span<const uint8_t> data);
  // A tensor whose bytes are produced while the file is written (streaming
  // mode, for files too large to hold in memory): only its name, type and
  // shape are recorded here; write_streamed() asks a RowProducer for them.
  bool add_tensor_streamed(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                           std::string* error);
  size_t n_tensors() const { return tensors_.size(); }

  // The whole file in memory (tests do byte surgery on it). Empty when a
  // tensor was added with add_tensor_streamed (use write_streamed).
  std::vector<uint8_t> to_bytes() const;
  // Writes the file (through a temporary next to it, renamed on success).
  // Fails for a writer holding streamed tensors (use write_streamed).
  bool write(const std::string& path, std::string* error) const;

  // produce(tensor, first_row, n_rows, dst): fill rows [first_row, first_row +
  // n_rows) of tensor number `tensor` (in add order; a row is ne[0] elements,
  // rows run over ne[1..3]) into dst; false aborts the write. Called from
  // several threads at once, for disjoint row ranges, in no particular order.
  using RowProducer = std::function<bool(size_t tensor, int64_t first_row, int64_t n_rows, uint8_t* dst)>;
  // Streaming write: the header and infos first, then the streamed tensors'
  // bytes range by range (about chunk_bytes each) from n_threads threads, each
  // range written with pwrite at its final place, so memory use is
  // n_threads * chunk_bytes whatever the file size. Tensors added with bytes
  // are written as they are. Through a temporary file renamed on success.
  bool write_streamed(const std::string& path, const RowProducer& produce, int n_threads, uint64_t chunk_bytes,
                      std::string* error) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<int64_t> ne;
    bool is_owned = false;
    std::vector<uint8_t> owned;     // the bytes, when is_owned
    std::span<const uint8_t> view;  // the caller's bytes, otherwise
    bool is_streamed = false;       // bytes come from a RowProducer
    uint64_t streamed_bytes = 0;    // their size, when is_streamed
    std::span<const uint8_t> bytes() const { return is_owned ? std::span<const uint8_t>(owned) : view; }
    uint64_t size() const { return is_streamed ? streamed_bytes : bytes().size(); }
  };
  bool has_streamed() const;
  // Header, metadata and tensor infos, padded to the alignment.
  std::vector<uint8_t> header() const;
  bool check_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne, uint64_t data_bytes,
                    std::string* error) const;
  template <typename Sink>
  bool emit(Sink&& sink) const;

  std::vector<std::pair<std::string, GgufValue>> meta_;
  std::vector<Tensor> tensors_;
};

}  // namespace guild::gguf
