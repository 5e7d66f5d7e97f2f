// The per-session key/value cache: for each layer, K and V rows of kv_dim
// elements for every position up to n_ctx, stored in F16 (default) or F32.
//
// A sliding-window layer (attention over the last W positions only) holds
// just W + max_batch + history rows, not n_ctx: its rows slide toward the
// front as positions go on (make_room, once per layer and pass), so every
// range attention reads stays contiguous. `history` is how far back a
// rollback or a reused prefix may cut without re-running the prompt
// (resume_point); speculative windows need at most 16.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace guild {

enum class KvType : uint8_t { F16, F32 };

class KvCache {
 public:
  KvCache() = default;
  // Allocates n_layer layers of n_ctx rows; layer l with windows[l] > 0 gets
  // sliding_rows(windows[l], ...) rows. Returns false on allocation failure.
  bool init(int n_layer, int n_ctx, int k_dim, int v_dim, KvType type, std::span<const int> windows = {},
            int max_batch = 0, int history = 0);

  // Rows a sliding-window layer holds (n_ctx when that is no fewer).
  static int sliding_rows(int window, int n_ctx, int max_batch, int history);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  int k_dim() const { return k_dim_; }
  int v_dim() const { return v_dim_; }
  size_t bytes() const { return storage_.size(); }
  int layer_rows(int layer) const { return layers_[static_cast<size_t>(layer)].rows; }
  // The first position a layer still holds (0 for a full layer).
  int first_held(int layer) const { return layers_[static_cast<size_t>(layer)].base; }

  // Before a pass stores positions [pos0, pos0 + n) (n <= max_batch) in a
  // layer: a sliding layer moves its newest rows before pos0 to the front if
  // the pass would not fit. Full layers: nothing to do.
  void make_room(int layer, int pos0, int n);
  // With the history cut to n_reuse positions: n_reuse when every sliding
  // layer still holds the rows the next position attends to, else 0 (the
  // prompt must be run again from the start).
  int resume_point(int n_reuse) const;

  // Stores one position's K and V rows (float) for a layer.
  void store(int layer, int pos, const float* k, const float* v);

  // Raw rows: element type per type() (uint16_t fp16 bits or float).
  const void* k_row(int layer, int pos) const { return storage_.data() + k_offset(layer, pos); }
  const void* v_row(int layer, int pos) const { return storage_.data() + v_offset(layer, pos); }

 private:
  struct Layer {
    size_t offset = 0;  // bytes: K block, then V block
    int rows = 0;       // positions held
    int base = 0;       // position of row 0
    int window = 0;     // 0: full layer
  };
  size_t elem_bytes() const { return type_ == KvType::F16 ? 2 : 4; }
  size_t k_offset(int layer, int pos) const {
    const Layer& L = layers_[static_cast<size_t>(layer)];
    return L.offset + static_cast<size_t>(pos - L.base) * k_dim_ * elem_bytes();
  }
  size_t v_offset(int layer, int pos) const {
    const Layer& L = layers_[static_cast<size_t>(layer)];
    return L.offset + static_cast<size_t>(L.rows) * k_dim_ * elem_bytes() +
           static_cast<size_t>(pos - L.base) * v_dim_ * elem_bytes();
  }

  KvType type_ = KvType::F16;
  int n_ctx_ = 0, k_dim_ = 0, v_dim_ = 0;
  std::vector<Layer> layers_;
  std::vector<uint8_t> storage_;
};

}  // namespace guild
