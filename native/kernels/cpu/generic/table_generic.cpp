// The "cpu-generic" kernel table: scalar reference kernels for every
// supported type. Built as a constant at compile time.
#include "core/kernel_table.h"
#include "cpu/generic/generic_kernels.h"

namespace guild {

namespace {

namespace g = cpu_generic;

constexpr void set_type(CpuKernelTable& t, TensorType type, DequantRowFn dq, TensorType act, VecDotFn dot) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type)];
  k.dequant_row = dq;
  k.vec_dot_type = act;
  k.vec_dot = dot;
}

constexpr CpuKernelTable make_generic_table() {
  CpuKernelTable t{};
  t.name = "cpu-generic";
  using T = TensorType;
  set_type(t, T::F32, g::dequant_f32, T::F32, g::vec_dot_f32);
  set_type(t, T::F16, g::dequant_f16, T::F16, g::vec_dot_f16);
  set_type(t, T::BF16, g::dequant_bf16, T::BF16, g::vec_dot_bf16);
  set_type(t, T::Q4_0, g::dequant_q4_0, T::Q8_0, g::vec_dot_q4_0);
  set_type(t, T::Q4_1, g::dequant_q4_1, T::Q8_1, g::vec_dot_q4_1);
  set_type(t, T::Q5_0, g::dequant_q5_0, T::Q8_0, g::vec_dot_q5_0);
  set_type(t, T::Q5_1, g::dequant_q5_1, T::Q8_1, g::vec_dot_q5_1);
  set_type(t, T::Q8_0, g::dequant_q8_0, T::Q8_0, g::vec_dot_q8_0);
  set_type(t, T::Q2_K, g::dequant_q2_k, T::Q8_K, g::vec_dot_q2_k);
  set_type(t, T::Q3_K, g::dequant_q3_k, T::Q8_K, g::vec_dot_q3_k);
  set_type(t, T::Q4_K, g::dequant_q4_k, T::Q8_K, g::vec_dot_q4_k);
  set_type(t, T::Q5_K, g::dequant_q5_k, T::Q8_K, g::vec_dot_q5_k);
  set_type(t, T::Q6_K, g::dequant_q6_k, T::Q8_K, g::vec_dot_q6_k);
  set_type(t, T::IQ4_NL, g::dequant_iq4_nl, T::Q8_0, g::vec_dot_iq4_nl);
  set_type(t, T::IQ4_XS, g::dequant_iq4_xs, T::Q8_K, g::vec_dot_iq4_xs);
  set_type(t, T::MXFP4, g::dequant_mxfp4, T::Q8_0, g::vec_dot_mxfp4);
  set_type(t, T::IQ2_XXS, g::dequant_iq2_xxs, T::Q8_K, g::vec_dot_iq2_xxs);
  set_type(t, T::IQ2_XS, g::dequant_iq2_xs, T::Q8_K, g::vec_dot_iq2_xs);
  set_type(t, T::IQ2_S, g::dequant_iq2_s, T::Q8_K, g::vec_dot_iq2_s);
  set_type(t, T::IQ3_XXS, g::dequant_iq3_xxs, T::Q8_K, g::vec_dot_iq3_xxs);
  set_type(t, T::IQ3_S, g::dequant_iq3_s, T::Q8_K, g::vec_dot_iq3_s);
  set_type(t, T::IQ1_S, g::dequant_iq1_s, T::Q8_K, g::vec_dot_iq1_s);
  set_type(t, T::IQ1_M, g::dequant_iq1_m, T::Q8_K, g::vec_dot_iq1_m);
  set_type(t, T::TQ1_0, g::dequant_tq1_0, T::Q8_K, g::vec_dot_tq1_0);
  set_type(t, T::TQ2_0, g::dequant_tq2_0, T::Q8_K, g::vec_dot_tq2_0);

  t.quantize_act[static_cast<uint32_t>(T::F32)] = g::quantize_f32;
  t.quantize_act[static_cast<uint32_t>(T::F16)] = g::quantize_f16;
  t.quantize_act[static_cast<uint32_t>(T::BF16)] = g::quantize_bf16;
  t.quantize_act[static_cast<uint32_t>(T::Q8_0)] = g::quantize_q8_0;
  t.quantize_act[static_cast<uint32_t>(T::Q8_1)] = g::quantize_q8_1;
  t.quantize_act[static_cast<uint32_t>(T::Q8_K)] = g::quantize_q8_k;

  t.dot_f32 = g::dot_f32;
  t.axpy_f32 = g::axpy_f32;
  t.fp16_to_f32_row = g::fp16_to_f32_row;
  t.f32_to_fp16_row = g::f32_to_fp16_row;

  t.attn_scores_f16 = g::attn_scores_f16;
  t.attn_scores_f32 = g::attn_scores_f32;
  t.attn_pv_f16 = g::attn_pv_f16;
  t.attn_pv_f32 = g::attn_pv_f32;
  t.softmax_exp = g::softmax_exp;
  t.swiglu_f32 = g::swiglu_f32;
  return t;
}

constexpr CpuKernelTable kGenericTable = make_generic_table();

}  // namespace

const CpuKernelTable& cpu_kernels_generic() { return kGenericTable; }

}  // namespace guild
