#include "ops/matmul.h"

#include <algorithm>
#include <cstring>

namespace guild {

size_t act_row_bytes(const QMatrix& w) {
  uint64_t bytes = 0;
  tensor_row_bytes(static_cast<uint32_t>(w.kernels->vec_dot_type), static_cast<uint64_t>(w.n_in), &bytes);
  return static_cast<size_t>(bytes);
}

void quantize_activations(ThreadPool& pool, const CpuKernelTable& k, const QMatrix& w,
                          const float* x, int64_t x_stride, int n_rows, uint8_t* out) {
  const uint32_t act_type = static_cast<uint32_t>(w.kernels->vec_dot_type);
  const size_t out_bytes = act_row_bytes(w);
  if (act_type == static_cast<uint32_t>(TensorType::F32)) {
    for (int i = 0; i < n_rows; ++i)
      std::memcpy(out + i * out_bytes, x + i * x_stride, static_cast<size_t>(w.n_in) * sizeof(float));
    return;
  }
  const QuantizeRowFn quantize = k.quantize_act[act_type];
  auto one = [&](int64_t i, int) { quantize(x + i * x_stride, out + i * out_bytes, w.n_in); };
  if (n_rows >= 8) pool.parallel_for(n_rows, one);
  else for (int i = 0; i < n_rows; ++i) one(i, 0);
}

void matmul_prepared(ThreadPool& pool, const QMatrix& w, const uint8_t* const* act_rows, int n_act,
                     float* y, int64_t y_stride) {
  const VecDotFn dot = w.kernels->vec_dot;
  // Row chunks small enough to give every thread several tasks (load balance)
  // and large enough that one task's weight bytes amortise the dispatch.
  const int64_t n_threads = pool.size();
  int64_t chunk = std::max<int64_t>(1, w.n_out / (n_threads * 8));
  const int64_t min_rows = std::max<int64_t>(1, 16384 / static_cast<int64_t>(w.row_bytes + 1));
  chunk = std::max(chunk, std::min<int64_t>(min_rows, w.n_out));
  const int64_t n_chunks = (w.n_out + chunk - 1) / chunk;
  pool.parallel_for(n_chunks, [&](int64_t c, int) {
    const int64_t r0 = c * chunk;
    const int64_t r1 = std::min(w.n_out, r0 + chunk);
    // Token-outer within a chunk: the chunk's rows stay in L1/L2 across tokens.
    for (int i = 0; i < n_act; ++i) {
      float* out = y + i * y_stride;
      const uint8_t* a = act_rows[i];
      for (int64_t r = r0; r < r1; ++r) out[r] = dot(w.n_in, w.row(r), a);
    }
  });
}

void matmul(ThreadPool& pool, const CpuKernelTable& k, const QMatrix& w, const float* x, int n,
            float* y, uint8_t* scratch, const uint8_t** row_ptrs) {
  const size_t rb = act_row_bytes(w);
  quantize_activations(pool, k, w, x, w.n_in, n, scratch);
  for (int i = 0; i < n; ++i) row_ptrs[i] = scratch + i * rb;
  matmul_prepared(pool, w, row_ptrs, n, y, w.n_out);
}

}  // namespace guild
