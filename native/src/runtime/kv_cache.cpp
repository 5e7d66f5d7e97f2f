#include "runtime/kv_cache.h"

#include <cstring>
#include <new>

#include "core/fp16.h"

namespace guild {

bool KvCache::init(int n_layer, int n_ctx, int k_dim, int v_dim, KvType type) {
  type_ = type;
  n_ctx_ = n_ctx;
  k_dim_ = k_dim;
  v_dim_ = v_dim;
  layer_stride_ = static_cast<size_t>(n_ctx) * (k_dim + v_dim) * elem_bytes();
  try {
    storage_.assign(layer_stride_ * n_layer, 0);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void KvCache::store(int layer, int pos, const float* k, const float* v) {
  uint8_t* kd = storage_.data() + k_offset(layer, pos);
  uint8_t* vd = storage_.data() + v_offset(layer, pos);
  if (type_ == KvType::F32) {
    std::memcpy(kd, k, static_cast<size_t>(k_dim_) * 4);
    std::memcpy(vd, v, static_cast<size_t>(v_dim_) * 4);
    return;
  }
  auto* k16 = reinterpret_cast<uint16_t*>(kd);
  auto* v16 = reinterpret_cast<uint16_t*>(vd);
  for (int i = 0; i < k_dim_; ++i) k16[i] = f32_to_fp16(k[i]);
  for (int i = 0; i < v_dim_; ++i) v16[i] = f32_to_fp16(v[i]);
}

}  // namespace guild
