// Reference dot products of 32-element weight blocks with Q8_0 / Q8_1
// activations (the pairing llama.cpp's CPU backend uses). Per block the
// integer dot is exact; blocks are combined in float as
//   sum += (d_w * d_a) * isum            (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4)
//   sum += (d_w * d_a) * isum + m_w * s_a  (Q4_1, Q5_1; s_a = fp16(d_a*sum q_a))
// Using s_a (rounded to fp16) for the min term is what llama.cpp does too.
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

namespace {

// 5-bit quant j (0..31) of a Q5_0/Q5_1 block given its packed high bits.
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

inline int q4_value(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }

}  // namespace

float vec_dot_q4_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += (q4_value(x[i].qs, j) - 8) * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q4_1(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += q4_value(x[i].qs, j) * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum) +
           fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
  }
  return sum;
}

float vec_dot_q5_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += (q5_value(x[i].qs, qh, j) - 16) * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q5_1(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += q5_value(x[i].qs, qh, j) * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum) +
           fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
  }
  return sum;
}

float vec_dot_q8_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_iq4_nl(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_NL*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += kIQ4NLValues[q4_value(x[i].qs, j)] * y[i].qs[j];
    sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_mxfp4(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockMXFP4*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK32; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += kMXFP4Values[q4_value(x[i].qs, j)] * y[i].qs[j];
    sum += e8m0_to_f32_half(x[i].e) * fp16_to_f32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace guild::cpu_generic
