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
  // Blocks of rows per task: quantizing a row takes well under a microsecond.
  constexpr int kRowsPerTask = 16;
  auto some = [&](int64_t task, int) {
    const int i1 = std::min<int>(n_rows, static_cast<int>(task + 1) * kRowsPerTask);
    for (int i = static_cast<int>(task) * kRowsPerTask; i < i1; ++i) quantize(x + i * x_stride, out + i * out_bytes, w.n_in);
  };
  const int64_t n_tasks = (n_rows + kRowsPerTask - 1) / kRowsPerTask;
  if (n_rows >= 32) pool.parallel_for(n_tasks, some);
  else for (int64_t t = 0; t < n_tasks; ++t) some(t, 0);
}

void gemm_rows(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* const* act_rows, float* const* out_rows,
               int n_act) {
  const TypeKernels& k = *w.kernels;
  const uint8_t* base = w.row(r0);
  const int n_rows = static_cast<int>(r1 - r0);
  if (k.gemm) {
    k.gemm(w.n_in, base, w.row_bytes, n_rows, reinterpret_cast<const void* const*>(act_rows), out_rows, n_act);
    return;
  }
  for (int i = 0; i < n_act; ++i)
    for (int r = 0; r < n_rows; ++r) out_rows[i][r] = k.vec_dot(w.n_in, base + static_cast<size_t>(r) * w.row_bytes, act_rows[i]);
}

int64_t matmul_chunk_rows(const QMatrix& w, int n_act, int n_threads, int64_t rows_in_loop) {
  // Several tasks per thread (load balance), each with at least ~16 KB of
  // weights per activation row (or all rows of a small matrix).
  int64_t chunk = std::max<int64_t>(1, rows_in_loop / (static_cast<int64_t>(n_threads) * 8));
  const int64_t min_rows = std::max<int64_t>(1, 16384 / static_cast<int64_t>(w.row_bytes * std::max(1, n_act / 8) + 1));
  chunk = std::max(chunk, std::min<int64_t>(min_rows, w.n_out));
  // Whole tiles: 4 rows (the SIMD tiles), 16 for batches (AMX tiles are 16 rows).
  const int64_t tile = n_act >= 32 ? 16 : 4;
  chunk = (chunk + tile - 1) / tile * tile;
  return std::min<int64_t>(chunk, w.n_out);
}

namespace {

// Rows [r0, r1) of w times activation rows, writing y[i * y_stride + r];
// activations go in blocks of 64 rows (pointer arrays on the stack).
void gemm_block(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* const* act_rows, int n_act, float* y,
                int64_t y_stride) {
  constexpr int kBlock = 64;
  float* out[kBlock];
  for (int i0 = 0; i0 < n_act; i0 += kBlock) {
    const int nb = std::min(kBlock, n_act - i0);
    for (int i = 0; i < nb; ++i) out[i] = y + static_cast<int64_t>(i0 + i) * y_stride + r0;
    gemm_rows(w, r0, r1, act_rows + i0, out, nb);
  }
}

}  // namespace

void matmul_prepared_multi(ThreadPool& pool, const MatmulJob* jobs, int n_jobs, const uint8_t* const* act_rows,
                           int n_act) {
  constexpr int kMaxJobs = 8;
  int64_t chunk[kMaxJobs], first_task[kMaxJobs + 1];
  int64_t total_rows = 0;
  for (int j = 0; j < n_jobs; ++j) total_rows += jobs[j].w->n_out;
  first_task[0] = 0;
  for (int j = 0; j < n_jobs; ++j) {
    chunk[j] = matmul_chunk_rows(*jobs[j].w, n_act, pool.size(), total_rows);
    first_task[j + 1] = first_task[j] + (jobs[j].w->n_out + chunk[j] - 1) / chunk[j];
  }
  pool.parallel_for(first_task[n_jobs], [&](int64_t task, int) {
    int j = 0;
    while (task >= first_task[j + 1]) ++j;
    const QMatrix& w = *jobs[j].w;
    const int64_t r0 = (task - first_task[j]) * chunk[j];
    const int64_t r1 = std::min(w.n_out, r0 + chunk[j]);
    gemm_block(w, r0, r1, act_rows, n_act, jobs[j].y, jobs[j].y_stride);
  });
}

void matmul_prepared(ThreadPool& pool, const QMatrix& w, const uint8_t* const* act_rows, int n_act,
                     float* y, int64_t y_stride) {
  const MatmulJob job{&w, y, y_stride};
  matmul_prepared_multi(pool, &job, 1, act_rows, n_act);
}

void matmul(ThreadPool& pool, const CpuKernelTable& k, const QMatrix& w, const float* x, int n,
            float* y, uint8_t* scratch, const uint8_t** row_ptrs) {
  const size_t rb = act_row_bytes(w);
  quantize_activations(pool, k, w, x, w.n_in, n, scratch);
  for (int i = 0; i < n; ++i) row_ptrs[i] = scratch + i * rb;
  matmul_prepared(pool, w, row_ptrs, n, y, w.n_out);
}

}  // namespace guild
