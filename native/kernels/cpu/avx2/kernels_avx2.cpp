// The "cpu-avx2" kernel table (AVX2 + FMA + F16C; built with
// -mavx2 -mfma -mf16c -mbmi2 -ffp-contract=off, see native/CMakeLists.txt).
//
// ODR safety: everything in this translation unit lives in an anonymous
// namespace except cpu_kernels_avx2(); the fragments (*.inc) are pasted into
// that namespace. The headers included below only contribute `static inline`
// functions, constexpr data, intrinsics (gnu_inline, never emitted out of
// line) and declarations, so no AVX2-compiled copy of a shared inline
// function can be picked by the linker for generic callers. (kernel_table.h
// pulls in tensor_type.h, whose one non-static inline function is never
// called here; the table itself is built at compile time, so no
// constructor of CpuKernelTable is emitted here either.)
//
// Numerics: dequantizers and activation quantizers are bit-identical to the
// cpu-generic reference; dot products agree with it to float rounding
// (tests allow 1e-5 of sum |w_i * a_i|).
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "cpu/generic/iq_grids.h"

namespace guild {
namespace {

#include "avx2_common.inc"
#include "dequant_avx2.inc"
#include "quantize_avx2.inc"
#include "vec_dot_avx2.inc"
#include "iq_grid_avx2.inc"
#include "ternary_avx2.inc"
#include "gemm_avx2.inc"
#include "half_avx2.inc"

constexpr void set_type(CpuKernelTable& t, TensorType type, DequantRowFn dq, TensorType act, VecDotFn dot,
                        GemmFn gemm = nullptr) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type)];
  k.dequant_row = dq;
  k.vec_dot_type = act;
  k.vec_dot = dot;
  k.gemm = gemm;
}

constexpr CpuKernelTable make_avx2_table() {
  CpuKernelTable t{};
  t.name = "cpu-avx2";
  using T = TensorType;
  set_type(t, T::F32, dq_f32, T::F32, vd_f32);
  set_type(t, T::F16, dq_f16, T::F16, tile_vec_dot_avx2<F16TileAvx2, 1>, tile_gemm_avx2<F16TileAvx2, 1, 1, 2>);
  set_type(t, T::BF16, dq_bf16, T::BF16, tile_vec_dot_avx2<BF16TileAvx2, 1>, tile_gemm_avx2<BF16TileAvx2, 1, 1, 2>);
  set_type(t, T::Q4_0, dq_q4_0, T::Q8_0, vd_q4_0);
  set_type(t, T::Q4_1, dq_q4_1, T::Q8_1, vd_q4_1);
  set_type(t, T::Q5_0, dq_q5_0, T::Q8_0, vd_q5_0);
  set_type(t, T::Q5_1, dq_q5_1, T::Q8_1, vd_q5_1);
  set_type(t, T::Q8_0, dq_q8_0, T::Q8_0, tile_vec_dot_avx2<Q80TileAvx2, kQK32>,
           tile_gemm_avx2<Q80TileAvx2, kQK32, 4, 1>);
  set_type(t, T::Q2_K, dq_q2_k, T::Q8_K, vd_q2_k);
  set_type(t, T::Q3_K, dq_q3_k, T::Q8_K, vd_q3_k);
  set_type(t, T::Q4_K, dq_q4_k, T::Q8_K, tile_vec_dot_avx2<Q4KTileAvx2, kQK_K>,
           tile_gemm_avx2<Q4KTileAvx2, kQK_K, 2, 2>);
  set_type(t, T::Q5_K, dq_q5_k, T::Q8_K, tile_vec_dot_avx2<Q5KTileAvx2, kQK_K>,
           tile_gemm_avx2<Q5KTileAvx2, kQK_K, 2, 2>);
  set_type(t, T::Q6_K, dq_q6_k, T::Q8_K, tile_vec_dot_avx2<Q6KTileAvx2, kQK_K>,
           tile_gemm_avx2<Q6KTileAvx2, kQK_K, 2, 2>);
  set_type(t, T::IQ4_NL, dq_iq4_nl, T::Q8_0, vd_iq4_nl);
  set_type(t, T::IQ4_XS, dq_iq4_xs, T::Q8_K, vd_iq4_xs);
  set_type(t, T::MXFP4, dq_mxfp4, T::Q8_0, vd_mxfp4);
  set_type(t, T::IQ2_XXS, dq_iq2_xxs, T::Q8_K, vd_iq2_xxs);
  set_type(t, T::IQ2_XS, dq_iq2_xs, T::Q8_K, vd_iq2_xs);
  set_type(t, T::IQ2_S, dq_iq2_s, T::Q8_K, vd_iq2_s);
  set_type(t, T::IQ3_XXS, dq_iq3_xxs, T::Q8_K, vd_iq3_xxs);
  set_type(t, T::IQ3_S, dq_iq3_s, T::Q8_K, vd_iq3_s);
  set_type(t, T::IQ1_S, dq_iq1_s, T::Q8_K, vd_iq1_s);
  set_type(t, T::IQ1_M, dq_iq1_m, T::Q8_K, vd_iq1_m);
  set_type(t, T::TQ1_0, dq_tq1_0, T::Q8_K, vd_tq1_0);
  set_type(t, T::TQ2_0, dq_tq2_0, T::Q8_K, vd_tq2_0);

  t.quantize_act[static_cast<uint32_t>(T::F32)] = quant_f32;
  t.quantize_act[static_cast<uint32_t>(T::F16)] = quant_f16;
  t.quantize_act[static_cast<uint32_t>(T::BF16)] = quant_bf16;
  t.quantize_act[static_cast<uint32_t>(T::Q8_0)] = quant_q8_0;
  t.quantize_act[static_cast<uint32_t>(T::Q8_1)] = quant_q8_1;
  t.quantize_act[static_cast<uint32_t>(T::Q8_K)] = quant_q8_k;

  t.dot_f32 = dot_f32_avx2;
  t.axpy_f32 = axpy_f32_avx2;
  t.fp16_to_f32_row = fp16_to_f32_row_avx2;
  t.f32_to_fp16_row = f32_to_fp16_row_avx2;

  t.attn_scores_f16 = attn_scores_f16_avx2;
  t.attn_scores_f32 = attn_scores_f32_avx2;
  t.attn_pv_f16 = attn_pv_f16_avx2;
  t.attn_pv_f32 = attn_pv_f32_avx2;
  t.softmax_exp = softmax_exp_avx2;
  t.swiglu_f32 = swiglu_f32_avx2;
  return t;
}

constexpr CpuKernelTable kAvx2Table = make_avx2_table();

}  // namespace

const CpuKernelTable* cpu_kernels_avx2() { return &kAvx2Table; }

}  // namespace guild
