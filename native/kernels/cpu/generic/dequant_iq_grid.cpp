// Reference dequantizers for the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S) and the ternary types (TQ1_0, TQ2_0).
//
// Bit-exact with ggml's to_float: each value is formed with ggml's float
// operations in ggml's order — the sub-block factor first (e.g.
// d * (0.5 + s) * 0.25, or d * (2s + 1)), then one multiply by the grid
// value (IQ1: by grid + -1/8, an exact sum), then the sign (an exact
// negation, what ggml's "* -1.f" does).
#include <string.h>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"
#include "cpu/generic/iq_grids.h"

namespace guild::cpu_generic {

namespace {

using namespace iq_grids;

// y[j] = scale * magnitude j of `run` (len values, one byte each), negated
// where bit j of `signs` is set.
template <typename Run>
inline void emit_signed(Run run, int len, unsigned signs, float scale, float* y) {
  for (int j = 0; j < len; ++j) {
    const float v = scale * static_cast<float>(static_cast<uint8_t>(run >> (8 * j)));
    y[j] = (signs >> j) & 1 ? -v : v;
  }
}

// y[j] = scale * (int8 value j of `run` + shift), j < 8 (IQ1).
inline void emit_shifted(uint64_t run, float shift, float scale, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = scale * (static_cast<float>(static_cast<int8_t>(run >> (8 * j))) + shift);
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

}  // namespace

void dequant_iq2_xxs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XXS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const auto* qs = reinterpret_cast<const uint8_t*>(b[i].qs);
    for (int sb = 0; sb < 8; ++sb, qs += 8) {
      const uint32_t meta = load_u32(qs + 4);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
      for (int r = 0; r < 4; ++r, dst += 8)
        emit_signed(kIQ2XXSGrid[qs[r]], 8, kIQSignBytes.v[(meta >> (7 * r)) & 127], db, dst);
    }
  }
}

void dequant_iq2_xs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const float db[2] = {d * (0.5f + static_cast<float>(b[i].scales[sb] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(b[i].scales[sb] >> 4)) * 0.25f};
      for (int r = 0; r < 4; ++r, dst += 8) {
        const uint16_t q = b[i].qs[4 * sb + r];
        emit_signed(kIQ2XSGrid[q & 511], 8, kIQSignBytes.v[q >> 9], db[r >> 1], dst);
      }
    }
  }
}

void dequant_iq2_s(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint8_t* signs = b[i].qs + 32;
    for (int sb = 0; sb < 8; ++sb) {
      const float db[2] = {d * (0.5f + static_cast<float>(b[i].scales[sb] & 0xF)) * 0.25f,
                           d * (0.5f + static_cast<float>(b[i].scales[sb] >> 4)) * 0.25f};
      for (int r = 0; r < 4; ++r, dst += 8) {
        const int idx = b[i].qs[4 * sb + r] | (((b[i].qh[sb] >> (2 * r)) & 3) << 8);
        emit_signed(kIQ2SGrid[idx], 8, signs[4 * sb + r], db[r >> 1], dst);
      }
    }
  }
}

void dequant_iq3_xxs(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_XXS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* qs = b[i].qs + 8 * sb;
      const uint32_t meta = load_u32(b[i].qs + 64 + 4 * sb);
      const float db = d * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
      for (int r = 0; r < 4; ++r, dst += 8) {
        const unsigned signs = kIQSignBytes.v[(meta >> (7 * r)) & 127];
        emit_signed(kIQ3XXSGrid[qs[2 * r]], 4, signs, db, dst);
        emit_signed(kIQ3XXSGrid[qs[2 * r + 1]], 4, signs >> 4, db, dst + 4);
      }
    }
  }
}

void dequant_iq3_s(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const float db = d * static_cast<float>(1 + 2 * ((b[i].scales[sb >> 1] >> (4 * (sb & 1))) & 0xF));
      const uint8_t* qs = b[i].qs + 8 * sb;
      for (int k = 0; k < 8; ++k, dst += 4) {
        const int idx = qs[k] | (((b[i].qh[sb] >> k) & 1) << 8);
        emit_signed(kIQ3SGrid[idx], 4, b[i].signs[4 * sb + (k >> 1)] >> (4 * (k & 1)), db, dst);
      }
    }
  }
}

void dequant_iq1_s(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const unsigned qh = b[i].qh[sb];
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float shift = qh & 0x8000 ? -kIQ1Delta : kIQ1Delta;
      for (int r = 0; r < 4; ++r, dst += 8)
        emit_shifted(kIQ1SGrid[b[i].qs[4 * sb + r] | (((qh >> (3 * r)) & 7) << 8)], shift, dl, dst);
    }
  }
}

void dequant_iq1_m(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_M*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(iq1m_super_scale(b[i].scales));
    for (int sb = 0; sb < 8; ++sb) {
      const float dl[2] = {d * static_cast<float>(iq1m_sub_scale(b[i].scales, sb, 0)),
                           d * static_cast<float>(iq1m_sub_scale(b[i].scales, sb, 1))};
      for (int r = 0; r < 4; ++r, dst += 8) {
        const unsigned nib = (b[i].qh[2 * sb + (r >> 1)] >> (4 * (r & 1))) & 0xF;
        const float shift = nib & 8 ? -kIQ1Delta : kIQ1Delta;
        emit_shifted(kIQ1SGrid[b[i].qs[4 * sb + r] | ((nib & 7) << 8)], shift, dl[r >> 1], dst);
      }
    }
  }
}

void dequant_tq1_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockTQ1_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQK_K; ++e) dst[e] = static_cast<float>(tq1_trit(b[i], e) - 1) * d;
  }
}

void dequant_tq2_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockTQ2_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const float d = fp16_to_f32(b[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const int t = (b[i].qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
      dst[e] = static_cast<float>(t - 1) * d;
    }
  }
}

}  // namespace guild::cpu_generic
