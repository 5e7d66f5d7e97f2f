#include "runtime/kv_cache.h"

#include "models/recipe.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/fp16.h"

namespace guild {

int KvCache::sliding_rows(int window, int n_ctx, int max_batch, int history) {
  return sliding_kv_rows(window, n_ctx, max_batch, history);
}

bool KvCache::init(int n_layer, int n_ctx, int k_dim, int v_dim, KvType type, std::span<const int> windows,
                   int max_batch, int history) {
  type_ = type;
  n_ctx_ = n_ctx;
  k_dim_ = k_dim;
  v_dim_ = v_dim;
  size_t total = 0;
  try {
    layers_.assign(static_cast<size_t>(n_layer), Layer{});
    for (int l = 0; l < n_layer; ++l) {
      Layer& L = layers_[static_cast<size_t>(l)];
      const int w = static_cast<size_t>(l) < windows.size() ? windows[static_cast<size_t>(l)] : 0;
      L.rows = sliding_rows(w, n_ctx, max_batch, history);
      L.window = L.rows < n_ctx ? w : 0;  // a window as long as the context is a full layer
      L.offset = total;
      total += static_cast<size_t>(L.rows) * (k_dim + v_dim) * elem_bytes();
    }
    storage_.assign(total, 0);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void KvCache::make_room(int layer, int pos0, int n) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  if (L.window == 0) return;
  if (pos0 < L.base) L.base = pos0;  // run again from before what is held: nothing older is read
  if (pos0 + n - L.base <= L.rows) return;
  // Slide: the rows before pos0 that still fit go to the front.
  const int new_base = pos0 + n - L.rows;
  const int keep = std::max(0, pos0 - new_base);
  const size_t ek = static_cast<size_t>(k_dim_) * elem_bytes(), ev = static_cast<size_t>(v_dim_) * elem_bytes();
  uint8_t* k0 = storage_.data() + L.offset;
  uint8_t* v0 = k0 + static_cast<size_t>(L.rows) * ek;
  const size_t shift = static_cast<size_t>(new_base - L.base);
  if (keep > 0 && shift > 0) {
    std::memmove(k0, k0 + shift * ek, static_cast<size_t>(keep) * ek);
    std::memmove(v0, v0 + shift * ev, static_cast<size_t>(keep) * ev);
  }
  L.base = new_base;
}

int KvCache::resume_point(int n_reuse) const {
  for (const Layer& L : layers_)
    if (L.window > 0 && L.base > std::max(0, n_reuse - L.window + 1)) return 0;
  return n_reuse;
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
