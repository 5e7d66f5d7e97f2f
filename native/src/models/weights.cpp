#include "models/weights.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "artifact/gguf.h"
#include "core/quant_blocks.h"

namespace guild {
namespace {

std::string shape_string(const int64_t* ne, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

}  // namespace

void AlignedBytesFree::operator()(uint8_t* p) const { std::free(p); }

size_t tensor_data_alignment(uint32_t type_id) {
  switch (static_cast<TensorType>(type_id)) {
    case TensorType::F32: return alignof(float);
    case TensorType::F16: case TensorType::BF16: return alignof(uint16_t);
    case TensorType::Q4_0: return alignof(BlockQ4_0);
    case TensorType::Q4_1: return alignof(BlockQ4_1);
    case TensorType::Q5_0: return alignof(BlockQ5_0);
    case TensorType::Q5_1: return alignof(BlockQ5_1);
    case TensorType::Q8_0: return alignof(BlockQ8_0);
    case TensorType::Q8_1: return alignof(BlockQ8_1);
    case TensorType::Q2_K: return alignof(BlockQ2_K);
    case TensorType::Q3_K: return alignof(BlockQ3_K);
    case TensorType::Q4_K: return alignof(BlockQ4_K);
    case TensorType::Q5_K: return alignof(BlockQ5_K);
    case TensorType::Q6_K: return alignof(BlockQ6_K);
    case TensorType::Q8_K: return alignof(BlockQ8_K);
    case TensorType::IQ2_XXS: return alignof(BlockIQ2_XXS);
    case TensorType::IQ2_XS: return alignof(BlockIQ2_XS);
    case TensorType::IQ3_XXS: return alignof(BlockIQ3_XXS);
    case TensorType::IQ1_S: return alignof(BlockIQ1_S);
    case TensorType::IQ4_NL: return alignof(BlockIQ4_NL);
    case TensorType::IQ3_S: return alignof(BlockIQ3_S);
    case TensorType::IQ2_S: return alignof(BlockIQ2_S);
    case TensorType::IQ4_XS: return alignof(BlockIQ4_XS);
    case TensorType::I8: return 1;
    case TensorType::I16: return 2;
    case TensorType::I32: return 4;
    case TensorType::I64: case TensorType::F64: return 8;
    case TensorType::IQ1_M: return alignof(BlockIQ1_M);
    case TensorType::TQ1_0: return alignof(BlockTQ1_0);
    case TensorType::TQ2_0: return alignof(BlockTQ2_0);
    case TensorType::MXFP4: return alignof(BlockMXFP4);
  }
  return 16;  // unknown to this table: the strictest any kernel could want
}

const uint8_t* TensorBinder::aligned_data(const gguf::TensorInfo& t) {
  const size_t align = tensor_data_alignment(t.type);
  if (reinterpret_cast<uintptr_t>(t.data) % align == 0) return t.data;
  const uint64_t file_alignment = files_.shards()[t.shard]->alignment();
  if (t.nbytes > copy_limit_ || copied_bytes_ + t.nbytes > copy_limit_) {
    error_ = "tensor '" + std::string(t.name) + "' (" + std::string(tensor_type_name(t.type)) +
             ") is not aligned for its type in the file (general.alignment " + std::to_string(file_alignment) +
             ") and an aligned copy of " + mib(copied_bytes_ + t.nbytes) + " would exceed the " + mib(copy_limit_) +
             " of memory available for copies";
    return nullptr;
  }
  if (check_only_) {  // counted against the limit as a load would, not made
    copied_bytes_ += t.nbytes;
    ++copied_tensors_;
    return t.data;
  }
  // aligned_alloc wants a size that is a multiple of the alignment (64: a
  // cache line, enough for every type).
  const size_t bytes = static_cast<size_t>((t.nbytes + 63) / 64 * 64);
  AlignedBytes copy(static_cast<uint8_t*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
  if (!copy) {
    error_ = "out of memory making an aligned copy of tensor '" + std::string(t.name) + "' (" + mib(t.nbytes) + ")";
    return nullptr;
  }
  std::memcpy(copy.get(), t.data, static_cast<size_t>(t.nbytes));
  const uint8_t* data = copy.get();
  owner_.owned_bytes.push_back(std::move(copy));
  copied_bytes_ += t.nbytes;
  ++copied_tensors_;
  return data;
}

bool TensorBinder::has(const std::string& name) const { return files_.find_tensor(name) != nullptr; }

const gguf::TensorInfo* TensorBinder::lookup(const std::string& name, bool optional) {
  const gguf::TensorInfo* t = files_.find_tensor(name);
  if (!t && !optional) error_ = "missing tensor '" + name + "'";
  return t;
}

bool TensorBinder::check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> want) {
  int64_t got[4] = {t.ne[0], t.ne[1], t.ne[2], t.ne[3]};
  size_t i = 0;
  bool ok = true;
  for (int64_t w : want) ok = ok && got[i++] == w;
  for (; i < 4; ++i) ok = ok && got[i] == 1;
  if (!ok) {
    std::vector<int64_t> w(want);
    error_ = "tensor '" + std::string(t.name) + "' has shape " + shape_string(got, t.n_dims) +
             ", expected " + shape_string(w.data(), w.size());
  }
  return ok;
}

bool TensorBinder::bind_kernels(const gguf::TensorInfo& t, const TypeKernels** out) {
  const TypeKernels& k = kernels_.types[t.type < kTensorTypeIdLimit ? t.type : 0];
  if (t.type >= kTensorTypeIdLimit || !k.dequant_row || !k.vec_dot) {
    error_ = "tensor '" + std::string(t.name) + "' has type " + std::string(tensor_type_name(t.type)) +
             ", which kernel table " + kernels_.name + " does not support";
    return false;
  }
  *out = &k;
  return true;
}

bool TensorBinder::matrix(const std::string& name, int64_t n_in, int64_t n_out, QMatrix* out, bool optional) {
  const gguf::TensorInfo* t = lookup(name, optional);
  if (!t) return optional;
  if (!check_shape(*t, {n_in, n_out}) || !bind_kernels(*t, &out->kernels)) return false;
  out->data = aligned_data(*t);
  if (!out->data) return false;
  out->type = t->type;
  out->n_in = n_in;
  out->n_out = n_out;
  out->row_bytes = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(n_out));
  bound_bytes_ += t->nbytes;
  return true;
}

bool TensorBinder::experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert,
                           ExpertMatrices* out) {
  const gguf::TensorInfo* t = lookup(name, false);
  if (!t) return false;
  if (!check_shape(*t, {n_in, n_out, n_expert}) || !bind_kernels(*t, &out->first.kernels)) return false;
  out->n_expert = n_expert;
  out->expert_bytes = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(n_expert));
  out->first.data = aligned_data(*t);
  if (!out->first.data) return false;
  out->first.type = t->type;
  out->first.n_in = n_in;
  out->first.n_out = n_out;
  out->first.row_bytes = out->expert_bytes / static_cast<size_t>(n_out);
  bound_bytes_ += t->nbytes;
  return true;
}

bool TensorBinder::vector(const std::string& name, int64_t n, const float** out, ModelWeights& owner,
                          bool optional) {
  return floats(name, {n}, n, out, owner, optional);
}

bool TensorBinder::table(const std::string& name, int64_t n0, int64_t n1, const float** out, ModelWeights& owner,
                         bool optional) {
  return floats(name, {n0, n1}, n0 * n1, out, owner, optional);
}

bool TensorBinder::floats(const std::string& name, std::initializer_list<int64_t> shape, int64_t n, const float** out,
                          ModelWeights& owner, bool optional) {
  const gguf::TensorInfo* t = lookup(name, optional);
  if (!t) return optional;
  if (!check_shape(*t, shape)) return false;
  bound_bytes_ += t->nbytes;
  if (t->type == static_cast<uint32_t>(TensorType::F32)) {
    // The mapping is only aligned to general.alignment; a misaligned vector
    // is copied below (memcpy reads any alignment).
    if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
      *out = reinterpret_cast<const float*>(t->data);
      return true;
    }
  }
  const TypeKernels* k = nullptr;
  if (t->type != static_cast<uint32_t>(TensorType::F32) && !bind_kernels(*t, &k)) return false;
  if (check_only_) {  // the (small) float copy a load makes is not made
    *out = reinterpret_cast<const float*>(t->data);
    return true;
  }
  std::unique_ptr<float[]> copy(new (std::nothrow) float[static_cast<size_t>(n)]);
  if (!copy) { error_ = "out of memory copying '" + name + "'"; return false; }
  if (k) {
    // The dequantizer reads blocks in place: give it aligned ones (a norm
    // vector is small, so this copy needs no budget).
    const size_t align = tensor_data_alignment(t->type);
    std::vector<uint8_t> staging;
    const uint8_t* src = t->data;
    if (reinterpret_cast<uintptr_t>(src) % align != 0) {
      staging.resize(static_cast<size_t>(t->nbytes) + align);
      uint8_t* dst = staging.data() + (align - reinterpret_cast<uintptr_t>(staging.data()) % align) % align;
      std::memcpy(dst, src, static_cast<size_t>(t->nbytes));
      src = dst;
    }
    k->dequant_row(src, copy.get(), n);
  } else {
    std::memcpy(copy.get(), t->data, static_cast<size_t>(n) * sizeof(float));
  }
  *out = copy.get();
  owner.owned.push_back(std::move(copy));
  return true;
}

}  // namespace guild
