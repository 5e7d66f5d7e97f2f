// Reference activation quantizers, byte-identical to what llama.cpp's x86 CPU
// backend (which produced our reference fixtures) computes:
//  * F16 / BF16: round to nearest even (BF16 keeps subnormals and quiets NaNs
//    as ggml does; F16 NaNs become the canonical quiet NaN, where F16C keeps
//    payload bits -- activations are never NaN in a working model);
//  * Q8_0 / Q8_1: d = amax / 127, id = 127 / amax, q = round-half-even(x * id)
//    (ggml's generic *_ref uses id = 1/d and roundf; the x86 path does not,
//    and matching it keeps quantized logits closest to the reference);
//    Q8_1 also stores s = fp16(d * sum(q)).
//  * Q8_K: the element of largest magnitude (first one on ties) sets
//    iscale = -127 / max, q = min(127, round-half-even(iscale * x)),
//    d = 1 / iscale (float), bsums = sums of 16 quants. An all-zero block
//    gets d = 0 and zero quants and bsums (ggml leaves bsums unwritten there).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// F16 / BF16 activations (for F16 / BF16 weights): round to nearest even,
// like ggml_cpu_fp32_to_fp16 (F16C) and ggml_cpu_fp32_to_bf16.
void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(src[i]);
}

namespace {

// amax, d, id of one 32-element block, as ggml's reference computes them.
struct Q8Scale { float d, id; };
Q8Scale q8_scale32(const float* x) {
  float amax = 0.0f;
  for (int l = 0; l < kQK32; ++l) {
    const float a = std::fabs(x[l]);
    amax = amax > a ? amax : a;  // MAX(amax, fabsf(v))
  }
  const float d = amax / 127.0f;
  return {d, amax != 0.0f ? 127.0f / amax : 0.0f};
}

}  // namespace

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK32; ++i, src += kQK32) {
    const Q8Scale s = q8_scale32(src);
    y[i].d = f32_to_fp16(s.d);
    for (int l = 0; l < kQK32; ++l) y[i].qs[l] = static_cast<int8_t>(std::nearbyint(src[l] * s.id));
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK32; ++i, src += kQK32) {
    const Q8Scale s = q8_scale32(src);
    y[i].d = f32_to_fp16(s.d);
    int sum = 0;
    for (int l = 0; l < kQK32; ++l) {
      y[i].qs[l] = static_cast<int8_t>(std::nearbyint(src[l] * s.id));
      sum += y[i].qs[l];
    }
    y[i].s = f32_to_fp16(static_cast<float>(sum) * s.d);
  }
}

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int l = 0; l < kQK_K; ++l) {
      const float a = std::fabs(src[l]);
      if (a > amax) { amax = a; max = src[l]; }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int l = 0; l < kQK_K; ++l) {
      const int v = static_cast<int>(std::nearbyint(iscale * src[l]));  // ties to even
      y[i].qs[l] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace guild::cpu_generic
