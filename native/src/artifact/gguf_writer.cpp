#include "artifact/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/tensor_type.h"

namespace guild::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF writer assumes a little-endian host");

namespace {

constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

// --- GgufValue --------------------------------------------------------------

#define GUILD_GGUF_SCALAR(fn, T, TAG)          \
  GgufValue GgufValue::fn(T v) {               \
    GgufValue g(ValueType::TAG);               \
    put<T>(g.payload_, v);                     \
    return g;                                  \
  }
GUILD_GGUF_SCALAR(u8, uint8_t, U8)
GUILD_GGUF_SCALAR(i8, int8_t, I8)
GUILD_GGUF_SCALAR(u16, uint16_t, U16)
GUILD_GGUF_SCALAR(i16, int16_t, I16)
GUILD_GGUF_SCALAR(u32, uint32_t, U32)
GUILD_GGUF_SCALAR(i32, int32_t, I32)
GUILD_GGUF_SCALAR(f32, float, F32)
GUILD_GGUF_SCALAR(u64, uint64_t, U64)
GUILD_GGUF_SCALAR(i64, int64_t, I64)
GUILD_GGUF_SCALAR(f64, double, F64)
#undef GUILD_GGUF_SCALAR

GgufValue GgufValue::boolean(bool v) {
  GgufValue g(ValueType::BOOL);
  put<uint8_t>(g.payload_, v ? 1 : 0);
  return g;
}

GgufValue GgufValue::string(std::string_view v) {
  GgufValue g(ValueType::STRING);
  put_string(g.payload_, v);
  return g;
}

// Numeric arrays: element type, count, then the packed elements.
#define GUILD_GGUF_ARRAY(fn, T, TAG)                                      \
  GgufValue GgufValue::fn(std::span<const T> v) {                         \
    GgufValue g(ValueType::ARRAY);                                        \
    put<uint32_t>(g.payload_, static_cast<uint32_t>(ValueType::TAG));     \
    put<uint64_t>(g.payload_, v.size());                                  \
    for (T x : v) put<T>(g.payload_, x);                                  \
    return g;                                                             \
  }
GUILD_GGUF_ARRAY(u8_array, uint8_t, U8)
GUILD_GGUF_ARRAY(i8_array, int8_t, I8)
GUILD_GGUF_ARRAY(u16_array, uint16_t, U16)
GUILD_GGUF_ARRAY(i16_array, int16_t, I16)
GUILD_GGUF_ARRAY(u32_array, uint32_t, U32)
GUILD_GGUF_ARRAY(i32_array, int32_t, I32)
GUILD_GGUF_ARRAY(f32_array, float, F32)
GUILD_GGUF_ARRAY(u64_array, uint64_t, U64)
GUILD_GGUF_ARRAY(i64_array, int64_t, I64)
GUILD_GGUF_ARRAY(f64_array, double, F64)
#undef GUILD_GGUF_ARRAY

GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  GgufValue g(ValueType::ARRAY);
  put<uint32_t>(g.payload_, static_cast<uint32_t>(ValueType::BOOL));
  put<uint64_t>(g.payload_, v.size());
  for (bool x : v) put<uint8_t>(g.payload_, x ? 1 : 0);
  return g;
}

GgufValue GgufValue::string_array(std::span<const std::string> v) {
  GgufValue g(ValueType::ARRAY);
  put<uint32_t>(g.payload_, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(g.payload_, v.size());
  for (const std::string& s : v) put_string(g.payload_, s);
  return g;
}

GgufValue GgufValue::string_array(std::span<const std::string_view> v) {
  GgufValue g(ValueType::ARRAY);
  put<uint32_t>(g.payload_, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(g.payload_, v.size());
  for (std::string_view s : v) put_string(g.payload_, s);
  return g;
}

GgufValue GgufValue::array_of(ValueType elem_type, std::span<const GgufValue> elems) {
  GgufValue g(ValueType::ARRAY);
  put<uint32_t>(g.payload_, static_cast<uint32_t>(elem_type));
  put<uint64_t>(g.payload_, elems.size());
  // An element's encoding inside an array is its payload without a type tag.
  for (const GgufValue& e : elems) {
    if (e.type() != elem_type)
      throw std::invalid_argument("GgufValue::array_of: element of type " + std::string(value_type_name(e.type())) +
                                  " in an array of " + std::string(value_type_name(elem_type)));
    g.payload_.insert(g.payload_.end(), e.payload_.begin(), e.payload_.end());
  }
  return g;
}

GgufValue GgufValue::from_meta(const MetaValue& v) {
  GgufValue g(v.type);
  switch (v.type) {
    case ValueType::U8: put<uint8_t>(g.payload_, static_cast<uint8_t>(v.u)); break;
    case ValueType::BOOL: put<uint8_t>(g.payload_, static_cast<uint8_t>(v.u)); break;
    case ValueType::U16: put<uint16_t>(g.payload_, static_cast<uint16_t>(v.u)); break;
    case ValueType::U32: put<uint32_t>(g.payload_, static_cast<uint32_t>(v.u)); break;
    case ValueType::U64: put<uint64_t>(g.payload_, v.u); break;
    case ValueType::I8: put<int8_t>(g.payload_, static_cast<int8_t>(v.i)); break;
    case ValueType::I16: put<int16_t>(g.payload_, static_cast<int16_t>(v.i)); break;
    case ValueType::I32: put<int32_t>(g.payload_, static_cast<int32_t>(v.i)); break;
    case ValueType::I64: put<int64_t>(g.payload_, v.i); break;
    case ValueType::F32: put<float>(g.payload_, static_cast<float>(v.f)); break;
    case ValueType::F64: put<double>(g.payload_, v.f); break;
    case ValueType::STRING: put_string(g.payload_, v.str); break;
    case ValueType::ARRAY: {
      const MetaArray& a = *v.array;
      if (a.elem_type == ValueType::ARRAY) {
        std::vector<GgufValue> elems;
        elems.reserve(a.nested.size());
        for (const MetaValue& e : a.nested) elems.push_back(from_meta(e));
        return array_of(ValueType::ARRAY, elems);
      }
      put<uint32_t>(g.payload_, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(g.payload_, a.count);
      if (a.elem_type == ValueType::STRING) {
        for (std::string_view s : a.strings) put_string(g.payload_, s);
      } else {
        // Fixed-size elements are kept packed in the file: copy them as they are.
        uint64_t size = 1;
        switch (a.elem_type) {
          case ValueType::U16: case ValueType::I16: size = 2; break;
          case ValueType::U32: case ValueType::I32: case ValueType::F32: size = 4; break;
          case ValueType::U64: case ValueType::I64: case ValueType::F64: size = 8; break;
          default: size = 1; break;
        }
        if (a.count > 0) g.payload_.insert(g.payload_.end(), a.raw, a.raw + a.count * size);
      }
      break;
    }
  }
  return g;
}

// --- GgufWriter -------------------------------------------------------------

void GgufWriter::add(std::string_view key, GgufValue value) {
  for (auto& [k, v] : meta_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  meta_.emplace_back(std::string(key), std::move(value));
}

bool GgufWriter::has_key(std::string_view key) const {
  for (const auto& kv : meta_)
    if (kv.first == key) return true;
  return false;
}

bool GgufWriter::set_alignment(uint32_t alignment, std::string* error) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    if (error) *error = "alignment " + std::to_string(alignment) + " is not a nonzero power of two";
    return false;
  }
  add_u32("general.alignment", alignment);
  return true;
}

uint64_t GgufWriter::alignment() const {
  // A general.alignment that the reader would reject (wrong type, not a power
  // of two) only happens in crafted test files; pad with the default then.
  for (const auto& [k, v] : meta_) {
    if (k != "general.alignment" || v.type() != ValueType::U32) continue;
    uint32_t a = 0;
    std::memcpy(&a, v.payload().data(), 4);
    if (a != 0 && std::has_single_bit(a)) return a;
  }
  return kDefaultAlignment;
}

bool GgufWriter::check_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                              uint64_t data_bytes, std::string* error) const {
  auto fail = [&](const std::string& problem) {
    if (error) *error = "tensor '" + std::string(name) + "': " + problem;
    return false;
  };
  if (name.empty()) return fail("empty name");
  if (name.size() > limits::kMaxTensorNameBytes) return fail("name too long");
  for (const Tensor& t : tensors_)
    if (t.name == name) return fail("duplicate tensor name");
  if (ne.empty() || ne.size() > limits::kMaxDims) return fail("n_dims " + std::to_string(ne.size()) + " is outside 1..4");
  const TensorTypeInfo& info = tensor_type_info(type_id);
  if (info.block_bytes == 0) return fail("unsupported tensor type id " + std::to_string(type_id));
  int64_t rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) return fail("negative dimension");
    if (d > 0 && __builtin_mul_overflow(rows, ne[d], &rows)) return fail("shape overflows int64");
  }
  uint64_t row_bytes = 0, total = 0;
  if (!tensor_row_bytes(type_id, static_cast<uint64_t>(ne[0]), &row_bytes))
    return fail("ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the block size " +
                std::to_string(info.block_elems));
  if (__builtin_mul_overflow(row_bytes, static_cast<uint64_t>(rows), &total)) return fail("size overflows");
  if (total != data_bytes)
    return fail("has " + std::to_string(data_bytes) + " bytes of data, its shape and type need " + std::to_string(total));
  return true;
}

bool GgufWriter::add_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                            std::span<const uint8_t> data, std::string* error) {
  if (!check_tensor(name, type_id, ne, data.size(), error)) return false;
  Tensor t{std::string(name), type_id, std::vector<int64_t>(ne.begin(), ne.end()), true,
           std::vector<uint8_t>(data.begin(), data.end()), {}};
  tensors_.push_back(std::move(t));
  return true;
}

bool GgufWriter::add_tensor_ref(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                                std::span<const uint8_t> data, std::string* error) {
  if (!check_tensor(name, type_id, ne, data.size(), error)) return false;
  tensors_.push_back(Tensor{std::string(name), type_id, std::vector<int64_t>(ne.begin(), ne.end()), false, {}, data});
  return true;
}

bool GgufWriter::add_tensor_streamed(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                                     std::string* error) {
  // The size the shape needs (check_tensor validates the shape first).
  uint64_t row_bytes = 0, rows = 1;
  const bool shape_ok = !ne.empty() && ne.size() <= limits::kMaxDims && ne[0] >= 0 &&
                        tensor_row_bytes(type_id, static_cast<uint64_t>(ne[0]), &row_bytes);
  for (size_t d = 1; shape_ok && d < ne.size(); ++d) rows *= static_cast<uint64_t>(std::max<int64_t>(ne[d], 0));
  const uint64_t bytes = shape_ok ? row_bytes * rows : 0;
  if (!check_tensor(name, type_id, ne, bytes, error)) return false;
  Tensor t{std::string(name), type_id, std::vector<int64_t>(ne.begin(), ne.end()), false, {}, {}};
  t.is_streamed = true;
  t.streamed_bytes = bytes;
  tensors_.push_back(std::move(t));
  return true;
}

bool GgufWriter::has_streamed() const {
  for (const Tensor& t : tensors_)
    if (t.is_streamed) return true;
  return false;
}

void GgufWriter::add_raw_tensor(std::string_view name, uint32_t type_id, std::span<const int64_t> ne,
                                std::span<const uint8_t> data) {
  tensors_.push_back(Tensor{std::string(name), type_id, std::vector<int64_t>(ne.begin(), ne.end()), true,
                            std::vector<uint8_t>(data.begin(), data.end()), {}});
}

std::vector<uint8_t> GgufWriter::header() const {
  const uint64_t align = alignment();
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, meta_.size());
  for (const auto& [key, value] : meta_) {
    put_string(head, key);
    put<uint32_t>(head, static_cast<uint32_t>(value.type()));
    head.insert(head.end(), value.payload().begin(), value.payload().end());
  }
  // Each tensor starts at a multiple of the alignment inside the data section.
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<int64_t>(head, d);
    put<uint32_t>(head, t.type);
    put<uint64_t>(head, offset);
    offset += align_up(t.size(), align);
  }
  head.resize(align_up(head.size(), align), 0);
  return head;
}

// Produces the file as a sequence of chunks: header, metadata and tensor
// infos in one buffer, then each tensor's bytes and padding. sink(ptr, n)
// returns false to stop. Not for writers with streamed tensors.
template <typename Sink>
bool GgufWriter::emit(Sink&& sink) const {
  const uint64_t align = alignment();
  const std::vector<uint8_t> head = header();
  if (!sink(head.data(), head.size())) return false;
  static const uint8_t zeros[256] = {};
  for (const Tensor& t : tensors_) {
    const std::span<const uint8_t> bytes = t.bytes();
    if (!bytes.empty() && !sink(bytes.data(), bytes.size())) return false;
    uint64_t pad = align_up(bytes.size(), align) - bytes.size();
    while (pad > 0) {
      const uint64_t n = pad < sizeof zeros ? pad : sizeof zeros;
      if (!sink(zeros, n)) return false;
      pad -= n;
    }
  }
  return true;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  if (has_streamed()) return out;
  emit([&](const uint8_t* p, uint64_t n) {
    out.insert(out.end(), p, p + n);
    return true;
  });
  return out;
}

bool GgufWriter::write(const std::string& path, std::string* error) const {
  if (has_streamed()) {
    if (error) *error = path + ": the writer holds streamed tensors; use write_streamed";
    return false;
  }
  const std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    if (error) *error = tmp + ": cannot create: " + std::strerror(errno);
    return false;
  }
  int write_errno = 0;
  const bool ok = emit([&](const uint8_t* p, uint64_t n) {
    if (std::fwrite(p, 1, n, f) == n) return true;
    write_errno = errno;
    return false;
  });
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    if (error) *error = tmp + ": write failed: " + std::strerror(write_errno ? write_errno : errno);
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = path + ": cannot rename the finished file into place: " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

namespace {

bool pwrite_all(int fd, const uint8_t* p, uint64_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

}  // namespace

bool GgufWriter::write_streamed(const std::string& path, const RowProducer& produce, int n_threads,
                                uint64_t chunk_bytes, std::string* error) const {
  const uint64_t align = alignment();
  const std::vector<uint8_t> head = header();
  // Work list: (tensor, first row, rows) ranges of about chunk_bytes.
  struct Range { size_t tensor; int64_t row0, rows; uint64_t file_offset, bytes; };
  std::vector<Range> ranges;
  uint64_t offset = head.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.is_streamed && t.streamed_bytes > 0) {
      int64_t rows = 1;
      for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
      const uint64_t row_bytes = t.streamed_bytes / static_cast<uint64_t>(rows);
      const int64_t per = static_cast<int64_t>(std::max<uint64_t>(1, chunk_bytes / std::max<uint64_t>(1, row_bytes)));
      for (int64_t r = 0; r < rows; r += per) {
        const int64_t n = std::min(per, rows - r);
        ranges.push_back({i, r, n, offset + static_cast<uint64_t>(r) * row_bytes, static_cast<uint64_t>(n) * row_bytes});
      }
    }
    offset += align_up(t.size(), align);
  }
  const uint64_t file_size = offset;

  const std::string tmp = path + ".partial";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = tmp + ": cannot create: " + std::strerror(errno);
    return false;
  }
  std::string problem;
  auto fail = [&](const std::string& what) {
    if (error) *error = tmp + ": " + what;
    ::close(fd);
    std::remove(tmp.c_str());
    return false;
  };
  // Padding between tensors stays zero: the file is extended first.
  if (::ftruncate(fd, static_cast<off_t>(file_size)) != 0) return fail(std::string("cannot size the file: ") + std::strerror(errno));
  if (!pwrite_all(fd, head.data(), head.size(), 0)) return fail(std::string("write failed: ") + std::strerror(errno));
  offset = head.size();
  for (const Tensor& t : tensors_) {
    if (!t.is_streamed && !t.bytes().empty() && !pwrite_all(fd, t.bytes().data(), t.bytes().size(), offset))
      return fail(std::string("write failed: ") + std::strerror(errno));
    offset += align_up(t.size(), align);
  }

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex problem_mutex;
  auto worker = [&] {
    std::vector<uint8_t> buf;
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= ranges.size() || failed.load()) return;
      const Range& r = ranges[i];
      buf.resize(r.bytes);
      std::string why;
      if (!produce(r.tensor, r.row0, r.rows, buf.data())) why = "the producer failed for tensor '" + tensors_[r.tensor].name + "'";
      else if (!pwrite_all(fd, buf.data(), r.bytes, r.file_offset)) why = std::string("write failed: ") + std::strerror(errno);
      if (!why.empty()) {
        std::lock_guard<std::mutex> lock(problem_mutex);
        if (problem.empty()) problem = why;
        failed.store(true);
        return;
      }
    }
  };
  const int n = std::max(1, n_threads);
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(worker);
  worker();
  for (auto& th : threads) th.join();
  if (failed.load()) return fail(problem);
  if (::close(fd) != 0) {
    if (error) *error = tmp + ": close failed: " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = path + ": cannot rename the finished file into place: " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace guild::gguf
