// GGUF reader. The file is memory-mapped and parsed in place: every count,
// length, dimension, offset and byte range is checked against the bytes that
// are actually there before it is used, so a corrupt or hostile file produces
// a one-line error instead of a crash or a huge allocation. docs/GGUF.md lists
// the layout and every check.
#include "artifact/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_set>

#include "artifact/mapping_guard.h"
#include "core/tensor_type.h"

namespace guild::gguf {

// The reader loads little-endian fields with memcpy; a big-endian host would
// need byte swaps everywhere.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kValueTypeCount = 13;

std::string num(uint64_t v) { return std::to_string(v); }
std::string snum(int64_t v) { return std::to_string(v); }

// Text from the file (keys, names) or a caller's path, made safe to embed in a
// one-line message: control and non-ASCII bytes become \xNN and long text is cut.
std::string printable(std::string_view s, size_t max_chars = 96) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Paths are not cut: the message must name the file. Only escaped.
std::string printable_path(std::string_view path) { return printable(path, std::numeric_limits<size_t>::max()); }

std::string quoted(std::string_view s) { return "'" + printable(s) + "'"; }

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_known_type(uint32_t t) { return t < kValueTypeCount; }

// Encoded size of one element of a fixed-size type; 0 for STRING/ARRAY.
uint64_t fixed_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
  }
  return 0;
}

// Smallest encoding of one array element, to bound element counts by the
// bytes left: a string is at least its u64 length, an array its type + count.
uint64_t min_element_size(ValueType t) {
  if (t == ValueType::STRING) return 8;
  if (t == ValueType::ARRAY) return 4 + 8;
  return fixed_size(t);
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default:
      return false;
  }
}

bool is_signed_type(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

// Decodes one fixed-size scalar at p into every field of MetaValue that can
// represent it (see the field comments in gguf.h).
void decode_scalar(ValueType t, const uint8_t* p, MetaValue* v) {
  v->type = t;
  switch (t) {
    case ValueType::U8: v->u = load_le<uint8_t>(p); break;
    case ValueType::U16: v->u = load_le<uint16_t>(p); break;
    case ValueType::U32: v->u = load_le<uint32_t>(p); break;
    case ValueType::U64: v->u = load_le<uint64_t>(p); break;
    case ValueType::BOOL: v->u = load_le<uint8_t>(p); break;
    case ValueType::I8: v->i = load_le<int8_t>(p); break;
    case ValueType::I16: v->i = load_le<int16_t>(p); break;
    case ValueType::I32: v->i = load_le<int32_t>(p); break;
    case ValueType::I64: v->i = load_le<int64_t>(p); break;
    case ValueType::F32: v->f = load_le<float>(p); return;
    case ValueType::F64: v->f = load_le<double>(p); return;
    case ValueType::STRING: case ValueType::ARRAY: return;
  }
  if (is_signed_type(t)) {
    if (v->i >= 0) v->u = static_cast<uint64_t>(v->i);
    v->f = static_cast<double>(v->i);
  } else {
    if (v->u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) v->i = static_cast<int64_t>(v->u);
    v->f = static_cast<double>(v->u);
  }
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

bool MetaValue::is_integer() const { return is_integer_type(type); }
bool MetaValue::is_float() const { return type == ValueType::F32 || type == ValueType::F64; }

bool MetaArray::get_i64(uint64_t idx, int64_t* out) const {
  if (idx >= count || raw == nullptr) return false;
  if (!is_integer_type(elem_type) && elem_type != ValueType::BOOL) return false;
  MetaValue v;
  decode_scalar(elem_type, raw + idx * fixed_size(elem_type), &v);
  if (!is_signed_type(elem_type) && v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = v.i;
  return true;
}

bool MetaArray::get_f64(uint64_t idx, double* out) const {
  if (idx >= count || raw == nullptr) return false;
  if (elem_type == ValueType::STRING || elem_type == ValueType::ARRAY) return false;
  MetaValue v;
  decode_scalar(elem_type, raw + idx * fixed_size(elem_type), &v);
  *out = v.f;
  return true;
}

// Parses the mapped bytes of one GgufFile. Each failure stores the problem
// (without the path) in error() and makes parse() return false.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), p_(file.base_), size_(file.size_) {}

  bool parse() {
    return parse_header() && parse_metadata() && parse_alignment() && parse_tensor_infos() &&
           place_tensor_data();
  }
  const std::string& error() const { return error_; }

 private:
  bool fail(std::string problem) {
    error_ = std::move(problem);
    return false;
  }

  uint64_t left() const { return size_ - pos_; }

  // Checks that n more bytes exist for `what` (part of the current item).
  bool need(uint64_t n, const char* what) {
    if (n <= left()) return true;
    std::string end = (n > std::numeric_limits<uint64_t>::max() - pos_) ? "beyond byte 2^64" : "to byte " + num(pos_ + n);
    return fail("truncated file: " + ctx_ + ": " + what + " extends " + end + " but the file has " + num(size_) +
                " bytes");
  }

  bool read_u32(uint32_t* out, const char* what) {
    if (!need(4, what)) return false;
    *out = load_le<uint32_t>(p_ + pos_);
    pos_ += 4;
    return true;
  }
  bool read_u64(uint64_t* out, const char* what) {
    if (!need(8, what)) return false;
    *out = load_le<uint64_t>(p_ + pos_);
    pos_ += 8;
    return true;
  }

  // A GGUF string: u64 byte length, then the bytes (no terminator).
  bool read_string(std::string_view* out, uint64_t max_len, const char* what) {
    uint64_t len = 0;
    if (!read_u64(&len, what)) return false;
    if (len > max_len)
      return fail(ctx_ + ": " + what + " length " + num(len) + " exceeds the limit of " + num(max_len) + " bytes");
    if (!need(len, what)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return true;
  }

  bool parse_header() {
    ctx_ = "header";
    if (!need(4, "magic")) return false;
    if (std::memcmp(p_, "GGUF", 4) != 0) {
      std::string got;
      for (int k = 0; k < 4; ++k) {
        char b[4];
        std::snprintf(b, sizeof b, "%02x", p_[k]);
        got += (k ? " " : "");
        got += b;
      }
      return fail("not a GGUF file: the first bytes are " + got + ", expected 47 47 55 46 ('GGUF')");
    }
    pos_ = 4;
    uint32_t version = 0;
    if (!read_u32(&version, "version")) return false;
    if (version == 1)
      return fail("GGUF version 1 is not supported (it used 32-bit counts; only versions 2 and 3 are read)");
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3)
        return fail("big-endian GGUF files are not supported (version field reads " + num(version) + ")");
      return fail("unsupported GGUF version " + num(version) + " (only versions 2 and 3 are read)");
    }
    f_.version_ = version;
    if (!read_u64(&n_tensors_, "tensor count") || !read_u64(&n_kv_, "metadata entry count")) return false;

    // Every entry needs a minimum number of bytes, so the counts are bounded
    // by what is left; this also bounds every allocation sized by them.
    // A count that fails this is either a truncated file or a corrupt header;
    // the message cannot tell which.
    auto needs = [](uint64_t count, uint64_t each) {
      return count > std::numeric_limits<uint64_t>::max() / each ? std::string("more than 2^64")
                                                                : "at least " + num(count * each);
    };
    const uint64_t rest = left();
    if (n_kv_ > rest / limits::kMinMetaEntryBytes)
      return fail("truncated file or bad header: metadata entry count " + num(n_kv_) + " needs " +
                  needs(n_kv_, limits::kMinMetaEntryBytes) + " bytes (" + num(limits::kMinMetaEntryBytes) +
                  " per entry) but only " + num(rest) + " bytes follow the header");
    const uint64_t rest_after_kv = rest - n_kv_ * limits::kMinMetaEntryBytes;
    if (n_tensors_ > rest_after_kv / limits::kMinTensorInfoBytes)
      return fail("truncated file or bad header: tensor count " + num(n_tensors_) + " needs " +
                  needs(n_tensors_, limits::kMinTensorInfoBytes) + " bytes (" + num(limits::kMinTensorInfoBytes) +
                  " per tensor info) but at most " + num(rest_after_kv) + " bytes are left for them");
    return true;
  }

  // Reads a value of type t whose type tag has already been consumed.
  // depth = number of arrays enclosing this value.
  bool read_value(ValueType t, MetaValue* v, uint32_t depth) {
    v->type = t;
    if (t == ValueType::STRING) return read_string(&v->str, limits::kMaxStringBytes, "string value");
    if (t == ValueType::ARRAY) {
      if (depth + 1 > limits::kMaxArrayDepth)
        return fail(ctx_ + ": arrays are nested deeper than " + num(limits::kMaxArrayDepth) + " levels");
      v->array = std::make_shared<MetaArray>();
      return read_array(v->array.get(), depth + 1);
    }
    const uint64_t n = fixed_size(t);
    if (!need(n, "value")) return false;
    if (t == ValueType::BOOL && p_[pos_] > 1)
      return fail(ctx_ + ": bool value " + num(p_[pos_]) + " is neither 0 nor 1");
    decode_scalar(t, p_ + pos_, v);
    pos_ += n;
    return true;
  }

  // An array: u32 element type, u64 count, then the elements.
  bool read_array(MetaArray* a, uint32_t depth) {
    uint32_t elem = 0;
    if (!read_u32(&elem, "array element type")) return false;
    if (!is_known_type(elem)) return fail(ctx_ + ": unknown array element type " + num(elem));
    a->elem_type = static_cast<ValueType>(elem);
    if (!read_u64(&a->count, "array length")) return false;
    const uint64_t min_size = min_element_size(a->elem_type);
    if (a->count > left() / min_size)
      return fail("truncated file: " + ctx_ + ": array of " + num(a->count) + " " +
                  std::string(value_type_name(a->elem_type)) + " elements needs " +
                  (a->count > std::numeric_limits<uint64_t>::max() / min_size
                       ? std::string("more than 2^64")
                       : "at least " + num(a->count * min_size)) +
                  " bytes but only " + num(left()) + " are left in the file");
    switch (a->elem_type) {
      case ValueType::STRING:
        a->strings.resize(a->count);
        for (uint64_t k = 0; k < a->count; ++k)
          if (!read_string(&a->strings[k], limits::kMaxStringBytes, "string element")) return false;
        return true;
      case ValueType::ARRAY:
        a->nested.resize(a->count);
        for (uint64_t k = 0; k < a->count; ++k)
          if (!read_value(ValueType::ARRAY, &a->nested[k], depth)) return false;
        return true;
      default: {
        a->raw = p_ + pos_;
        const uint64_t bytes = a->count * min_size;  // no overflow: bounded by left() above
        if (a->elem_type == ValueType::BOOL) {
          for (uint64_t k = 0; k < bytes; ++k)
            if (a->raw[k] > 1) return fail(ctx_ + ": bool array element " + num(k) + " is " + num(a->raw[k]) + ", neither 0 nor 1");
        }
        pos_ += bytes;
        return true;
      }
    }
  }

  bool parse_metadata() {
    f_.meta_.reserve(n_kv_);
    f_.meta_index_.reserve(n_kv_);
    for (uint64_t k = 0; k < n_kv_; ++k) {
      ctx_ = "metadata entry " + num(k + 1) + " of " + num(n_kv_);
      std::string_view key;
      if (!read_string(&key, limits::kMaxKeyBytes, "key")) return false;
      if (key.empty()) return fail(ctx_ + ": empty key");
      ctx_ += " (" + quoted(key) + ")";
      uint32_t type = 0;
      if (!read_u32(&type, "value type")) return false;
      if (!is_known_type(type)) return fail(ctx_ + ": unknown value type " + num(type));
      MetaValue v;
      if (!read_value(static_cast<ValueType>(type), &v, 0)) return false;
      auto [it, inserted] = f_.meta_index_.emplace(key, f_.meta_.size());
      if (!inserted)
        return fail("duplicate metadata key " + quoted(key) + " (entries " + num(it->second + 1) + " and " +
                    num(k + 1) + ")");
      f_.meta_.emplace_back(key, std::move(v));
    }
    return true;
  }

  bool parse_alignment() {
    f_.alignment_ = kDefaultAlignment;
    const MetaValue* a = f_.find("general.alignment");
    if (!a) return true;
    if (a->type != ValueType::U32)
      return fail("general.alignment has type " + std::string(value_type_name(a->type)) + ", expected u32");
    if (a->u == 0 || !std::has_single_bit(a->u))
      return fail("general.alignment " + num(a->u) + " is not a nonzero power of two");
    f_.alignment_ = a->u;
    return true;
  }

  bool parse_tensor_infos() {
    f_.tensors_.reserve(n_tensors_);
    std::unordered_map<std::string_view, uint64_t> seen;
    seen.reserve(n_tensors_);
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      ctx_ = "tensor info " + num(k + 1) + " of " + num(n_tensors_);
      TensorInfo t;
      if (!read_string(&t.name, limits::kMaxTensorNameBytes, "name")) return false;
      if (t.name.empty()) return fail(ctx_ + ": empty tensor name");
      ctx_ += " (" + quoted(t.name) + ")";
      if (!read_u32(&t.n_dims, "n_dims")) return false;
      if (t.n_dims < 1 || t.n_dims > limits::kMaxDims)
        return fail("tensor " + quoted(t.name) + ": n_dims " + num(t.n_dims) + " is outside 1.." + num(limits::kMaxDims));
      for (uint32_t d = 0; d < t.n_dims; ++d) {
        uint64_t raw = 0;
        if (!read_u64(&raw, "dimension")) return false;
        t.ne[d] = static_cast<int64_t>(raw);
      }
      if (!read_u32(&t.type, "type") || !read_u64(&t.offset, "offset")) return false;
      if (!check_shape(t)) return false;
      auto [it, inserted] = seen.emplace(t.name, k);
      if (!inserted)
        return fail("duplicate tensor name " + quoted(t.name) + " (tensor infos " + num(it->second + 1) + " and " +
                    num(k + 1) + ")");
      f_.tensors_.push_back(t);
    }
    return true;
  }

  std::string shape_text(const TensorInfo& t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + snum(t.ne[d]);
    return s + "]";
  }

  // Dimensions, type and byte size of one tensor (not yet its placement).
  bool check_shape(TensorInfo& t) {
    const std::string who = "tensor " + quoted(t.name);
    for (uint32_t d = 0; d < t.n_dims; ++d)
      if (t.ne[d] < 0) return fail(who + ": negative dimension ne[" + num(d) + "] = " + snum(t.ne[d]));
    // Both the row count and the element count must fit in int64 (n_rows()
    // is computed separately and ne[0] may be 0).
    int64_t rows = 1, elems = 0;
    if (__builtin_mul_overflow(t.ne[1], t.ne[2], &rows) || __builtin_mul_overflow(rows, t.ne[3], &rows) ||
        __builtin_mul_overflow(rows, t.ne[0], &elems))
      return fail(who + ": element count of shape " + shape_text(t) + " overflows int64");
    const TensorTypeInfo& info = tensor_type_info(t.type);
    if (info.block_bytes == 0)
      return fail("unsupported tensor type id " + num(t.type) + " for tensor " + quoted(t.name));
    const auto ne0 = static_cast<uint64_t>(t.ne[0]);
    if (ne0 % info.block_elems != 0)
      return fail(who + ": ne[0] = " + num(ne0) + " is not a multiple of the " + std::string(info.name) +
                  " block size " + num(info.block_elems));
    // tensor_row_bytes multiplies blocks by block bytes unchecked; make sure it cannot wrap.
    if (ne0 / info.block_elems > std::numeric_limits<uint64_t>::max() / info.block_bytes)
      return fail(who + ": row size of shape " + shape_text(t) + " overflows 64 bits");
    uint64_t row_bytes = 0;
    if (!tensor_row_bytes(t.type, ne0, &row_bytes))  // cannot fail after the checks above
      return fail(who + ": cannot compute the row size of shape " + shape_text(t));
    if (__builtin_mul_overflow(row_bytes, static_cast<uint64_t>(rows), &t.nbytes))
      return fail(who + ": byte size of shape " + shape_text(t) + " overflows 64 bits");
    return true;
  }

  bool place_tensor_data() {
    const uint64_t info_end = pos_;
    const uint64_t a = f_.alignment_;
    // info_end <= size_ < 2^63 in practice; the check keeps align_up from wrapping anyway.
    if (info_end > std::numeric_limits<uint64_t>::max() - a) return fail("data section offset overflows");
    uint64_t data = align_up(info_end, a);
    if (f_.tensors_.empty()) {
      // Vocab-only files written by llama.cpp's tools end right after the
      // infos, without the padding; nothing is read from the data section.
      f_.data_offset_ = data <= size_ ? data : size_;
      return true;
    }
    if (data > size_)
      return fail("truncated file: the data section starts at byte " + num(data) + " (tensor infos end at byte " +
                  num(info_end) + ", alignment " + num(a) + ") but the file has " + num(size_) + " bytes");
    f_.data_offset_ = data;
    const uint64_t data_bytes = size_ - data;
    for (TensorInfo& t : f_.tensors_) {
      const std::string who = "tensor " + quoted(t.name);
      if (t.offset % a != 0)
        return fail(who + ": data offset " + num(t.offset) + " is not a multiple of the alignment " + num(a));
      if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset) {
        uint64_t end = 0;
        const bool wraps = __builtin_add_overflow(data, t.offset, &end) || __builtin_add_overflow(end, t.nbytes, &end);
        return fail("truncated file or bad tensor info: " + who + " (offset " + num(t.offset) + ", " + num(t.nbytes) + " bytes) ends " +
                    (wraps ? std::string("beyond byte 2^64") : "at byte " + num(end)) + " but the file has " +
                    num(size_) + " bytes");
      }
      t.data = p_ + data + t.offset;
    }
    return true;
  }

  GgufFile& f_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::string ctx_;
  std::string error_;
};

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, std::string* error) {
  const std::string where = printable_path(path) + ": ";
  auto set_error = [&](const std::string& problem) {
    if (error) *error = where + problem;
    return nullptr;
  };
  try {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = path;
    // O_NONBLOCK: opening a FIFO must not hang; it is rejected below anyway.
    f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f->fd_ < 0) return set_error(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(f->fd_, &st) != 0) return set_error(std::string("cannot stat: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) return set_error("is a directory, not a GGUF file");
    if (!S_ISREG(st.st_mode)) return set_error("not a regular file");
    if (st.st_size == 0) return set_error("empty file (0 bytes)");
    f->size_ = static_cast<uint64_t>(st.st_size);
    if (f->size_ > std::numeric_limits<size_t>::max()) return set_error("file too large to map");
    void* m = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, f->fd_, 0);
    if (m == MAP_FAILED) return set_error(std::string("cannot map: ") + std::strerror(errno));
    f->base_ = static_cast<const uint8_t*>(m);
    f->mtime_sec_ = st.st_mtim.tv_sec;
    f->mtime_nsec_ = st.st_mtim.tv_nsec;
    // Reads of the mapping survive the file being cut short under it.
    f->guard_slot_ = guard_mapping(m, static_cast<size_t>(f->size_));
    GgufParser parser(*f);
    if (!parser.parse()) return set_error(parser.error());
    return f;
  } catch (const std::bad_alloc&) {
    return set_error("out of memory while reading the GGUF structure");
  } catch (const std::exception& e) {
    return set_error(std::string("unexpected error: ") + printable(e.what()));
  }
}

GgufFile::~GgufFile() {
  unguard_mapping(guard_slot_);
  if (base_) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
}

bool GgufFile::read_faulted() const { return mapping_faulted(guard_slot_); }

bool GgufFile::changed_on_disk(std::string* why) const {
  if (read_faulted()) {
    if (why) *why = "it was cut short while mapped";
    return true;
  }
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
    if (why) *why = std::string("cannot stat it: ") + std::strerror(errno);
    return true;
  }
  if (static_cast<uint64_t>(st.st_size) != size_) {
    if (why) *why = "size " + num(size_) + " -> " + num(static_cast<uint64_t>(st.st_size)) + " bytes";
    return true;
  }
  if (st.st_mtim.tv_sec != mtime_sec_ || st.st_mtim.tv_nsec != mtime_nsec_) {
    if (why) *why = "rewritten: its modification time changed";
    return true;
  }
  return false;
}

const MetaValue* GgufFile::find(std::string_view key) const {
  auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &meta_[it->second].second;
}

// ---------------------------------------------------------------------------
// ModelFiles

namespace {

enum class KeyState { Absent, Ok, Bad };

// An integer metadata value of any integer type, as int64.
KeyState read_int_key(const GgufFile& f, std::string_view key, int64_t* out, std::string* problem) {
  const MetaValue* v = f.find(key);
  if (!v) return KeyState::Absent;
  if (!v->is_integer()) {
    *problem = std::string(key) + " has type " + std::string(value_type_name(v->type)) + ", expected an integer";
    return KeyState::Bad;
  }
  if (v->type == ValueType::U64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *problem = std::string(key) + " = " + num(v->u) + " is out of range";
    return KeyState::Bad;
  }
  *out = v->i;
  return KeyState::Ok;
}

std::string shard_suffix(int64_t index0, int64_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05lld-of-%05lld.gguf", static_cast<long long>(index0 + 1),
                static_cast<long long>(count));
  return buf;
}

}  // namespace

std::unique_ptr<ModelFiles> ModelFiles::open(const std::string& path, std::string* error) {
  const std::string where = printable_path(path) + ": ";
  auto set_error = [&](const std::string& message_with_path) {
    if (error) *error = message_with_path;
    return nullptr;
  };
  try {
    std::string err;
    std::unique_ptr<GgufFile> given = GgufFile::open(path, &err);
    if (!given) return set_error(err);

    std::string problem;
    int64_t count = 0, no = 0;
    const KeyState count_state = read_int_key(*given, "split.count", &count, &problem);
    if (count_state == KeyState::Bad) return set_error(where + problem);
    const KeyState no_state = read_int_key(*given, "split.no", &no, &problem);
    if (no_state == KeyState::Bad) return set_error(where + problem);
    if (count_state == KeyState::Ok && count < 0) return set_error(where + "split.count " + snum(count) + " is negative");

    auto files = std::make_unique<ModelFiles>();
    if (count_state == KeyState::Absent || count <= 1) {
      // Not split (llama.cpp treats split.count 0 like 1).
      if (no_state == KeyState::Ok && no != 0)
        return set_error(where + "split.no is " + snum(no) + " but the file is not split (split.count " +
                         (count_state == KeyState::Ok ? snum(count) : std::string("absent")) + ")");
      files->shards_.push_back(std::move(given));
    } else {
      if (count > static_cast<int64_t>(limits::kMaxSplitCount))
        return set_error(where + "split.count " + snum(count) + " exceeds the limit of " + num(limits::kMaxSplitCount));
      if (no_state == KeyState::Absent) return set_error(where + "split.count is " + snum(count) + " but split.no is missing");
      if (no < 0 || no >= count)
        return set_error(where + "split.no " + snum(no) + " is outside 0.." + snum(count - 1));
      const std::string suffix = shard_suffix(no, count);
      if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0)
        return set_error(where + "shard " + snum(no + 1) + " of " + snum(count) +
                         " (split.no " + snum(no) + ") but the file name does not end in '" + suffix + "'");
      const std::string prefix = path.substr(0, path.size() - suffix.size());
      files->shards_.resize(static_cast<size_t>(count));
      files->shards_[static_cast<size_t>(no)] = std::move(given);
      for (int64_t k = 0; k < count; ++k) {
        const std::string label = "shard " + snum(k + 1) + " of " + snum(count);
        std::unique_ptr<GgufFile>& slot = files->shards_[static_cast<size_t>(k)];
        if (!slot) {
          const std::string shard_path = prefix + shard_suffix(k, count);
          slot = GgufFile::open(shard_path, &err);
          if (!slot) return set_error(where + "cannot open " + label + ": " + err);
        }
        const std::string shard_where = where + label + " (" + printable_path(slot->path()) + "): ";
        int64_t c = 0, n = 0;
        const KeyState cs = read_int_key(*slot, "split.count", &c, &problem);
        if (cs == KeyState::Bad) return set_error(shard_where + problem);
        if (cs == KeyState::Absent) return set_error(shard_where + "split.count is missing");
        if (c != count) return set_error(shard_where + "split.count is " + snum(c) + ", expected " + snum(count));
        const KeyState ns = read_int_key(*slot, "split.no", &n, &problem);
        if (ns == KeyState::Bad) return set_error(shard_where + problem);
        if (ns == KeyState::Absent) return set_error(shard_where + "split.no is missing");
        if (n != k) return set_error(shard_where + "split.no is " + snum(n) + ", expected " + snum(k));
      }
    }

    // All tensors, in shard order; names must be unique across shards.
    size_t total = 0;
    for (const auto& s : files->shards_) total += s->tensors().size();
    files->tensors_.reserve(total);
    files->tensor_index_.reserve(total);
    for (size_t k = 0; k < files->shards_.size(); ++k) {
      for (const TensorInfo& t : files->shards_[k]->tensors()) {
        auto [it, inserted] = files->tensor_index_.emplace(t.name, files->tensors_.size());
        if (!inserted)
          return set_error(where + "duplicate tensor name " + quoted(t.name) + " in shard " +
                           num(files->tensors_[it->second].shard + 1) + " and shard " + num(k + 1));
        TensorInfo copy = t;
        copy.shard = static_cast<uint32_t>(k);
        files->tensors_.push_back(copy);
      }
    }
    // split.tensors.count, where a shard has it, must match the whole model.
    for (size_t k = 0; k < files->shards_.size(); ++k) {
      int64_t declared = 0;
      const KeyState st = read_int_key(*files->shards_[k], "split.tensors.count", &declared, &problem);
      if (st == KeyState::Bad) return set_error(where + problem);
      if (st == KeyState::Ok && (declared < 0 || static_cast<uint64_t>(declared) != total))
        return set_error(where + "split.tensors.count is " + snum(declared) + " in shard " + num(k + 1) +
                         " but the shards hold " + num(total) + " tensors");
    }
    return files;
  } catch (const std::bad_alloc&) {
    return set_error(where + "out of memory while opening the model files");
  } catch (const std::exception& e) {
    return set_error(where + "unexpected error: " + printable(e.what()));
  }
}

const TensorInfo* ModelFiles::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t ModelFiles::file_bytes() const {
  uint64_t sum = 0;
  for (const auto& shard : shards_) sum += shard->file_size();
  return sum;
}

bool ModelFiles::unchanged_on_disk(std::string* error) const {
  std::string why;
  for (const auto& shard : shards_) {
    if (!shard->changed_on_disk(&why)) continue;
    if (error)
      *error = "model file " + printable_path(shard->path()) + " changed on disk since it was loaded (" + why +
               "); reload it";
    return false;
  }
  return true;
}

uint64_t ModelFiles::total_bytes() const {
  uint64_t sum = 0;
  for (const TensorInfo& t : tensors_) sum += t.nbytes;  // each lies in a file, so no wrap in practice
  return sum;
}

namespace {
std::string wrong_type(const GgufFile& f, std::string_view key, ValueType got, const char* expected) {
  return printable_path(f.path()) + ": metadata key " + quoted(key) + " has type " +
         std::string(value_type_name(got)) + ", expected " + expected;
}
}  // namespace

std::optional<std::string_view> ModelFiles::get_string(std::string_view key, std::string* error) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) {
    if (error) *error = wrong_type(primary(), key, v->type, "string");
    return std::nullopt;
  }
  return v->str;
}

std::optional<int64_t> ModelFiles::get_int(std::string_view key, std::string* error) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) {
    if (error) *error = wrong_type(primary(), key, v->type, "an integer");
    return std::nullopt;
  }
  if (v->type == ValueType::U64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    if (error)
      *error = printable_path(primary().path()) + ": metadata key " + quoted(key) + " = " + num(v->u) +
               " does not fit in int64";
    return std::nullopt;
  }
  return v->i;
}

std::optional<double> ModelFiles::get_float(std::string_view key, std::string* error) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_float() && !v->is_integer()) {
    if (error) *error = wrong_type(primary(), key, v->type, "a number");
    return std::nullopt;
  }
  return v->f;
}

std::optional<bool> ModelFiles::get_bool(std::string_view key, std::string* error) const {
  const MetaValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) {
    if (error) *error = wrong_type(primary(), key, v->type, "bool");
    return std::nullopt;
  }
  return v->u != 0;
}

const MetaArray* ModelFiles::get_array(std::string_view key, std::string* error) const {
  const MetaValue* v = find(key);
  if (!v) return nullptr;
  if (v->type != ValueType::ARRAY) {
    if (error) *error = wrong_type(primary(), key, v->type, "array");
    return nullptr;
  }
  return v->array.get();
}

}  // namespace guild::gguf
