// Device helpers shared by the kernels: conversions, reductions, integer dot
// products and, per weight type, (a) the matrix-vector "unit" (a lane's share
// of one quant block, dotted with Q8_1 activations by dp4a) and (b) the
// dequantization of one 32-element run (for the tile loaders of the tensor-core
// kernels and for embedding lookups). Block layouts: core/quant_blocks.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

#include "core/quant_blocks.h"
#include "core/tensor_type.h"
#include "cuda/cuda_kernels.h"

namespace guild::cuda {

#define GUILD_CUDA_RETURN_IF(cond, err) \
  do {                                  \
    if (cond) return (err);             \
  } while (0)

// Launch epilogue: the error of the launch just made (configuration errors).
inline cudaError_t launch_status() { return cudaGetLastError(); }

// Programmatic dependent launch (sm_90+, docs/CUDA.md "Decode"): a kernel is
// launched while the previous one in its stream still runs, so the launch
// latency between the many small kernels of a decode step overlaps the tail
// of the one before. Every kernel starts with pdl_begin(): it waits until the
// previous grid has finished and its writes are visible (before touching any
// memory: reads and writes both), then lets the next grid start launching.
// Without the launch attribute both are no-ops.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// True once kernels_init() found every initialised device able to (compute
// capability >= 9.0) and GUILD_CUDA_PDL is not "0".
bool pdl_enabled();
// kernel<<<grid, block, smem, s>>>(args...) with programmatic stream
// serialization allowed when pdl_enabled().
template <typename... Params, typename... Args>
inline cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                              Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// GGUF type ids (core/tensor_type.h) as template arguments.
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10,
                   kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18,
                   kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22, kIQ4_XS = 23, kIQ1_M = 29, kBF16 = 30,
                   kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39;

__device__ __forceinline__ float h2f(uint32_t bits16) { return __half2float(__ushort_as_half((unsigned short)bits16)); }
__device__ __forceinline__ float bf2f(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Q8_1 quantization of one 32-run held one value per lane (all 32 lanes
// active), as the CPU tables do: d = amax/127, q = round-half-even(x * 127/amax);
// lane 0 stores (d, d * sum q) as half2.
__device__ __forceinline__ void q8_1_warp(float v, int8_t* q_dst, half2* ds_dst) {
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const int q = __float2int_rn(v * id);
  const int sum = warp_sum_int(q);
  *q_dst = static_cast<int8_t>(q);
  if ((threadIdx.x & 31) == 0) *ds_dst = __floats2half2_rn(d, d * static_cast<float>(sum));
}

// Loads of weight bytes through generic pointers: the same unit code reads
// global memory or a shared-memory staging copy.
// 32 bits from a 2-byte aligned address (little-endian).
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
  const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(q[0]) | (static_cast<uint32_t>(q[1]) << 16);
}
__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ uint4 ld_u128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

// A hint to bring the 128-byte line at p into L2 (no fault, no result):
// kernels issue it for weights before waiting for the previous kernel.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
// Every 128-byte line of [p, p + bytes) by one warp (lines from the one p is in).
__device__ __forceinline__ void prefetch_l2_range(const void* p, size_t bytes, int lane) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  for (uintptr_t a = (begin & ~static_cast<uintptr_t>(127)) + 128 * static_cast<uintptr_t>(lane); a < end; a += 32 * 128)
    prefetch_l2(reinterpret_cast<const void*>(a));
}

__device__ __forceinline__ void cp_async16_g2s(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src));
}

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

// Spreads 4 bits to bit 0 of each byte.
__device__ __forceinline__ uint32_t spread4(uint32_t x) { return (x * 0x00204081u) & 0x01010101u; }

// 16 bytes at p (any alignment) as four little-endian words: aligned 32-bit
// loads of the words that hold them, joined by funnel shifts. Every word read
// holds at least one of the 16 bytes, so nothing outside a buffer whose start
// and end are 4-byte aligned is touched (weight rows, their staged copies and
// whole matrices are 16-byte aligned). For MXFP4's 17-byte blocks.
__device__ __forceinline__ void ld_16_a1(const uint8_t* p, uint32_t* out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(a & ~static_cast<uintptr_t>(3));
  const uint32_t sh = 8u * static_cast<uint32_t>(a & 3);
  uint32_t w[5];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = ld_u32(base + 4 * i);
  w[4] = sh ? ld_u32(base + 16) : 0u;  // only when the 16 bytes reach into it
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = __funnelshift_r(w[i], w[i + 1], sh);
}

// Four 4-bit indices (byte n of idx, 0..15) looked up in a 16-byte table held
// as four little-endian words t0..t3: byte n of the result = table byte idx_n.
// The table halves are permuted with the low 3 index bits, bit 3 picks one.
__device__ __forceinline__ uint32_t lut16(uint32_t idx, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3) {
  const uint32_t sel = (idx & 0x7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(t0, t1, sel);
  const uint32_t hi = __byte_perm(t2, t3, sel);
  const uint32_t pick_hi = ((idx >> 3) & 0x01010101u) * 0xFFu;
  return (lo & ~pick_hi) | (hi & pick_hi);
}

// The int8 lanes of v negated where bit n of bits (n < 4) is set: (x ^ 0xFF) - 0xFF
// per byte (no borrow between bytes) is -x, and x - 0 is x.
__device__ __forceinline__ uint32_t negate_bytes(uint32_t v, uint32_t bits) {
  const uint32_t m = spread4(bits & 0xFu) * 0xFFu;
  return __vsub4(v ^ m, m);
}

// Sum of the four int8 lanes of a (a dp4a with ones).
__device__ __forceinline__ int byte_sum(int a, int acc) { return dp4a(0x01010101, a, acc); }

// Byte i (0..11) of the 12 packed K-quant scale bytes held in three words.
__device__ __forceinline__ uint32_t kbyte(uint32_t s0, uint32_t s1, uint32_t s2, int i) {
  const uint32_t w = i < 4 ? s0 : (i < 8 ? s1 : s2);
  return (w >> (8 * (i & 3))) & 0xFFu;
}
// Q4_K / Q5_K 6-bit scale and min of group g.
__device__ __forceinline__ void kscale_min(uint32_t s0, uint32_t s1, uint32_t s2, int g, float* sc, float* m) {
  if (g < 4) {
    *sc = static_cast<float>(kbyte(s0, s1, s2, g) & 63);
    *m = static_cast<float>(kbyte(s0, s1, s2, g + 4) & 63);
  } else {
    *sc = static_cast<float>((kbyte(s0, s1, s2, g + 4) & 0xF) | ((kbyte(s0, s1, s2, g - 4) >> 6) << 4));
    *m = static_cast<float>((kbyte(s0, s1, s2, g + 4) >> 4) | ((kbyte(s0, s1, s2, g) >> 6) << 4));
  }
}

// ---- matrix-vector units ------------------------------------------------------------
// A unit is one lane's share of a weight block. load() reads its bytes once;
// dot() combines them with one activation column: aq = the column's int8
// quants at the block's first element, ads = its half2 (d, d*sum) at the
// block's first 32-run.

template <uint32_t T> struct QUnit;

// Q4_K / Q5_K scales of the group pair (2u, 2u+1), u < 4, as two bytes each:
// sc = scale(2u) | scale(2u+1) << 8, mn = min(2u) | min(2u+1) << 8.
// `s` points at the 12 packed scale bytes (2-byte aligned).
__device__ __forceinline__ void kscale_pair(const uint8_t* s, int u, uint32_t* sc, uint32_t* mn) {
  const uint32_t a = ld_u16(s + 2 * u);            // bytes 2u, 2u+1
  const uint32_t c = ld_u16(s + 2 * (u + 2));      // bytes 2u+4, 2u+5
  const uint32_t lo = ld_u16(s + 2 * (u & 1));     // bytes 2(u-2), 2(u-2)+1 when u >= 2
  if (u < 2) {
    *sc = a & 0x3f3f;
    *mn = c & 0x3f3f;
  } else {
    *sc = (c & 0x0f0f) | ((lo & 0xc0c0) >> 2);
    *mn = ((c >> 4) & 0x0f0f) | ((a & 0xc0c0) >> 2);
  }
}

// Q4_K: unit u = group pair (2u, 2u+1): 32 quant bytes, two 128-bit loads,
// 64 weights.
template <> struct QUnit<kQ4_K> {
  static constexpr int QK = 256, BYTES = 144, UNITS = 4;
  struct W { uint4 q0, q1; uint32_t dm, sc, mn; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    W w;
    w.q0 = ld_u128(b + 16 + 32 * u);
    w.q1 = ld_u128(b + 32 + 32 * u);
    w.dm = ld_u32(b);
    kscale_pair(b + 4, u, &w.sc, &w.mn);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int8_t* a = aq + 64 * u;
    const int4 a00 = *reinterpret_cast<const int4*>(a);
    const int4 a01 = *reinterpret_cast<const int4*>(a + 16);
    const int4 a10 = *reinterpret_cast<const int4*>(a + 32);
    const int4 a11 = *reinterpret_cast<const int4*>(a + 48);
    constexpr int M = 0x0F0F0F0F;
    int s0 = 0, s1 = 0;
    s0 = dp4a(w.q0.x & M, a00.x, s0); s1 = dp4a((w.q0.x >> 4) & M, a10.x, s1);
    s0 = dp4a(w.q0.y & M, a00.y, s0); s1 = dp4a((w.q0.y >> 4) & M, a10.y, s1);
    s0 = dp4a(w.q0.z & M, a00.z, s0); s1 = dp4a((w.q0.z >> 4) & M, a10.z, s1);
    s0 = dp4a(w.q0.w & M, a00.w, s0); s1 = dp4a((w.q0.w >> 4) & M, a10.w, s1);
    s0 = dp4a(w.q1.x & M, a01.x, s0); s1 = dp4a((w.q1.x >> 4) & M, a11.x, s1);
    s0 = dp4a(w.q1.y & M, a01.y, s0); s1 = dp4a((w.q1.y >> 4) & M, a11.y, s1);
    s0 = dp4a(w.q1.z & M, a01.z, s0); s1 = dp4a((w.q1.z >> 4) & M, a11.z, s1);
    s0 = dp4a(w.q1.w & M, a01.w, s0); s1 = dp4a((w.q1.w >> 4) & M, a11.w, s1);
    const float2 d0 = __half22float2(ads[2 * u]), d1 = __half22float2(ads[2 * u + 1]);
    const float sc0 = static_cast<float>(w.sc & 0xFF), sc1 = static_cast<float>(w.sc >> 8);
    const float m0 = static_cast<float>(w.mn & 0xFF), m1 = static_cast<float>(w.mn >> 8);
    return h2f(w.dm & 0xFFFF) * (sc0 * d0.x * static_cast<float>(s0) + sc1 * d1.x * static_cast<float>(s1)) -
           h2f(w.dm >> 16) * (m0 * d0.y + m1 * d1.y);
  }
};

// Q5_K: as Q4_K plus the 5th bits (bit g of qh[l] for element l of group g).
template <> struct QUnit<kQ5_K> {
  static constexpr int QK = 256, BYTES = 176, UNITS = 4;
  struct W { uint4 q0, q1, h0, h1; uint32_t dm, sc, mn; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    W w;
    w.q0 = ld_u128(b + 48 + 32 * u);
    w.q1 = ld_u128(b + 64 + 32 * u);
    w.h0 = ld_u128(b + 16);
    w.h1 = ld_u128(b + 32);
    w.dm = ld_u32(b);
    kscale_pair(b + 4, u, &w.sc, &w.mn);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int8_t* a = aq + 64 * u;
    const int4 a00 = *reinterpret_cast<const int4*>(a);
    const int4 a01 = *reinterpret_cast<const int4*>(a + 16);
    const int4 a10 = *reinterpret_cast<const int4*>(a + 32);
    const int4 a11 = *reinterpret_cast<const int4*>(a + 48);
    const int sh0 = 2 * u, sh1 = 2 * u + 1;
    constexpr int M = 0x0F0F0F0F, B = 0x01010101;
    int s0 = 0, s1 = 0;
#define GUILD_Q5K_WORD(QW, HW, A0, A1)                                                        \
    s0 = dp4a(((QW) & M) | ((((HW) >> sh0) & B) << 4), A0, s0);                                 \
    s1 = dp4a((((QW) >> 4) & M) | ((((HW) >> sh1) & B) << 4), A1, s1);
    GUILD_Q5K_WORD(w.q0.x, w.h0.x, a00.x, a10.x)
    GUILD_Q5K_WORD(w.q0.y, w.h0.y, a00.y, a10.y)
    GUILD_Q5K_WORD(w.q0.z, w.h0.z, a00.z, a10.z)
    GUILD_Q5K_WORD(w.q0.w, w.h0.w, a00.w, a10.w)
    GUILD_Q5K_WORD(w.q1.x, w.h1.x, a01.x, a11.x)
    GUILD_Q5K_WORD(w.q1.y, w.h1.y, a01.y, a11.y)
    GUILD_Q5K_WORD(w.q1.z, w.h1.z, a01.z, a11.z)
    GUILD_Q5K_WORD(w.q1.w, w.h1.w, a01.w, a11.w)
#undef GUILD_Q5K_WORD
    const float2 d0 = __half22float2(ads[2 * u]), d1 = __half22float2(ads[2 * u + 1]);
    const float sc0 = static_cast<float>(w.sc & 0xFF), sc1 = static_cast<float>(w.sc >> 8);
    const float m0 = static_cast<float>(w.mn & 0xFF), m1 = static_cast<float>(w.mn >> 8);
    return h2f(w.dm & 0xFFFF) * (sc0 * d0.x * static_cast<float>(s0) + sc1 * d1.x * static_cast<float>(s1)) -
           h2f(w.dm >> 16) * (m0 * d0.y + m1 * d1.y);
  }
};

// Q6_K: unit u = (half h = u/2, l0 = 16*(u%2)): ql[64h + l0 ..+16], ql[64h + 32 + l0 ..+16]
// and qh[32h + l0 ..+16] give elements 128h + 32i + l0 + (0..15), i < 4 (one
// scale per i). Blocks are only 2-byte aligned: 16-bit loads.
template <> struct QUnit<kQ6_K> {
  static constexpr int QK = 256, BYTES = 210, UNITS = 4;
  struct W { uint32_t la[4], lb[4], hh[4]; int sc[4]; uint32_t d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const int h = u >> 1, l0 = 16 * (u & 1);
    W w;
    const uint8_t* ql = b + 64 * h + l0;
    const uint8_t* qh = b + 128 + 32 * h + l0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w.la[i] = ld_u32_a2(ql + 4 * i);
      w.lb[i] = ld_u32_a2(ql + 32 + 4 * i);
      w.hh[i] = ld_u32_a2(qh + 4 * i);
    }
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h + (l0 >> 4));
#pragma unroll
    for (int i = 0; i < 4; ++i) w.sc[i] = sc[2 * i];
    w.d = ld_u16(b + 208);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int h = u >> 1, l0 = 16 * (u & 1);
    const int8_t* a = aq + 128 * h + l0;
    const int4 a0 = *reinterpret_cast<const int4*>(a);
    const int4 a1 = *reinterpret_cast<const int4*>(a + 32);
    const int4 a2 = *reinterpret_cast<const int4*>(a + 64);
    const int4 a3 = *reinterpret_cast<const int4*>(a + 96);
    const int av0[4] = {a0.x, a0.y, a0.z, a0.w}, av1[4] = {a1.x, a1.y, a1.z, a1.w};
    const int av2[4] = {a2.x, a2.y, a2.z, a2.w}, av3[4] = {a3.x, a3.y, a3.z, a3.w};
    constexpr int M = 0x20202020, L = 0x0F0F0F0F, H = 0x03030303;
    int i0 = 0, i1 = 0, i2 = 0, i3 = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      i0 = dp4a(__vsubss4((w.la[j] & L) | (((w.hh[j] >> 0) & H) << 4), M), av0[j], i0);
      i1 = dp4a(__vsubss4((w.lb[j] & L) | (((w.hh[j] >> 2) & H) << 4), M), av1[j], i1);
      i2 = dp4a(__vsubss4(((w.la[j] >> 4) & L) | (((w.hh[j] >> 4) & H) << 4), M), av2[j], i2);
      i3 = dp4a(__vsubss4(((w.lb[j] >> 4) & L) | (((w.hh[j] >> 6) & H) << 4), M), av3[j], i3);
    }
    const half2* ds = ads + 4 * h;
    const float r = static_cast<float>(w.sc[0]) * __low2float(ds[0]) * static_cast<float>(i0) +
                    static_cast<float>(w.sc[1]) * __low2float(ds[1]) * static_cast<float>(i1) +
                    static_cast<float>(w.sc[2]) * __low2float(ds[2]) * static_cast<float>(i2) +
                    static_cast<float>(w.sc[3]) * __low2float(ds[3]) * static_cast<float>(i3);
    return h2f(w.d) * r;
  }
};

template <> struct QUnit<kQ8_0> {
  static constexpr int QK = 32, BYTES = 34, UNITS = 2;
  struct W { uint32_t q0, q1, q2, q3, d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    W w;
    const uint8_t* q = b + 2 + 16 * u;
    w.q0 = ld_u32_a2(q); w.q1 = ld_u32_a2(q + 4); w.q2 = ld_u32_a2(q + 8); w.q3 = ld_u32_a2(q + 12);
    w.d = ld_u16(b);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int4 a = *reinterpret_cast<const int4*>(aq + 16 * u);
    int s = dp4a(static_cast<int>(w.q0), a.x, 0);
    s = dp4a(static_cast<int>(w.q1), a.y, s);
    s = dp4a(static_cast<int>(w.q2), a.z, s);
    s = dp4a(static_cast<int>(w.q3), a.w, s);
    return h2f(w.d) * __low2float(ads[0]) * static_cast<float>(s);
  }
};

template <> struct QUnit<kQ4_0> {
  static constexpr int QK = 32, BYTES = 18, UNITS = 1;
  struct W { uint32_t q0, q1, q2, q3, d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.q0 = ld_u32_a2(b + 2); w.q1 = ld_u32_a2(b + 6); w.q2 = ld_u32_a2(b + 10); w.q3 = ld_u32_a2(b + 14);
    w.d = ld_u16(b);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    const int4 a0 = *reinterpret_cast<const int4*>(aq);
    const int4 a1 = *reinterpret_cast<const int4*>(aq + 16);
    const int m = 0x08080808;
    int s = dp4a(__vsubss4(w.q0 & 0x0F0F0F0F, m), a0.x, 0);
    s = dp4a(__vsubss4(w.q1 & 0x0F0F0F0F, m), a0.y, s);
    s = dp4a(__vsubss4(w.q2 & 0x0F0F0F0F, m), a0.z, s);
    s = dp4a(__vsubss4(w.q3 & 0x0F0F0F0F, m), a0.w, s);
    s = dp4a(__vsubss4((w.q0 >> 4) & 0x0F0F0F0F, m), a1.x, s);
    s = dp4a(__vsubss4((w.q1 >> 4) & 0x0F0F0F0F, m), a1.y, s);
    s = dp4a(__vsubss4((w.q2 >> 4) & 0x0F0F0F0F, m), a1.z, s);
    s = dp4a(__vsubss4((w.q3 >> 4) & 0x0F0F0F0F, m), a1.w, s);
    return h2f(w.d) * __low2float(ads[0]) * static_cast<float>(s);
  }
};

template <> struct QUnit<kQ5_0> {
  static constexpr int QK = 32, BYTES = 22, UNITS = 1;
  struct W { uint32_t q0, q1, q2, q3, qh, d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.qh = ld_u32_a2(b + 2);
    w.q0 = ld_u32_a2(b + 6); w.q1 = ld_u32_a2(b + 10); w.q2 = ld_u32_a2(b + 14); w.q3 = ld_u32_a2(b + 18);
    w.d = ld_u16(b);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    const int4 a0 = *reinterpret_cast<const int4*>(aq);
    const int4 a1 = *reinterpret_cast<const int4*>(aq + 16);
    const int m = 0x10101010;
    const uint32_t qh = w.qh;
#define GUILD_Q5_0(QW, I, A0, A1)                                                                    \
    s = dp4a(__vsubss4(((QW) & 0x0F0F0F0F) | (spread4((qh >> (4 * (I))) & 0xF) << 4), m), A0, s);      \
    s = dp4a(__vsubss4((((QW) >> 4) & 0x0F0F0F0F) | (spread4((qh >> (16 + 4 * (I))) & 0xF) << 4), m), A1, s);
    int s = 0;
    GUILD_Q5_0(w.q0, 0, a0.x, a1.x)
    GUILD_Q5_0(w.q1, 1, a0.y, a1.y)
    GUILD_Q5_0(w.q2, 2, a0.z, a1.z)
    GUILD_Q5_0(w.q3, 3, a0.w, a1.w)
#undef GUILD_Q5_0
    return h2f(w.d) * __low2float(ads[0]) * static_cast<float>(s);
  }
};

// ---- dequantization of one 32-element run -----------------------------------------------
// out[i] = element 32*run + i of the row starting at `row` (floats).

template <uint32_t T> struct Deq;

template <> struct Deq<kQ4_K> {
  static constexpr int QK = 256, BYTES = 144;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int g = run & 7;
    float sc, m;
    kscale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), g, &sc, &m);
    const uint32_t dm = ld_u32(b);
    const float d = h2f(dm & 0xFFFF) * sc, mn = h2f(dm >> 16) * m;
    const uint8_t* q = b + 16 + 32 * (g >> 1);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint4 v = ld_u128(q + 16 * i);
      const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 16; ++j) out[16 * i + j] = d * static_cast<float>((w4[j >> 2] >> (8 * (j & 3) + shift)) & 0xF) - mn;
    }
  }
};

// Q4_K run of 32 straight to 16 half2 (element pairs), for the tensor-core
// tile loaders: nibble -> half by the 0x6400 exponent trick (1024 + q, exact),
// minus 1024, then one HFMA2 with the group's scale and min (fp16, like the
// tensor-core operands themselves).
__device__ __forceinline__ void q4k_run32_h2(const uint8_t* row, int run, uint32_t* out) {
  const uint8_t* b = row + (run >> 3) * 144;
  const int g = run & 7;
  float sc, m;
  kscale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), g, &sc, &m);
  const uint32_t dm = ld_u32(b);
  const __half2 scale = __float2half2_rn(h2f(dm & 0xFFFF) * sc);
  const __half2 neg_min = __float2half2_rn(-(h2f(dm >> 16) * m));
  const __half2 k1024 = __float2half2_rn(1024.0f);
  const uint8_t* q = b + 16 + 32 * (g >> 1);
  const int shift = 4 * (g & 1);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint4 v = ld_u128(q + 16 * i);
    const uint32_t w4[4] = {v.x >> shift, v.y >> shift, v.z >> shift, v.w >> shift};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = (__byte_perm(w4[j], 0, 0x4140) & 0x000F000Fu) | 0x64006400u;  // bytes 0, 1
      const uint32_t hi = (__byte_perm(w4[j], 0, 0x4342) & 0x000F000Fu) | 0x64006400u;  // bytes 2, 3
      __half2 hl = __hsub2(*reinterpret_cast<const __half2*>(&lo), k1024);
      __half2 hh = __hsub2(*reinterpret_cast<const __half2*>(&hi), k1024);
      hl = __hfma2(hl, scale, neg_min);
      hh = __hfma2(hh, scale, neg_min);
      out[8 * i + 2 * j] = *reinterpret_cast<const uint32_t*>(&hl);
      out[8 * i + 2 * j + 1] = *reinterpret_cast<const uint32_t*>(&hh);
    }
  }
}

template <> struct Deq<kQ5_K> {
  static constexpr int QK = 256, BYTES = 176;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int g = run & 7;
    float sc, m;
    kscale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), g, &sc, &m);
    const uint32_t dm = ld_u32(b);
    const float d = h2f(dm & 0xFFFF) * sc, mn = h2f(dm >> 16) * m;
    const uint8_t* q = b + 48 + 32 * (g >> 1);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint4 v = ld_u128(q + 16 * i);
      const uint4 hv = ld_u128(b + 16 + 16 * i);
      const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
      const uint32_t h4[4] = {hv.x, hv.y, hv.z, hv.w};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t lo = (w4[j >> 2] >> (8 * (j & 3) + shift)) & 0xF;
        const uint32_t hi = (h4[j >> 2] >> (8 * (j & 3) + g)) & 1;
        out[16 * i + j] = d * static_cast<float>(lo | (hi << 4)) - mn;
      }
    }
  }
};

template <> struct Deq<kQ6_K> {
  static constexpr int QK = 256, BYTES = 210;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int e0 = 32 * (run & 7);
    const int h = e0 >> 7, i = (e0 & 127) >> 5;  // half, quarter
    const uint8_t* ql = b + 64 * h + 32 * (i & 1);
    const uint8_t* qh = b + 128 + 32 * h;
    const int lshift = 4 * (i >> 1), hshift = 2 * i;
    const float d = h2f(ld_u16(b + 208));
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h + 2 * i);
    const float d0 = d * static_cast<float>(sc[0]), d1 = d * static_cast<float>(sc[1]);
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const uint32_t l4 = ld_u32_a2(ql + 4 * w), h4 = ld_u32_a2(qh + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int q = static_cast<int>(((l4 >> (8 * j + lshift)) & 0xF) | (((h4 >> (8 * j + hshift)) & 3) << 4)) - 32;
        out[4 * w + j] = (w < 4 ? d0 : d1) * static_cast<float>(q);
      }
    }
  }
};

template <> struct Deq<kQ8_0> {
  static constexpr int QK = 32, BYTES = 34;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    const float d = h2f(ld_u16(b));
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const uint32_t v = ld_u32_a2(b + 2 + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) out[4 * w + j] = d * static_cast<float>(static_cast<int8_t>((v >> (8 * j)) & 0xFF));
    }
  }
};

template <> struct Deq<kQ4_0> {
  static constexpr int QK = 32, BYTES = 18;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    const float d = h2f(ld_u16(b));
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = ld_u32_a2(b + 2 + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[4 * w + j] = d * static_cast<float>(static_cast<int>((v >> (8 * j)) & 0xF) - 8);
        out[16 + 4 * w + j] = d * static_cast<float>(static_cast<int>((v >> (8 * j + 4)) & 0xF) - 8);
      }
    }
  }
};

template <> struct Deq<kQ5_0> {
  static constexpr int QK = 32, BYTES = 22;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    const float d = h2f(ld_u16(b));
    const uint32_t qh = ld_u32_a2(b + 2);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = ld_u32_a2(b + 6 + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int e = 4 * w + j;
        const int lo = static_cast<int>(((v >> (8 * j)) & 0xF) | (((qh >> e) & 1) << 4)) - 16;
        const int hi = static_cast<int>(((v >> (8 * j + 4)) & 0xF) | (((qh >> (e + 16)) & 1) << 4)) - 16;
        out[e] = d * static_cast<float>(lo);
        out[16 + e] = d * static_cast<float>(hi);
      }
    }
  }
};

// Plain types: run of 32 elements (row 16-byte aligned, so the run is too for F32/F16/BF16).
template <> struct Deq<kF32> {
  static constexpr int QK = 1, BYTES = 4;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* p = row + 128 * run;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p) + i);
      out[4 * i] = v.x; out[4 * i + 1] = v.y; out[4 * i + 2] = v.z; out[4 * i + 3] = v.w;
    }
  }
};
template <> struct Deq<kF16> {
  static constexpr int QK = 1, BYTES = 2;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* p = row + 64 * run;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = ld_u128(p + 16 * i);
      const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[8 * i + 2 * j] = h2f(w4[j] & 0xFFFF);
        out[8 * i + 2 * j + 1] = h2f(w4[j] >> 16);
      }
    }
  }
};
template <> struct Deq<kBF16> {
  static constexpr int QK = 1, BYTES = 2;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* p = row + 64 * run;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = ld_u128(p + 16 * i);
      const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[8 * i + 2 * j] = bf2f(w4[j] & 0xFFFF);
        out[8 * i + 2 * j + 1] = bf2f(w4[j] >> 16);
      }
    }
  }
};

inline bool is_float_type(uint32_t t) { return t == kF32 || t == kF16 || t == kBF16; }

// Grid-size helper.
inline unsigned ceil_div(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

}  // namespace guild::cuda
