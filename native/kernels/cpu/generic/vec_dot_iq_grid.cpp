// Reference dot products of the grid types and the ternary types with Q8_K
// activations (llama.cpp's pairing). Every dequantized value is d_w times an
// integer times a power of two:
//   IQ2_*    d * (2s + 1) * grid * sign / 8
//   IQ3_XXS  d * (2s + 1) * grid * sign / 4
//   IQ3_S    d * (2s + 1) * grid * sign
//   IQ1_*    d * (2s + 1) * (8 * grid +- 1) / 8
//   TQ*      d * (t - 1)
// so per super-block isum = sum (2s + 1) * (integer value) * a_q is exact, and
// sum += (d_w * d_a) * isum in float; the power of two is applied once at
// the end (exact).
#include <string.h>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"
#include "cpu/generic/iq_grids.h"

namespace guild::cpu_generic {

namespace {

using namespace iq_grids;

// sum_j magnitude_j * (bit j of signs ? -1 : 1) * a[j] over a run of len.
template <typename Run>
inline int signed_run_dot(Run run, int len, unsigned signs, const int8_t* a) {
  int s = 0;
  for (int j = 0; j < len; ++j) {
    const int v = static_cast<uint8_t>(run >> (8 * j)) * a[j];
    s += (signs >> j) & 1 ? -v : v;
  }
  return s;
}

// sum_j (8 * grid_j + shift8) * a[j] over a run of 8 IQ1 values (shift8 = +-1).
inline int shifted_run_dot(uint64_t run, int shift8, const int8_t* a) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += (8 * static_cast<int8_t>(run >> (8 * j)) + shift8) * a[j];
  return s;
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

inline float block_factor(uint16_t dw, const BlockQ8_K& y) { return fp16_to_f32(dw) * y.d; }

}  // namespace

float vec_dot_iq2_xxs(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ2_XXS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto* qs = reinterpret_cast<const uint8_t*>(x[i].qs);
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb, qs += 8) {
      const uint32_t meta = load_u32(qs + 4);
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s = 0;
      for (int r = 0; r < 4; ++r)
        s += signed_run_dot(kIQ2XXSGrid[qs[r]], 8, kIQSignBytes.v[(meta >> (7 * r)) & 127], q8 + 8 * r);
      isum += static_cast<int>(2 * (meta >> 28) + 1) * s;
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float vec_dot_iq2_xs(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ2_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s[2] = {0, 0};
      for (int r = 0; r < 4; ++r) {
        const uint16_t q = x[i].qs[4 * sb + r];
        s[r >> 1] += signed_run_dot(kIQ2XSGrid[q & 511], 8, kIQSignBytes.v[q >> 9], q8 + 8 * r);
      }
      isum += (2 * (x[i].scales[sb] & 0xF) + 1) * s[0] + (2 * (x[i].scales[sb] >> 4) + 1) * s[1];
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float vec_dot_iq2_s(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ2_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s[2] = {0, 0};
      for (int r = 0; r < 4; ++r) {
        const int idx = x[i].qs[4 * sb + r] | (((x[i].qh[sb] >> (2 * r)) & 3) << 8);
        s[r >> 1] += signed_run_dot(kIQ2SGrid[idx], 8, x[i].qs[32 + 4 * sb + r], q8 + 8 * r);
      }
      isum += (2 * (x[i].scales[sb] & 0xF) + 1) * s[0] + (2 * (x[i].scales[sb] >> 4) + 1) * s[1];
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float vec_dot_iq3_xxs(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ3_XXS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* qs = x[i].qs + 8 * sb;
      const uint32_t meta = load_u32(x[i].qs + 64 + 4 * sb);
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s = 0;
      for (int r = 0; r < 4; ++r) {
        const unsigned signs = kIQSignBytes.v[(meta >> (7 * r)) & 127];
        s += signed_run_dot(kIQ3XXSGrid[qs[2 * r]], 4, signs, q8 + 8 * r);
        s += signed_run_dot(kIQ3XXSGrid[qs[2 * r + 1]], 4, signs >> 4, q8 + 8 * r + 4);
      }
      isum += static_cast<int>(2 * (meta >> 28) + 1) * s;
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return 0.25f * sum;
}

float vec_dot_iq3_s(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ3_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* qs = x[i].qs + 8 * sb;
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s = 0;
      for (int k = 0; k < 8; ++k) {
        const int idx = qs[k] | (((x[i].qh[sb] >> k) & 1) << 8);
        s += signed_run_dot(kIQ3SGrid[idx], 4, x[i].signs[4 * sb + (k >> 1)] >> (4 * (k & 1)), q8 + 4 * k);
      }
      isum += (2 * ((x[i].scales[sb >> 1] >> (4 * (sb & 1))) & 0xF) + 1) * s;
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_iq1_s(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ1_S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const unsigned qh = x[i].qh[sb];
      const int shift8 = qh & 0x8000 ? -1 : 1;
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s = 0;
      for (int r = 0; r < 4; ++r)
        s += shifted_run_dot(kIQ1SGrid[x[i].qs[4 * sb + r] | (((qh >> (3 * r)) & 7) << 8)], shift8, q8 + 8 * r);
      isum += static_cast<int>(2 * ((qh >> 12) & 7) + 1) * s;
    }
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float vec_dot_iq1_m(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ1_M*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int sb = 0; sb < 8; ++sb) {
      const int8_t* q8 = y[i].qs + 32 * sb;
      int s[2] = {0, 0};
      for (int r = 0; r < 4; ++r) {
        const unsigned nib = (x[i].qh[2 * sb + (r >> 1)] >> (4 * (r & 1))) & 0xF;
        s[r >> 1] += shifted_run_dot(kIQ1SGrid[x[i].qs[4 * sb + r] | ((nib & 7) << 8)], nib & 8 ? -1 : 1, q8 + 8 * r);
      }
      isum += iq1m_sub_scale(x[i].scales, sb, 0) * s[0] + iq1m_sub_scale(x[i].scales, sb, 1) * s[1];
    }
    sum += block_factor(iq1m_super_scale(x[i].scales), y[i]) * static_cast<float>(isum);
  }
  return 0.125f * sum;
}

float vec_dot_tq1_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockTQ1_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int e = 0; e < kQK_K; ++e) isum += (tq1_trit(x[i], e) - 1) * y[i].qs[e];
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_tq2_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockTQ2_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int e = 0; e < kQK_K; ++e)
      isum += (((x[i].qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3) - 1) * y[i].qs[e];
    sum += block_factor(x[i].d, y[i]) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace guild::cpu_generic
