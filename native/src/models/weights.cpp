#include "models/weights.h"

#include <cstring>
#include <new>

#include "artifact/gguf.h"

namespace guild {
namespace {

std::string shape_string(const int64_t* ne, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

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
  out->data = t->data;
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
  out->first.data = t->data;
  out->first.type = t->type;
  out->first.n_in = n_in;
  out->first.n_out = n_out;
  out->first.row_bytes = out->expert_bytes / static_cast<size_t>(n_out);
  bound_bytes_ += t->nbytes;
  return true;
}

bool TensorBinder::vector(const std::string& name, int64_t n, const float** out, ModelWeights& owner,
                          bool optional) {
  const gguf::TensorInfo* t = lookup(name, optional);
  if (!t) return optional;
  if (!check_shape(*t, {n})) return false;
  bound_bytes_ += t->nbytes;
  if (t->type == static_cast<uint32_t>(TensorType::F32)) {
    // The mapping is only guaranteed aligned to general.alignment (>= 4 for
    // valid files); copy when a hand-made file leaves it unaligned.
    if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
      *out = reinterpret_cast<const float*>(t->data);
      return true;
    }
  }
  const TypeKernels* k = nullptr;
  if (t->type != static_cast<uint32_t>(TensorType::F32) && !bind_kernels(*t, &k)) return false;
  std::unique_ptr<float[]> copy(new (std::nothrow) float[static_cast<size_t>(n)]);
  if (!copy) { error_ = "out of memory copying '" + name + "'"; return false; }
  if (k) k->dequant_row(t->data, copy.get(), n);
  else std::memcpy(copy.get(), t->data, static_cast<size_t>(n) * sizeof(float));
  *out = copy.get();
  owner.owned.push_back(std::move(copy));
  return true;
}

}  // namespace guild
