// Reference float kernels: F32/F16/BF16 rows (dequantize = exact widening),
// their dot products, and the float helpers of the table. As in llama.cpp's
// CPU backend, F32 rows take F32 activations and F16 / BF16 rows activations
// rounded to F16 / BF16 (quantize_act.cpp); the product of two halves (11-bit
// significands) or two bfloat16s (8-bit) is exact in float, so the only
// roundings are those of the F32 sums. Dots use 8 interleaved partial sums
// (element i goes to partial i % 8), combined pairwise at the end; this is
// deterministic and lets the compiler vectorize without changing results.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

namespace {

// sum_i product(i), i < n.
template <typename Product>
float dot8(int64_t n, Product product) {
  float p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) p[k] += product(i + k);
  for (int k = 0; i < n; ++i, ++k) p[k] += product(i);
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

}  // namespace

void dequant_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequant_f16(const void* src, float* dst, int64_t n) {
  fp16_to_f32_row(static_cast<const uint16_t*>(src), dst, n);
}

void dequant_bf16(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

float vec_dot_f32(int64_t n, const void* w, const void* a) {
  return dot_f32(n, static_cast<const float*>(w), static_cast<const float*>(a));
}

float vec_dot_f16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  return dot8(n, [x, y](int64_t i) { return fp16_to_f32(x[i]) * fp16_to_f32(y[i]); });
}

float vec_dot_bf16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  return dot8(n, [x, y](int64_t i) { return bf16_to_f32(x[i]) * bf16_to_f32(y[i]); });
}

float dot_f32(int64_t n, const float* a, const float* b) {
  return dot8(n, [a, b](int64_t i) { return a[i] * b[i]; });
}

void axpy_f32(int64_t n, float a, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void fp16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
}

void f32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

// ---- attention: plain loops, one query row at a time ----------------------------------

namespace {

template <typename Elem, typename ToF32>
void scores(int n_keys, int head_dim, const Elem* k, int64_t stride, const float* const* q_rows, int n_q, float scale,
            float* const* s_rows, ToF32 to_f32) {
  for (int q = 0; q < n_q; ++q) {
    const float* qv = q_rows[q];
    for (int j = 0; j < n_keys; ++j) {
      const Elem* kj = k + j * stride;
      s_rows[q][j] = dot8(head_dim, [kj, qv, &to_f32](int64_t i) { return to_f32(kj[i]) * qv[i]; }) * scale;
    }
  }
}

template <typename Elem, typename ToF32>
void pv(int n_keys, int head_dim, const Elem* v, int64_t stride, const float* const* p_rows, int n_q,
        float* const* o_rows, ToF32 to_f32) {
  for (int q = 0; q < n_q; ++q) {
    float* o = o_rows[q];
    for (int d = 0; d < head_dim; ++d) o[d] = 0.0f;
    for (int j = 0; j < n_keys; ++j) {
      const float p = p_rows[q][j];
      const Elem* vj = v + j * stride;
      for (int d = 0; d < head_dim; ++d) o[d] += p * to_f32(vj[d]);
    }
  }
}

}  // namespace

void attn_scores_f16(int n_keys, int head_dim, const uint16_t* k, int64_t stride, const float* const* q_rows, int n_q,
                     float scale, float* const* s_rows) {
  scores(n_keys, head_dim, k, stride, q_rows, n_q, scale, s_rows, [](uint16_t h) { return fp16_to_f32(h); });
}

void attn_scores_f32(int n_keys, int head_dim, const float* k, int64_t stride, const float* const* q_rows, int n_q,
                     float scale, float* const* s_rows) {
  scores(n_keys, head_dim, k, stride, q_rows, n_q, scale, s_rows, [](float f) { return f; });
}

void attn_pv_f16(int n_keys, int head_dim, const uint16_t* v, int64_t stride, const float* const* p_rows, int n_q,
                 float* const* o_rows) {
  pv(n_keys, head_dim, v, stride, p_rows, n_q, o_rows, [](uint16_t h) { return fp16_to_f32(h); });
}

void attn_pv_f32(int n_keys, int head_dim, const float* v, int64_t stride, const float* const* p_rows, int n_q,
                 float* const* o_rows) {
  pv(n_keys, head_dim, v, stride, p_rows, n_q, o_rows, [](float f) { return f; });
}

float softmax_exp(int64_t n, float* x) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return static_cast<float>(sum);
}

void swiglu_f32(int64_t n, const float* gate, const float* up, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

}  // namespace guild::cpu_generic
