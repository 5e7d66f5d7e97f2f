// Reference float kernels: F32/F16/BF16 rows (dequantize = exact widening),
// their dot products with F32 activations (F32 accumulation), and the float
// helpers of the table. Dots use 8 interleaved partial sums (element i goes
// to partial i % 8), combined pairwise at the end; this is deterministic and
// lets the compiler vectorize without changing results.
#include <cstring>

#include "core/fp16.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

namespace {

template <typename Load>
float dot8(int64_t n, const float* b, Load load) {
  float p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) p[k] += load(i + k) * b[i + k];
  for (int k = 0; i < n; ++i, ++k) p[k] += load(i) * b[i];
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
  return dot8(n, static_cast<const float*>(a), [x](int64_t i) { return fp16_to_f32(x[i]); });
}

float vec_dot_bf16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  return dot8(n, static_cast<const float*>(a), [x](int64_t i) { return bf16_to_f32(x[i]); });
}

float dot_f32(int64_t n, const float* a, const float* b) {
  return dot8(n, b, [a](int64_t i) { return a[i]; });
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

}  // namespace guild::cpu_generic
