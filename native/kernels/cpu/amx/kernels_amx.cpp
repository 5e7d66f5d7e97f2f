// The "cpu-amx" kernel table: cpu-avx512 plus AMX-INT8 tile-unit products
// for batches of Q8_0 and Q4_K rows (prefill); built with the AVX-512 flags
// plus -mamx-tile -mamx-int8 (native/CMakeLists.txt). Selected only when the
// CPU has AMX-TILE + AMX-INT8 with OS-enabled tile state and the kernel
// grants this process the tile data permission (kernel_select.cpp asks).
//
// ODR safety: as kernels_avx2.cpp / kernels_avx512.cpp (everything internal
// except cpu_kernels_amx(); the AVX2 and AVX-512 fragments are pasted in
// again). The per-thread AMX state is a trivially constructible
// thread_local (no constructor or destructor emitted), its scratch buffer
// comes from aligned_alloc.
#if !defined(__AMX_TILE__) || !defined(__AMX_INT8__) || !defined(__AVX512F__) || !defined(__AVX512BW__) || \
    !defined(__AVX512VL__) || !defined(__AVX512DQ__) || !defined(__AVX512VNNI__)
#error "kernels_amx.cpp must be compiled with the AVX-512 flags plus -mamx-tile -mamx-int8"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"

namespace guild {
namespace {

#include "../avx2/avx2_common.inc"
#include "../avx2/dequant_avx2.inc"
#include "../avx2/quantize_avx2.inc"
#include "../avx2/vec_dot_avx2.inc"
#include "../avx2/gemm_avx2.inc"
#include "../avx512/gemm_avx512.inc"
#include "gemm_amx.inc"

constexpr void set_type(CpuKernelTable& t, TensorType type, DequantRowFn dq, TensorType act, VecDotFn dot,
                        GemmFn gemm = nullptr) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type)];
  k.dequant_row = dq;
  k.vec_dot_type = act;
  k.vec_dot = dot;
  k.gemm = gemm;
}

constexpr CpuKernelTable make_amx_table() {
  CpuKernelTable t{};
  t.name = "cpu-amx";
  using T = TensorType;
  set_type(t, T::F32, dq_f32, T::F32, vd_f32);
  set_type(t, T::F16, dq_f16, T::F32, vd_f16);
  set_type(t, T::BF16, dq_bf16, T::F32, vd_bf16);
  set_type(t, T::Q4_0, dq_q4_0, T::Q8_0, vd_q4_0);
  set_type(t, T::Q4_1, dq_q4_1, T::Q8_1, vd_q4_1);
  set_type(t, T::Q5_0, dq_q5_0, T::Q8_0, vd_q5_0);
  set_type(t, T::Q5_1, dq_q5_1, T::Q8_1, vd_q5_1);
  set_type(t, T::Q8_0, dq_q8_0, T::Q8_0, tile_vec_dot_avx2<Q80Tile512, kQK32>, gemm_q8_0_amx);
  set_type(t, T::Q2_K, dq_q2_k, T::Q8_K, vd_q2_k);
  set_type(t, T::Q3_K, dq_q3_k, T::Q8_K, vd_q3_k);
  set_type(t, T::Q4_K, dq_q4_k, T::Q8_K, tile_vec_dot_avx2<Q4KTile512, kQK_K>, gemm_q4_k_amx);
  set_type(t, T::Q5_K, dq_q5_k, T::Q8_K, tile_vec_dot_avx2<Q5KTile512, kQK_K>, tile_gemm_avx2<Q5KTile512, kQK_K, 2, 4>);
  set_type(t, T::Q6_K, dq_q6_k, T::Q8_K, tile_vec_dot_avx2<Q6KTile512, kQK_K>, tile_gemm_avx2<Q6KTile512, kQK_K, 4, 4>);
  set_type(t, T::IQ4_NL, dq_iq4_nl, T::Q8_0, vd_iq4_nl);
  set_type(t, T::IQ4_XS, dq_iq4_xs, T::Q8_K, vd_iq4_xs);
  set_type(t, T::MXFP4, dq_mxfp4, T::Q8_0, vd_mxfp4);

  t.quantize_act[static_cast<uint32_t>(T::F32)] = quant_f32;
  t.quantize_act[static_cast<uint32_t>(T::Q8_0)] = quant_q8_0;
  t.quantize_act[static_cast<uint32_t>(T::Q8_1)] = quant_q8_1;
  t.quantize_act[static_cast<uint32_t>(T::Q8_K)] = quant_q8_k;

  t.dot_f32 = dot_f32_avx2;
  t.axpy_f32 = axpy_f32_avx2;
  t.fp16_to_f32_row = fp16_to_f32_row_avx2;
  t.f32_to_fp16_row = f32_to_fp16_row_avx2;

  t.attn_scores_f16 = attn_scores_f16_512;
  t.attn_scores_f32 = attn_scores_f32_512;
  t.attn_pv_f16 = attn_pv_f16_512;
  t.attn_pv_f32 = attn_pv_f32_512;
  t.softmax_exp = softmax_exp_512;
  t.swiglu_f32 = swiglu_f32_512;
  return t;
}

constexpr CpuKernelTable kAmxTable = make_amx_table();

}  // namespace

const CpuKernelTable* cpu_kernels_amx() { return &kAmxTable; }

}  // namespace guild
