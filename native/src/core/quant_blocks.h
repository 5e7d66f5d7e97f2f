// On-disk block layouts of GGUF's quantized tensor types, byte-for-byte as
// ggml stores them (little-endian). Plain structs without std:: members so the
// same header can be used from host kernels and, later, device code.
//
// Conventions:
//  * "fp16" fields hold IEEE half bits (convert with core/fp16.h).
//  * Every struct is followed by a static_assert on its size; the numbers are
//    the block_bytes column of core/tensor_type.cpp.
//  * Element order inside a block is documented per type (it is not always
//    the storage order of the nibbles). docs/QUANT_TYPES.md has the full picture.
//
// Everything callable here is `static inline` or constexpr data with internal
// linkage, so ISA-specific translation units (kernels/cpu/avx2) can include it
// without any risk of emitting a shared out-of-line copy compiled with AVX2.
#pragma once
#include <stdint.h>
#include <string.h>

namespace guild {

inline constexpr int kQK32 = 32;   // block size of the "legacy" types, IQ4_NL, MXFP4
inline constexpr int kQK_K = 256;  // super-block size of the K-quants, IQ1/IQ2/IQ3/IQ4_XS, TQ, Q8_K

// ---- 32-element blocks ------------------------------------------------------

// x[j] = d * (q[j] - 8); q[j] = low nibble of qs[j] (j < 16), high nibble of qs[j-16].
struct BlockQ4_0 {
  uint16_t d;       // fp16 scale
  uint8_t qs[16];   // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18, "BlockQ4_0 must be 18 bytes");

// x[j] = d * q[j] + m; nibbles as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;       // fp16 scale
  uint16_t m;       // fp16 minimum (added)
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 must be 20 bytes");

// x[j] = d * (q[j] - 16); q[j] = nibble (as Q4_0) | bit j of qh (little-endian u32) << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];    // 5th bits, element j -> bit j
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 must be 22 bytes");

// x[j] = d * q[j] + m; 5-bit q as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 must be 24 bytes");

// x[j] = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 must be 34 bytes");

// Activation type for Q4_1/Q5_1: x[j] = d * qs[j]; s = fp16(d * sum(qs)).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36, "BlockQ8_1 must be 36 bytes");

// x[j] = d * kIQ4NLValues[q[j]]; nibbles as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "BlockIQ4_NL must be 18 bytes");

// OCP microscaling FP4: x[j] = e8m0_half(e) * kMXFP4Values[q[j]] (E2M1 doubled,
// scale halved); nibbles as in Q4_0.
struct BlockMXFP4 {
  uint8_t e;        // E8M0 shared exponent
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17, "BlockMXFP4 must be 17 bytes");

// ---- 256-element super-blocks -----------------------------------------------

// 16 groups of 16. x = d*(sc&15)*q - dmin*(sc>>4), q in 0..3.
// Element 128*h + 32*s + l (h<2, s<4, l<32): q = (qs[32*h + l] >> 2*s) & 3,
// group = 8*h + 2*s + l/16 (groups run in element order).
struct BlockQ2_K {
  uint8_t scales[16];  // low nibble: scale, high nibble: min
  uint8_t qs[64];
  uint16_t d;          // fp16 super-scale for the scales
  uint16_t dmin;       // fp16 super-scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K must be 84 bytes");

// 16 groups of 16. x = d*(sc-32)*(q - 4*(1-hbit)), q in 0..3; element order as Q2_K,
// hbit of element 128*h + 32*s + l = (hmask[l] >> (4*h + s)) & 1.
// 6-bit sc[g]: low 4 bits from scales[g] (g<8) or scales[g-8]>>4, high 2 bits
// from (scales[8 + g%4] >> 2*(g/4)) & 3.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K must be 110 bytes");

// 8 groups of 32. x = d*sc[g]*q - dmin*m[g], q in 0..15; sc/m 6-bit, packed
// in 12 bytes (see k4_scale_min below). Element 64*c + l: low nibble of
// qs[32*c + l] (group 2c); element 64*c + 32 + l: high nibble (group 2c+1).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K must be 144 bytes");

// As Q4_K with a 5th bit: element 64*c + l gets (qh[l] >> 2c) & 1, element
// 64*c + 32 + l gets (qh[l] >> (2c+1)) & 1, worth 16.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K must be 176 bytes");

// 16 groups of 16. x = d*scales[g]*(q-32), q 6-bit. Per half h (128 elements;
// ql += 64h, qh += 32h), l < 32:
//   e = l      : ql[l] & 15      | ((qh[l] >> 0) & 3) << 4
//   e = l + 32 : ql[l + 32] & 15 | ((qh[l] >> 2) & 3) << 4
//   e = l + 64 : ql[l] >> 4      | ((qh[l] >> 4) & 3) << 4
//   e = l + 96 : ql[l + 32] >> 4 | ((qh[l] >> 6) & 3) << 4
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K must be 210 bytes");

// Activation type for the K-quants and IQ4_XS: x = d * qs; bsums[g] = sum of
// the 16 quants of group g. d is a plain float (not fp16).
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K must be 292 bytes");

// 8 groups of 32. x = d*(ls[g]-32)*kIQ4NLValues[q]; ls 6-bit: low 4 bits
// (scales_l[g/2] >> 4*(g%2)) & 15, high 2 bits (scales_h >> 2g) & 3.
// Group g: qs[16g + l] low nibble = element 32g + l, high nibble = 32g + 16 + l.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "BlockIQ4_XS must be 136 bytes");

// ---- 256-element grid types (IQ1, IQ2, IQ3) ----------------------------------------
//
// Each super-block is 8 sub-blocks of 32 elements; every run of 8 (IQ2, IQ1)
// or 4 (IQ3) consecutive elements is one entry of a fixed codebook ("grid",
// cpu/generic/iq_grids.h), stored as an index. IQ2/IQ3 grid values are
// positive magnitudes; one sign bit per element comes with them (bit j of
// the run's sign byte flips element j). IQ1 grid values are -1/0/+1 with a
// shift of +-1/8 per run. docs/QUANT_TYPES.md has the formulas.

// Sub-block b: 8 bytes at qs[4b]: bytes 0..3 = grid indices (iq2xxs, 256
// entries) of runs 0..3; the u32 at bytes 4..7 holds four 7-bit sign codes
// (bits 7r..7r+6 for run r; the 8th sign is their parity) and, in bits
// 28..31, the sub-block scale s: x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[32];
};
static_assert(sizeof(BlockIQ2_XXS) == 66, "BlockIQ2_XXS must be 66 bytes");

// Run r (0..31): qs[r] = 9-bit grid index (iq2xs, 512 entries) | 7-bit sign
// code << 9. scales[b]: low nibble = scale of runs 4b, 4b+1, high nibble of
// runs 4b+2, 4b+3: x = d * (0.5 + s) * 0.25 * grid * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[32];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_XS) == 74, "BlockIQ2_XS must be 74 bytes");

// Run r: grid index (iq2s, 1024 entries) = qs[r] | ((qh[r/4] >> 2(r%4)) & 3) << 8;
// sign byte = qs[32 + r] (all 8 signs stored). Scales as IQ2_XS.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[64];      // 32 index low bytes, then 32 sign bytes
  uint8_t qh[8];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_S) == 82, "BlockIQ2_S must be 82 bytes");

// Runs of 4: qs[0..63] are grid indices (iq3xxs, 256 entries), qs[8b + k]
// covers elements 32b + 4k..4k+3. qs[64 + 4b..] is a u32 for sub-block b with
// four 7-bit sign codes (one per 8 elements, as IQ2_XXS) and the scale s in
// bits 28..31: x = d * (0.5 + s) * 0.5 * grid * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[96];
};
static_assert(sizeof(BlockIQ3_XXS) == 98, "BlockIQ3_XXS must be 98 bytes");

// Runs of 4: grid index (iq3s, 512 entries) of qs[8b + k] =
// qs[8b + k] | ((qh[b] >> k) & 1) << 8; signs[4b + e] = sign byte of elements
// 32b + 8e..8e+7. Scale of sub-block b: nibble b%2 of scales[b/2]:
// x = d * (1 + 2s) * grid * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
static_assert(sizeof(BlockIQ3_S) == 110, "BlockIQ3_S must be 110 bytes");

// Sub-block b, run r (0..3): grid index (iq1s, 2048 entries) =
// qs[4b + r] | ((qh[b] >> 3r) & 7) << 8; qh[b] bits 12..14 = scale s, bit 15 =
// sign of the shift: x = d * (2s + 1) * (grid + (bit15 ? -1/8 : +1/8)).
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
static_assert(sizeof(BlockIQ1_S) == 50, "BlockIQ1_S must be 50 bytes");

// No stored d: the fp16 super-scale is the top nibbles of the four u16 words
// of scales (iq1m_super_scale). Sub-block b, run r: grid index (iq1s) =
// qs[4b + r] | ((qh[2b + r/2] >> 4(r%2)) & 7) << 8, shift sign = bit 3 of that
// nibble. Scales: u16 word w = b/2, 3-bit fields at bit 6(b%2) (runs 0, 1) and
// 6(b%2) + 3 (runs 2, 3): x = d * (2s + 1) * (grid +- 1/8).
struct BlockIQ1_M {
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ1_M) == 56, "BlockIQ1_M must be 56 bytes");

// ---- ternary types -------------------------------------------------------------

// Trits t in 0..2 (x = d * (t - 1)) packed 5 per byte as a base-3 fixed-point
// fraction: trit n of byte v is ((v * 3^n) mod 256) * 3 >> 8. Elements:
// qs[m] (m < 32) holds 32n + m; qs[32 + m] (m < 16) holds 160 + 16n + m;
// qh[j] (4 trits) holds 240 + 4n + j.
struct BlockTQ1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54, "BlockTQ1_0 must be 54 bytes");

// 2-bit t (x = d * (t - 1)): element 128h + 32l + m = (qs[32h + m] >> 2l) & 3.
struct BlockTQ2_0 {
  uint8_t qs[64];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66, "BlockTQ2_0 must be 66 bytes");

// ---- value tables and small decoders -------------------------------------------

// Non-linear 4-bit levels of IQ4_NL / IQ4_XS.
static constexpr int8_t kIQ4NLValues[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

// E2M1 (FP4) values times two; the block scale is halved to compensate.
static constexpr int8_t kMXFP4Values[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

// 2^(e-127) / 2 as a float (the E8M0 scale with the factor 1/2 folded in).
// e = 0 and 1 give the subnormals 2^-128 and 2^-127.
static inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// Q4_K / Q5_K: 6-bit scale and min of group g (0..7) from the 12 packed bytes.
static inline void k4_scale_min(int g, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (g < 4) {
    *sc = s[g] & 63;
    *m = s[g + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[g + 4] & 0xF) | ((s[g - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[g + 4] >> 4) | ((s[g] >> 6) << 4));
  }
}

// Q3_K: the 16 signed group scales (already minus 32).
static inline void q3k_scales(const uint8_t* s, int8_t out[16]) {
  for (int g = 0; g < 16; ++g) {
    const int lo = g < 8 ? (s[g] & 0xF) : (s[g - 8] >> 4);
    const int hi = (s[8 + (g & 3)] >> (2 * (g >> 2))) & 3;
    out[g] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// IQ4_XS: the signed scale (minus 32) of group g (0..7).
static inline int iq4xs_scale(const BlockIQ4_XS& b, int g) {
  const int lo = (b.scales_l[g >> 1] >> (4 * (g & 1))) & 0xF;
  const int hi = (b.scales_h >> (2 * g)) & 3;
  return (lo | (hi << 4)) - 32;
}

// IQ1_M: the fp16 bits of the super-block scale, gathered from the top
// nibble of each of the four little-endian u16 words of `scales`.
static inline uint16_t iq1m_super_scale(const uint8_t* scales) {
  uint16_t w[4];
  memcpy(w, scales, 8);
  return static_cast<uint16_t>((w[0] >> 12) | ((w[1] >> 8) & 0x00F0) | ((w[2] >> 4) & 0x0F00) | (w[3] & 0xF000));
}

// IQ1_M: the odd multiplier 2s + 1 of half h (0: elements 0..15, 1: 16..31)
// of sub-block b.
static inline int iq1m_sub_scale(const uint8_t* scales, int b, int h) {
  const int w = scales[2 * (b >> 1)] | (scales[2 * (b >> 1) + 1] << 8);
  return 2 * ((w >> (6 * (b & 1) + 3 * h)) & 7) + 1;
}

// TQ1_0: trit (0..2) of element e (layout at BlockTQ1_0).
static inline int tq1_trit(const BlockTQ1_0& b, int e) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  uint8_t v;
  int n;
  if (e < 160) {
    v = b.qs[e & 31];
    n = e >> 5;
  } else if (e < 240) {
    v = b.qs[32 + ((e - 160) & 15)];
    n = (e - 160) >> 4;
  } else {
    v = b.qh[(e - 240) & 3];
    n = (e - 240) >> 2;
  }
  const uint8_t q = static_cast<uint8_t>(v * kPow3[n]);  // the trit's digit moved to the top (mod 256)
  return (q * 3) >> 8;
}

}  // namespace guild
