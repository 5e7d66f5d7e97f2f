// The "cpu-avx512" kernel table (AVX-512 F/BW/VL/DQ + VNNI, with AVX2, FMA,
// F16C, BMI2; built with those -m flags, -mamx-tile -mamx-int8 and
// -ffp-contract=off, see native/CMakeLists.txt). Its Q8_0 and Q4_K products
// of 32+ activation rows run on the AMX tile unit where cpu_amx_usable()
// (gemm_amx.inc); nothing else uses AMX, and without it those products run
// on the 512-bit tiles. Likewise its BF16 dots use AVX512-BF16 (vdpbf16ps,
// compiled per function with a target attribute) only where cpuid reports
// it (half_avx512.inc), else 512-bit widening and FMA.
//
// ODR safety: as kernels_avx2.cpp. Everything here lives in an anonymous
// namespace except cpu_kernels_avx512(); the AVX2 fragments are pasted in
// again (so this table's dequantizers, quantizers and remaining dots are
// the AVX2 ones recompiled here, with internal linkage), then the 512-bit
// fragments. The included headers contribute only static inline functions,
// constexpr data, intrinsics and declarations (<cpuid.h>: static inline
// functions only; cpu_amx_usable() is declared
// here rather than through core/cpu_features.h, which has inline members and
// <string>); the table is a compile-time
// constant; the per-thread AMX state is a trivially constructible
// thread_local and its scratch comes from aligned_alloc (no std:: templates
// instantiated here).
//
// Numerics: dequantizers and activation quantizers are the AVX2 ones (bit-
// identical to cpu-generic); Q4_K/Q5_K/Q6_K/Q8_0 dots and tiles are 512-bit
// with VNNI (exact integer parts, float rounding of the block sums only),
// F16/BF16 tiles 16-lane (exact products, float sums), and the
// attention/exp kernels are 16-lane versions of the AVX2 ones.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__AVX512VNNI__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__) || \
    !defined(__AMX_TILE__) || !defined(__AMX_INT8__)
#error "kernels_avx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c -mamx-tile -mamx-int8"
#endif

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge
// source of their masked builtins, which -Wmaybe-uninitialized reports at
// every use; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "cpu/generic/iq_grids.h"

namespace guild {

bool cpu_amx_usable();  // core/cpu_features.cpp

namespace {

#include "../avx2/avx2_common.inc"
#include "../avx2/dequant_avx2.inc"
#include "../avx2/quantize_avx2.inc"
#include "../avx2/vec_dot_avx2.inc"
#include "../avx2/iq_grid_avx2.inc"
#include "../avx2/ternary_avx2.inc"
#include "../avx2/gemm_avx2.inc"
#include "../avx2/half_avx2.inc"
#include "gemm_avx512.inc"
#include "gemm_amx.inc"
#include "iq_grid_avx512.inc"
#include "half_avx512.inc"

constexpr void set_type(CpuKernelTable& t, TensorType type, DequantRowFn dq, TensorType act, VecDotFn dot,
                        GemmFn gemm = nullptr) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type)];
  k.dequant_row = dq;
  k.vec_dot_type = act;
  k.vec_dot = dot;
  k.gemm = gemm;
}

constexpr CpuKernelTable make_avx512_table() {
  CpuKernelTable t{};
  t.name = "cpu-avx512";
  using T = TensorType;
  set_type(t, T::F32, dq_f32, T::F32, vd_f32);
  set_type(t, T::F16, dq_f16, T::F16, tile_vec_dot_avx2<F16Tile512, 1>, tile_gemm_avx2<F16Tile512, 1, 1, 4>);
  set_type(t, T::BF16, dq_bf16, T::BF16, vd_bf16_512, gemm_bf16_512);
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
  set_type(t, T::IQ2_XXS, dq_iq2_xxs, T::Q8_K, vd_iq2_xxs_512);
  set_type(t, T::IQ2_XS, dq_iq2_xs, T::Q8_K, vd_iq2_xs_512);
  set_type(t, T::IQ2_S, dq_iq2_s, T::Q8_K, vd_iq2_s_512);
  set_type(t, T::IQ3_XXS, dq_iq3_xxs, T::Q8_K, vd_iq3_xxs_512);
  set_type(t, T::IQ3_S, dq_iq3_s, T::Q8_K, vd_iq3_s_512);
  set_type(t, T::IQ1_S, dq_iq1_s, T::Q8_K, vd_iq1_s_512);
  set_type(t, T::IQ1_M, dq_iq1_m, T::Q8_K, vd_iq1_m_512);
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

  t.attn_scores_f16 = attn_scores_f16_512;
  t.attn_scores_f32 = attn_scores_f32_512;
  t.attn_pv_f16 = attn_pv_f16_512;
  t.attn_pv_f32 = attn_pv_f32_512;
  t.softmax_exp = softmax_exp_512;
  t.swiglu_f32 = swiglu_f32_512;
  return t;
}

constexpr CpuKernelTable kAvx512Table = make_avx512_table();

}  // namespace

const CpuKernelTable* cpu_kernels_avx512() { return &kAvx512Table; }

}  // namespace guild
