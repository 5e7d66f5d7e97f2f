// Reference dequantizers for the 32-element "legacy" block types.
// Each output is computed with exactly the float operations of ggml's
// to_float (one int->float conversion, one multiply, for Q4_1/Q5_1 one add),
// so results are bit-identical. Requires -ffp-contract=off (set in CMake).
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

void dequant_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int l = 0; l < 16; ++l) {
      const int lo = (b[i].qs[l] & 0xF) - 8;
      const int hi = (b[i].qs[l] >> 4) - 8;
      dst[l] = static_cast<float>(lo) * d;
      dst[l + 16] = static_cast<float>(hi) * d;
    }
  }
}

void dequant_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    const float m = fp16_to_f32(b[i].m);
    for (int l = 0; l < 16; ++l) {
      dst[l] = static_cast<float>(b[i].qs[l] & 0xF) * d + m;
      dst[l + 16] = static_cast<float>(b[i].qs[l] >> 4) * d + m;
    }
  }
}

void dequant_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int l = 0; l < 16; ++l) {
      const int lo = static_cast<int>((b[i].qs[l] & 0xF) | (((qh >> l) & 1u) << 4)) - 16;
      const int hi = static_cast<int>((b[i].qs[l] >> 4) | (((qh >> (l + 16)) & 1u) << 4)) - 16;
      dst[l] = static_cast<float>(lo) * d;
      dst[l + 16] = static_cast<float>(hi) * d;
    }
  }
}

void dequant_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    const float m = fp16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int l = 0; l < 16; ++l) {
      const uint32_t lo = (b[i].qs[l] & 0xF) | (((qh >> l) & 1u) << 4);
      const uint32_t hi = (b[i].qs[l] >> 4) | (((qh >> (l + 16)) & 1u) << 4);
      dst[l] = static_cast<float>(lo) * d + m;
      dst[l + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequant_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int l = 0; l < kQK32; ++l) dst[l] = static_cast<float>(b[i].qs[l]) * d;
  }
}

}  // namespace guild::cpu_generic
