// Reference dequantizers for the table-driven 4-bit types: IQ4_NL, IQ4_XS
// (non-linear levels) and MXFP4 (E2M1 with an E8M0 block exponent).
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

void dequant_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int l = 0; l < 16; ++l) {
      dst[l] = d * static_cast<float>(kIQ4NLValues[b[i].qs[l] & 0xF]);
      dst[l + 16] = d * static_cast<float>(kIQ4NLValues[b[i].qs[l] >> 4]);
    }
  }
}

void dequant_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int g = 0; g < 8; ++g, dst += 32) {
      const float dl = d * static_cast<float>(iq4xs_scale(b[i], g));
      const uint8_t* qs = b[i].qs + 16 * g;
      for (int l = 0; l < 16; ++l) {
        dst[l] = dl * static_cast<float>(kIQ4NLValues[qs[l] & 0xF]);
        dst[l + 16] = dl * static_cast<float>(kIQ4NLValues[qs[l] >> 4]);
      }
    }
  }
}

void dequant_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / kQK32; ++i, dst += kQK32) {
    const float d = e8m0_to_f32_half(b[i].e);
    for (int l = 0; l < 16; ++l) {
      dst[l] = static_cast<float>(kMXFP4Values[b[i].qs[l] & 0xF]) * d;
      dst[l + 16] = static_cast<float>(kMXFP4Values[b[i].qs[l] >> 4]) * d;
    }
  }
}

}  // namespace guild::cpu_generic
