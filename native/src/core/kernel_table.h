// The CPU kernel table: one row of function pointers per tensor type, bound
// once at load (seed §4: no lookup or virtual dispatch in token/layer loops).
// Plain C types only, so the same table can later cross a shared-library
// boundary as a kernel package's provider table (docs/PACKAGES.md).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace guild {

// Dequantize n elements (a whole number of blocks) of one row to float.
using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);
// Quantize n floats (a whole number of blocks) into an activation type.
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// dot(weight row of type T, activation row already in T's vec_dot_type), n elements.
using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* act_row);
// A tile of a matrix product: out[t][r] = vec_dot(n, w + r * w_stride, act[t])
// for r < n_rows, t < n_act. Every entry is computed with exactly the
// operations vec_dot uses (vec_dot is the 1 x 1 case), so results never depend
// on how a product is tiled: one token at a time gives the bits of a batch.
using GemmFn = void (*)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* const* act,
                        float* const* out, int n_act);

// Attention over a layer's cached K/V rows (head_dim elements each, rows
// `stride` elements apart, F16 bits or F32), for n_q query rows at once.
// Each query row's result is computed the same way whatever n_q is.
//   scores: s_rows[q][j] = dot(q_rows[q], k_j) * scale, j < n_keys
//   pv:     o_rows[q][d] = sum_{j < n_keys} p_rows[q][j] * v_j[d] (o overwritten)
using AttnScoresF16Fn = void (*)(int n_keys, int head_dim, const uint16_t* k, int64_t stride, const float* const* q_rows,
                                 int n_q, float scale, float* const* s_rows);
using AttnScoresF32Fn = void (*)(int n_keys, int head_dim, const float* k, int64_t stride, const float* const* q_rows,
                                 int n_q, float scale, float* const* s_rows);
using AttnPvF16Fn = void (*)(int n_keys, int head_dim, const uint16_t* v, int64_t stride, const float* const* p_rows,
                             int n_q, float* const* o_rows);
using AttnPvF32Fn = void (*)(int n_keys, int head_dim, const float* v, int64_t stride, const float* const* p_rows,
                             int n_q, float* const* o_rows);

struct TypeKernels {
  DequantRowFn dequant_row = nullptr;  // null: type not supported
  // Activation type that vec_dot and gemm expect (e.g. Q8_0 for Q4_0/Q8_0,
  // Q8_K for K-quants, F32 for F32, F16 for F16 and BF16 for BF16 weights).
  // Matches llama.cpp's choice so logits agree with the reference. Callers
  // always read it from the row (never assume it), so a row and its
  // activation type are one unit: quantize_act[vec_dot_type] prepares them.
  TensorType vec_dot_type = TensorType::F32;
  VecDotFn vec_dot = nullptr;
  GemmFn gemm = nullptr;  // null: callers loop over vec_dot
};

struct CpuKernelTable {
  const char* name = "";  // "cpu-generic", "cpu-avx2", ...
  TypeKernels types[kTensorTypeIdLimit];
  // Activation quantizers, indexed by the activation type id (F32 = copy;
  // F16 / BF16 round to nearest even).
  QuantizeRowFn quantize_act[kTensorTypeIdLimit] = {};

  // Float helpers used by the runners' elementwise ops (vectorized per table).
  float (*dot_f32)(int64_t n, const float* a, const float* b) = nullptr;
  void (*axpy_f32)(int64_t n, float a, const float* x, float* y) = nullptr;  // y += a*x
  void (*fp16_to_f32_row)(const uint16_t* src, float* dst, int64_t n) = nullptr;
  void (*f32_to_fp16_row)(const float* src, uint16_t* dst, int64_t n) = nullptr;

  // Attention (see the function types above) and its softmax step:
  // softmax_exp replaces x[i] by exp(x[i] - max_i x) and returns their sum.
  AttnScoresF16Fn attn_scores_f16 = nullptr;
  AttnScoresF32Fn attn_scores_f32 = nullptr;
  AttnPvF16Fn attn_pv_f16 = nullptr;
  AttnPvF32Fn attn_pv_f32 = nullptr;
  float (*softmax_exp)(int64_t n, float* x) = nullptr;
  // out[i] = silu(gate[i]) * up[i]
  void (*swiglu_f32)(int64_t n, const float* gate, const float* up, float* out) = nullptr;
};

// The kernel tables themselves, defined in native/kernels/cpu: linked into
// each kernel package library (its provider entry returns one of them) and
// into the kernel tests and tools, never into the runtime (guild_runtime, the
// addon, libguild), whose tables come from the packages loaded at model load
// (docs/PACKAGES.md). A runtime file calling these would not link.
const CpuKernelTable& cpu_kernels_generic();
// Null when this binary was built without the AVX2 table.
const CpuKernelTable* cpu_kernels_avx2();
// Null when this binary was built without the AVX-512 table.
const CpuKernelTable* cpu_kernels_avx512();
// The best table the running CPU supports, among those linked in: AVX-512
// (F/BW/VL/DQ/VNNI; its batch products use AMX-INT8 where cpu_amx_usable())
// over AVX2+FMA+F16C over generic; GUILD_FORCE_KERNELS=cpu-generic|cpu-avx2|
// cpu-avx512 overrides. For kernel tests and tools; a model load picks among
// the loaded packages instead (packages::pick_cpu_provider, the same rule).
const CpuKernelTable& cpu_kernels_best();

}  // namespace guild
