// The per-session key/value cache: for each layer, K and V rows of kv_dim
// elements for every position up to n_ctx, stored in F16 (default) or F32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace guild {

enum class KvType : uint8_t { F16, F32 };

class KvCache {
 public:
  KvCache() = default;
  // Allocates n_layer × n_ctx rows; returns false on allocation failure.
  bool init(int n_layer, int n_ctx, int k_dim, int v_dim, KvType type);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  int k_dim() const { return k_dim_; }
  int v_dim() const { return v_dim_; }
  size_t bytes() const { return storage_.size(); }

  // Stores one position's K and V rows (float) for a layer.
  void store(int layer, int pos, const float* k, const float* v);

  // Raw rows: element type per type() (uint16_t fp16 bits or float).
  const void* k_row(int layer, int pos) const { return storage_.data() + k_offset(layer, pos); }
  const void* v_row(int layer, int pos) const { return storage_.data() + v_offset(layer, pos); }

 private:
  size_t elem_bytes() const { return type_ == KvType::F16 ? 2 : 4; }
  size_t k_offset(int layer, int pos) const {
    return (static_cast<size_t>(layer) * layer_stride_) + static_cast<size_t>(pos) * k_dim_ * elem_bytes();
  }
  size_t v_offset(int layer, int pos) const {
    return static_cast<size_t>(layer) * layer_stride_ + static_cast<size_t>(n_ctx_) * k_dim_ * elem_bytes() +
           static_cast<size_t>(pos) * v_dim_ * elem_bytes();
  }

  KvType type_ = KvType::F16;
  int n_ctx_ = 0, k_dim_ = 0, v_dim_ = 0;
  size_t layer_stride_ = 0;
  std::vector<uint8_t> storage_;
};

}  // namespace guild
