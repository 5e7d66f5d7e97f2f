// Quantized matrix products: y = x · Wᵀ for a weight matrix W of n_out rows
// of n_in elements, in any tensor type that has a kernel row. Activations are
// first converted to the weight type's vec_dot_type (Q8_0, Q8_1, Q8_K, F16,
// BF16 or F32, as llama.cpp's CPU backend pairs them) once,
// then every weight row is read once per call and dotted with every token.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/kernel_table.h"
#include "core/thread_pool.h"

namespace guild {

// A 2-D view of weight bytes (in the mapped file or in memory we own).
struct QMatrix {
  const uint8_t* data = nullptr;
  uint32_t type = 0;
  int64_t n_in = 0;       // elements per row (ne[0])
  int64_t n_out = 0;      // rows (ne[1])
  size_t row_bytes = 0;   // bytes per row
  const TypeKernels* kernels = nullptr;  // bound at load

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// Bytes needed for one activation row of n_in elements in W's vec_dot_type.
size_t act_row_bytes(const QMatrix& w);

// Converts n_rows rows of x (stride x_stride floats) into W's vec_dot_type.
void quantize_activations(ThreadPool& pool, const CpuKernelTable& k, const QMatrix& w,
                          const float* x, int64_t x_stride, int n_rows, uint8_t* out);

// y[i][r] = dot(W row r, act_rows[i]) for i < n_act, r < n_out.
// act_rows point at rows already in W's vec_dot_type. y rows have y_stride floats.
void matmul_prepared(ThreadPool& pool, const QMatrix& w, const uint8_t* const* act_rows, int n_act,
                     float* y, int64_t y_stride);

// One product of several sharing the same prepared activation rows (all the
// matrices have the same vec_dot_type and n_in): y[i][r] = dot(W row r, act[i]).
struct MatmulJob {
  const QMatrix* w = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};
// Runs every job in one parallel loop (one pool round trip for, e.g., q, k
// and v of a layer).
void matmul_prepared_multi(ThreadPool& pool, const MatmulJob* jobs, int n_jobs, const uint8_t* const* act_rows,
                           int n_act);

// The serial kernel under all of these: out_rows[i][r - r0] = dot(W row r,
// act_rows[i]) for r in [r0, r1), i < n_act, through W's tile kernel (gemm)
// or, for types without one, vec_dot. out_rows[i] points at column r0.
void gemm_rows(const QMatrix& w, int64_t r0, int64_t r1, const uint8_t* const* act_rows, float* const* out_rows,
               int n_act);

// Rows per parallel task for a matrix in a loop of n_act activation rows
// shared by n_threads threads (a multiple of 4; at least enough weight bytes
// to amortise handing out the task).
int64_t matmul_chunk_rows(const QMatrix& w, int n_act, int n_threads, int64_t rows_in_loop);

// Convenience: quantize x (n rows, stride n_in) into `scratch` (at least
// n * act_row_bytes(w) bytes) and multiply. row_ptrs has room for n pointers.
void matmul(ThreadPool& pool, const CpuKernelTable& k, const QMatrix& w, const float* x, int n,
            float* y, uint8_t* scratch, const uint8_t** row_ptrs);

}  // namespace guild
