// Scalar reference kernels (the "cpu-generic" table). Compiled without ISA
// flags and with -ffp-contract=off: the dequantizers reproduce ggml's
// reference to_float bit-for-bit, the activation quantizers reproduce
// quantize_row_q8_0_ref / q8_1_ref / q8_K_ref byte-for-byte.
// Only declarations here: this header is safe to include anywhere.
#pragma once
#include <cstdint>

namespace guild::cpu_generic {

// ---- dequantize: n elements (whole blocks) -> float
void dequant_f32(const void* src, float* dst, int64_t n);
void dequant_f16(const void* src, float* dst, int64_t n);
void dequant_bf16(const void* src, float* dst, int64_t n);
void dequant_q4_0(const void* src, float* dst, int64_t n);
void dequant_q4_1(const void* src, float* dst, int64_t n);
void dequant_q5_0(const void* src, float* dst, int64_t n);
void dequant_q5_1(const void* src, float* dst, int64_t n);
void dequant_q8_0(const void* src, float* dst, int64_t n);
void dequant_q2_k(const void* src, float* dst, int64_t n);
void dequant_q3_k(const void* src, float* dst, int64_t n);
void dequant_q4_k(const void* src, float* dst, int64_t n);
void dequant_q5_k(const void* src, float* dst, int64_t n);
void dequant_q6_k(const void* src, float* dst, int64_t n);
void dequant_iq4_nl(const void* src, float* dst, int64_t n);
void dequant_iq4_xs(const void* src, float* dst, int64_t n);
void dequant_mxfp4(const void* src, float* dst, int64_t n);
void dequant_iq2_xxs(const void* src, float* dst, int64_t n);
void dequant_iq2_xs(const void* src, float* dst, int64_t n);
void dequant_iq2_s(const void* src, float* dst, int64_t n);
void dequant_iq3_xxs(const void* src, float* dst, int64_t n);
void dequant_iq3_s(const void* src, float* dst, int64_t n);
void dequant_iq1_s(const void* src, float* dst, int64_t n);
void dequant_iq1_m(const void* src, float* dst, int64_t n);
void dequant_tq1_0(const void* src, float* dst, int64_t n);
void dequant_tq2_0(const void* src, float* dst, int64_t n);

// ---- activation quantizers
void quantize_f32(const float* src, void* dst, int64_t n);  // copy
void quantize_f16(const float* src, void* dst, int64_t n);   // round to nearest even
void quantize_bf16(const float* src, void* dst, int64_t n);  // round to nearest even
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);

// ---- dot(weight row, activation row)
float vec_dot_f32(int64_t n, const void* w, const void* a);   // F32 . F32
float vec_dot_f16(int64_t n, const void* w, const void* a);   // F16 . F16
float vec_dot_bf16(int64_t n, const void* w, const void* a);  // BF16 . BF16
float vec_dot_q4_0(int64_t n, const void* w, const void* a);  // . Q8_0
float vec_dot_q4_1(int64_t n, const void* w, const void* a);  // . Q8_1
float vec_dot_q5_0(int64_t n, const void* w, const void* a);  // . Q8_0
float vec_dot_q5_1(int64_t n, const void* w, const void* a);  // . Q8_1
float vec_dot_q8_0(int64_t n, const void* w, const void* a);  // . Q8_0
float vec_dot_iq4_nl(int64_t n, const void* w, const void* a);  // . Q8_0
float vec_dot_mxfp4(int64_t n, const void* w, const void* a);   // . Q8_0
float vec_dot_q2_k(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_q3_k(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_q4_k(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_q5_k(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_q6_k(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_iq4_xs(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_iq2_xxs(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_iq2_xs(int64_t n, const void* w, const void* a);   // . Q8_K
float vec_dot_iq2_s(int64_t n, const void* w, const void* a);    // . Q8_K
float vec_dot_iq3_xxs(int64_t n, const void* w, const void* a);  // . Q8_K
float vec_dot_iq3_s(int64_t n, const void* w, const void* a);    // . Q8_K
float vec_dot_iq1_s(int64_t n, const void* w, const void* a);    // . Q8_K
float vec_dot_iq1_m(int64_t n, const void* w, const void* a);    // . Q8_K
float vec_dot_tq1_0(int64_t n, const void* w, const void* a);    // . Q8_K
float vec_dot_tq2_0(int64_t n, const void* w, const void* a);    // . Q8_K

// ---- float helpers
float dot_f32(int64_t n, const float* a, const float* b);
void axpy_f32(int64_t n, float a, const float* x, float* y);
void fp16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

// ---- attention (see AttnScoresF16Fn etc. in core/kernel_table.h)
void attn_scores_f16(int n_keys, int head_dim, const uint16_t* k, int64_t stride, const float* const* q_rows, int n_q,
                     float scale, float* const* s_rows);
void attn_scores_f32(int n_keys, int head_dim, const float* k, int64_t stride, const float* const* q_rows, int n_q,
                     float scale, float* const* s_rows);
void attn_pv_f16(int n_keys, int head_dim, const uint16_t* v, int64_t stride, const float* const* p_rows, int n_q,
                 float* const* o_rows);
void attn_pv_f32(int n_keys, int head_dim, const float* v, int64_t stride, const float* const* p_rows, int n_q,
                 float* const* o_rows);
float softmax_exp(int64_t n, float* x);
void swiglu_f32(int64_t n, const float* gate, const float* up, float* out);

}  // namespace guild::cpu_generic
