// Matrix-matrix products for prefill, y[token][row] = dot(W row, x token):
//  * quantized / F16 / BF16 weights: a block computes 128 weight rows x 32
//    tokens. The raw GGUF bytes of a stage (one K-quant super-block, or
//    128-256 elements of the legacy and plain types, per row) and the fp16
//    activations arrive in shared memory by cp.async while the previous stage
//    is multiplied; per 64-wide step each thread dequantizes two 32-element
//    runs from shared memory into an fp16 tile (no full-precision copy of the
//    weights exists anywhere) and the warps multiply it with
//    mma.sync.m16n8k16 (fp16 in, fp32 accumulate).
//  * F32 weights (routers, float masters): an fp32 SIMT kernel, so expert
//    selection sees float-exact router logits; K split over the block's
//    warps, partials added in a fixed order.
// Grouped experts (MOE): blockIdx.y walks the device-side tile list
// (expert, 32-slot tile); the activation rows are gathered by slot.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "quant_tables.h"
#include "quant_types.cuh"

namespace guild::cuda {
GUILD_IQ_GRID_UPLOADER(iq_grids_upload_gemm)
namespace {

constexpr int kBM = 128;   // weight rows per block
constexpr int kBK = 64;    // K per multiply step (the fp16 A tile's width)
constexpr int kLds = kBK + 8;  // smem row stride in halves (144 bytes: ldmatrix conflict-free)

// One weight matrix and where its products go.
struct GemmTarget {
  const uint8_t* w;
  size_t row_stride;
  int n_out;
  float* y; int64_t y_stride;
};

struct GemmParams {
  // Matrices over the same activations (q, k, v): blockIdx.z picks one.
  GemmTarget t[kGemvMaxSegments];
  int n_targets;
  const uint8_t* w_up;  // GLU: the up matrix beside t[0].w (the gate); y = silu(gate) * up
  size_t expert_stride;
  int n_in;
  const __half* x; int64_t x_stride;  // fp16 activations
  const float* xf; int64_t xf_stride; // fp32 activations (F32 path)
  int n_tokens;
  bool accumulate;
  // grouped experts
  const int32_t* offsets; const int32_t* slots; const int32_t* counters; const int32_t* tiles;
  int act_div;
};

static_assert(kGemvMaxSegments == 3, "target_of picks among three targets");
__device__ __forceinline__ GemmTarget target_of(const GemmParams& p) {
  const unsigned z = blockIdx.z;
  return z == 0 ? p.t[0] : (z == 1 ? p.t[1] : p.t[2]);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}


// How the weight rows of one pipeline stage arrive: SK elements of each row,
// BYTES contiguous bytes of it (whole K-quant super-blocks, whole legacy
// blocks), copied as 16-byte chunks by cp.async into shared memory. A stage's
// bytes start at s * BYTES in the row: 16-byte aligned for every type but
// Q8_0 (8) and Q6_K (2), whose copies start at the chunk below and keep the
// offset. The dequantizers then read shared memory, not global memory: the
// global reads are whole-chunk, coalesced along the row, and in flight while
// the previous stage is multiplied.
template <uint32_t T> struct Stage;
template <> struct Stage<kQ4_0> { static constexpr int SK = 256, BYTES = 144; };
template <> struct Stage<kQ5_0> { static constexpr int SK = 256, BYTES = 176; };
template <> struct Stage<kQ8_0> { static constexpr int SK = 128, BYTES = 136; };
template <> struct Stage<kQ4_K> { static constexpr int SK = 256, BYTES = 144; };
template <> struct Stage<kQ5_K> { static constexpr int SK = 256, BYTES = 176; };
template <> struct Stage<kQ6_K> { static constexpr int SK = 256, BYTES = 210; };
// The other types: one super-block (or eight 32-element blocks) per stage,
// dequantized into the fp16 tile.
template <> struct Stage<kQ4_1> { static constexpr int SK = 256, BYTES = 160; };
template <> struct Stage<kQ5_1> { static constexpr int SK = 256, BYTES = 192; };
template <> struct Stage<kIQ4_NL> { static constexpr int SK = 256, BYTES = 144; };
template <> struct Stage<kMXFP4> { static constexpr int SK = 256, BYTES = 136; };
template <> struct Stage<kQ2_K> { static constexpr int SK = 256, BYTES = 84; };
template <> struct Stage<kQ3_K> { static constexpr int SK = 256, BYTES = 110; };
template <> struct Stage<kIQ4_XS> { static constexpr int SK = 256, BYTES = 136; };
template <> struct Stage<kIQ2_XXS> { static constexpr int SK = 256, BYTES = 66; };
template <> struct Stage<kIQ2_XS> { static constexpr int SK = 256, BYTES = 74; };
template <> struct Stage<kIQ2_S> { static constexpr int SK = 256, BYTES = 82; };
template <> struct Stage<kIQ3_XXS> { static constexpr int SK = 256, BYTES = 98; };
template <> struct Stage<kIQ3_S> { static constexpr int SK = 256, BYTES = 110; };
template <> struct Stage<kIQ1_S> { static constexpr int SK = 256, BYTES = 50; };
template <> struct Stage<kIQ1_M> { static constexpr int SK = 256, BYTES = 56; };
template <> struct Stage<kTQ1_0> { static constexpr int SK = 256, BYTES = 54; };
template <> struct Stage<kTQ2_0> { static constexpr int SK = 256, BYTES = 66; };
template <> struct Stage<kF16> { static constexpr int SK = 64, BYTES = 128; };
template <> struct Stage<kBF16> { static constexpr int SK = 64, BYTES = 128; };

constexpr int low_alignment(int bytes) { return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : 2; }

template <uint32_t T> struct StageLayout {
  static constexpr int SK = Stage<T>::SK, BYTES = Stage<T>::BYTES;
  static_assert(T == kF16 || T == kBF16 || BYTES == SK / Deq<T>::QK * Deq<T>::BYTES, "a stage is whole blocks");
  // Chunks one row's stage can touch: the bytes plus the worst start offset.
  static constexpr int CHUNKS = (BYTES + 16 - low_alignment(BYTES) + 15) / 16;
  // Row pitch in shared memory, in chunks: odd, so the rows a warp's threads
  // dequantize fall on different banks (Q6_K stays even to keep two blocks per SM).
  static constexpr int PITCH = (CHUNKS % 2 == 0 && T != kQ6_K) ? CHUNKS + 1 : CHUNKS;
  static constexpr int ROW_BYTES = 16 * PITCH;
  static constexpr int ACT_LD = SK + 8;  // halves per activation row: 16 bytes of skew (ldmatrix conflict-free)
};

// ---- A fragments straight from the staged bytes ----------------------------------
// mma.sync.m16n8k16's A operand gives thread (g = lane / 4, t = lane % 4) the
// element pairs (2t, 2t+1) and (2t+8, 2t+9) of rows g and g + 8 for each k16
// step: over a 32-element run, the pairs starting at 2t + 8j, j = 0..3.
// Frag<T>::pairs2() builds them for two runs (lr0 even, lr0 + 1) of one row
// as half2 from the GGUF bytes in shared memory, with the runs' constants
// from a per-stage table (scales(), built once per row and run). No
// dequantized tile is written and read back, and the warps of a block run the
// steps of a stage without barriers. Types without a loader use the tile path.
__device__ __forceinline__ uint32_t half2_bits(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }
__device__ __forceinline__ __half2 bits_half2(uint32_t u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ uint32_t half2_of(float v) { return half2_bits(__float2half2_rn(v)); }
// Bytes 0 and 1 of v to the low bytes of its two halves (bits 0..7 and 16..23).
__device__ __forceinline__ uint32_t spread_bytes(uint32_t v) { return __byte_perm(v, 0, 0x4140); }
// Small non-negative integers in the low bits of each half (below 1024) as
// half2 values minus `bias`: 0x6400 | q is the half 1024 + q, exactly.
__device__ __forceinline__ __half2 ints_half2(uint32_t q2, float bias) {
  return __hsub2(bits_half2(q2 | 0x64006400u), __float2half2_rn(1024.0f + bias));
}

template <uint32_t T> struct Frag { static constexpr bool kDirect = false; };

template <> struct Frag<kQ4_K> {
  static constexpr bool kDirect = true;
  // (d * scale, -dmin * min) of run lr, as half2 (the tile path's values).
  __device__ static __forceinline__ uint2 scales(const uint8_t* b, int lr) {
    float sc, m;
    kscale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), lr, &sc, &m);
    const uint32_t dm = ld_u32(b);
    return make_uint2(half2_of(h2f(dm & 0xFFFF) * sc), half2_of(-(h2f(dm >> 16) * m)));
  }
  // Runs lr0 and lr0 + 1 are the low and high nibbles of the same 32 bytes.
  __device__ static __forceinline__ void pairs2(const uint8_t* b, int lr0, int t, uint2 s0, uint2 s1, uint32_t* p0,
                                                uint32_t* p1) {
    const uint8_t* q = b + 16 + 16 * lr0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t x = spread_bytes(ld_u16(q + 2 * t + 8 * j));
      p0[j] = half2_bits(__hfma2(ints_half2(x & 0x000F000Fu, 0.0f), bits_half2(s0.x), bits_half2(s0.y)));
      p1[j] = half2_bits(__hfma2(ints_half2((x >> 4) & 0x000F000Fu, 0.0f), bits_half2(s1.x), bits_half2(s1.y)));
    }
  }
};

template <> struct Frag<kQ6_K> {
  static constexpr bool kDirect = true;
  // d * scale of the run's two halves of 16.
  __device__ static __forceinline__ uint2 scales(const uint8_t* b, int lr) {
    const float d = h2f(ld_u16(b + 208));
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 2 * lr);
    return make_uint2(half2_of(d * static_cast<float>(sc[0])), half2_of(d * static_cast<float>(sc[1])));
  }
  // Run lr (h = lr / 4, i = lr % 4): low 4 bits in ql[64h + 32(i&1) + e] >> 4(i/2),
  // high 2 bits in qh[32h + e] >> 2i; q - 32. lr0 even: both runs share qh and the shift.
  __device__ static __forceinline__ void pairs2(const uint8_t* b, int lr0, int t, uint2 s0, uint2 s1, uint32_t* p0,
                                                uint32_t* p1) {
    const int h = lr0 >> 2, i = lr0 & 3;
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    const int lshift = 2 * i, hshift = 2 * i;  // i is 0 or 2: low-nibble shift 0 or 4
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = 2 * t + 8 * j;
      const uint32_t a = spread_bytes(ld_u16(ql + e)), c = spread_bytes(ld_u16(ql + 32 + e));
      const uint32_t hb = spread_bytes(ld_u16(qh + e));
      const uint32_t q0 = ((a >> lshift) & 0x000F000Fu) | (((hb >> hshift) & 0x00030003u) << 4);
      const uint32_t q1 = ((c >> lshift) & 0x000F000Fu) | (((hb >> (hshift + 2)) & 0x00030003u) << 4);
      p0[j] = half2_bits(__hmul2(ints_half2(q0, 32.0f), bits_half2(j < 2 ? s0.x : s0.y)));
      p1[j] = half2_bits(__hmul2(ints_half2(q1, 32.0f), bits_half2(j < 2 ? s1.x : s1.y)));
    }
  }
};

template <> struct Frag<kQ8_0> {
  static constexpr bool kDirect = true;
  __device__ static __forceinline__ uint2 scales(const uint8_t* b, int lr) {
    return make_uint2(half2_of(h2f(ld_u16(b + 34 * lr))), 0u);
  }
  // int8 q ^ 0x80 is q + 128 as an unsigned byte.
  __device__ static __forceinline__ void pairs2(const uint8_t* b, int lr0, int t, uint2 s0, uint2 s1, uint32_t* p0,
                                                uint32_t* p1) {
    const uint8_t* q0 = b + 34 * lr0 + 2;
    const uint8_t* q1 = q0 + 34;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = 2 * t + 8 * j;
      const uint32_t x0 = spread_bytes(ld_u16(q0 + e) ^ 0x8080u), x1 = spread_bytes(ld_u16(q1 + e) ^ 0x8080u);
      p0[j] = half2_bits(__hmul2(ints_half2(x0 & 0x00FF00FFu, 128.0f), bits_half2(s0.x)));
      p1[j] = half2_bits(__hmul2(ints_half2(x1 & 0x00FF00FFu, 128.0f), bits_half2(s1.x)));
    }
  }
};

// The levels of kMXFP4Values + 12 (0..24, non-negative for ints_half2), four per word.
constexpr int8_t kMXFP4Offset = 12;
constexpr uint32_t mxfp4_offset_word(int word) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i)
    w |= static_cast<uint32_t>(static_cast<uint8_t>(kMXFP4Values[4 * word + i] + kMXFP4Offset)) << (8 * i);
  return w;
}
constexpr uint32_t kMXFP4Off0 = mxfp4_offset_word(0), kMXFP4Off1 = mxfp4_offset_word(1),
                   kMXFP4Off2 = mxfp4_offset_word(2), kMXFP4Off3 = mxfp4_offset_word(3);

template <> struct Frag<kMXFP4> {
  static constexpr bool kDirect = true;
  // The block's E8M0 scale (e8m0_half: the levels are E2M1 doubled).
  __device__ static __forceinline__ uint2 scales(const uint8_t* b, int lr) {
    return make_uint2(half2_of(e8m0_half(b[17 * lr])), 0u);
  }
  // One 17-byte block per run: element i < 16 is byte i's low nibble, 16 + i
  // its high nibble, so pairs j and j + 2 come from the same two bytes.
  // Blocks are 1-byte aligned: byte loads.
  __device__ static __forceinline__ void pairs2(const uint8_t* b, int lr0, int t, uint2 s0, uint2 s1, uint32_t* p0,
                                                uint32_t* p1) {
#pragma unroll
    for (int run = 0; run < 2; ++run) {
      const uint8_t* q = b + 17 * (lr0 + run) + 1;
      const __half2 sc = bits_half2(run == 0 ? s0.x : s1.x);
      uint32_t* out = run == 0 ? p0 : p1;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        const uint32_t b0 = q[2 * t + 8 * jj], b1 = q[2 * t + 8 * jj + 1];
        // Indices (lo0, lo1, hi0, hi1), one per byte, to offset levels.
        const uint32_t idx = (b0 & 0xFu) | ((b1 & 0xFu) << 8) | ((b0 >> 4) << 16) | ((b1 >> 4) << 24);
        const uint32_t lv = lut16(idx, kMXFP4Off0, kMXFP4Off1, kMXFP4Off2, kMXFP4Off3);
        out[jj] = half2_bits(__hmul2(ints_half2(spread_bytes(lv), kMXFP4Offset), sc));
        out[jj + 2] = half2_bits(__hmul2(ints_half2(spread_bytes(lv >> 16), kMXFP4Offset), sc));
      }
    }
  }
};

// KernelSwitches::gemm_direct false sends every type through the tile path (for A/B runs).
std::atomic<bool> g_direct_frags{true};
bool direct_frags_enabled() { return g_direct_frags.load(std::memory_order_relaxed); }

template <uint32_t T, int BN, bool DIRECT>
constexpr size_t mma_smem_bytes() {
  using L = StageLayout<T>;
  const size_t work = DIRECT ? static_cast<size_t>(kBM) * (L::SK / 32) * sizeof(uint2)  // run constants
                             : static_cast<size_t>(kBM) * kLds * sizeof(__half);        // fp16 A tile
  return static_cast<size_t>(2) * kBM * L::ROW_BYTES + static_cast<size_t>(2) * BN * L::ACT_LD * sizeof(__half) + work;
}

// Fills the token rows of this block: dense rows n0.., or the slots of one
// expert tile (MOE). Returns the number of valid columns, or -1 when the tile
// list has no entry for this block; w (and w_up) advance to the expert's matrices.
template <int BN, bool MOE>
__device__ __forceinline__ int token_tile(const GemmParams& p, const uint8_t*& w, const uint8_t*& w_up, int* s_rows,
                                          int* s_out, int nt) {
  int n_valid;
  if (MOE) {
    if (blockIdx.y >= static_cast<unsigned>(p.counters[1])) return -1;
    const int entry = p.tiles[blockIdx.y];
    const int e = entry >> 16, t = entry & 0xFFFF;
    const int begin = p.offsets[e] + t * BN;
    n_valid = min(BN, p.offsets[e + 1] - begin);
    w += static_cast<size_t>(e) * p.expert_stride;
    if (w_up) w_up += static_cast<size_t>(e) * p.expert_stride;
    for (int i = threadIdx.x; i < BN; i += nt) {
      const int slot = i < n_valid ? p.slots[begin + i] : -1;
      s_rows[i] = slot >= 0 ? slot / p.act_div : -1;
      s_out[i] = slot;
    }
  } else {
    const int n0 = blockIdx.y * BN;
    n_valid = min(BN, p.n_tokens - n0);
    for (int i = threadIdx.x; i < BN; i += nt) {
      s_rows[i] = i < n_valid ? n0 + i : -1;
      s_out[i] = n0 + i;
    }
  }
  return n_valid;
}

// 128 weight rows x BN tokens per block of 4 warps (each 32 rows x 32 tokens).
// Pipeline: stage s+1's raw weight bytes and fp16 activations are copied
// (cp.async) while stage s is worked on; each 64-wide step of a stage
// builds the A operands from the staged bytes (DIRECT) or dequantizes 2 runs
// of 32 per row into an fp16 tile, and the warps multiply (mma.sync.m16n8k16,
// fp32 accumulate). GLU (grouped experts): the block's rows are 64 rows of
// the gate matrix and the same 64 rows of the up matrix, and it writes
// silu(gate) * up: one launch instead of two products and a SwiGLU pass.
template <uint32_t T, int BN, bool MOE, bool DIRECT, bool GLU = false>
__global__ void __launch_bounds__(128) gemm_mma_kernel(const GemmParams p) {
  static_assert(BN == 32, "four warps of 32 rows x 32 tokens");
  static_assert(!DIRECT || Frag<T>::kDirect, "direct fragments need a loader");
  pdl_begin();
  using L = StageLayout<T>;
  constexpr int NT = 128, RUNS = L::SK / 32;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* raw = smem_raw;                                                   // [2][kBM][ROW_BYTES]
  __half* act = reinterpret_cast<__half*>(raw + 2 * kBM * L::ROW_BYTES);     // [2][BN][ACT_LD]
  __half* atile = act + 2 * BN * L::ACT_LD;                                  // tile path: [kBM][kLds]
  uint2* run_consts = reinterpret_cast<uint2*>(atile);                       // direct path: [kBM][RUNS]
  __shared__ int s_rows[BN];                                                 // activation row per column (-1: none)
  __shared__ int s_out[BN];                                                  // output row per column

  const GemmTarget tg = target_of(p);
  constexpr int ROWS = GLU ? kBM / 2 : kBM;  // rows of each matrix per block
  const int m0 = blockIdx.x * ROWS;
  if (m0 >= tg.n_out) return;  // a shorter matrix of a multi-target launch
  const uint8_t* w = tg.w;
  const uint8_t* w_up = GLU ? p.w_up : nullptr;
  const int n_valid = token_tile<BN, MOE>(p, w, w_up, s_rows, s_out, NT);
  if (n_valid < 0) return;
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_runs = p.n_in / 32;
  const int n_stages = (p.n_in + L::SK - 1) / L::SK;
  const int row_bytes = n_runs * 32 / Deq<T>::QK * Deq<T>::BYTES;

  auto load_stage = [&](int buf, int s) {
    const int start = s * L::BYTES;
    const int o = start & 15;
    const int chunks = (o + min(L::BYTES, row_bytes - start) + 15) >> 4;
    uint8_t* dst_base = raw + buf * kBM * L::ROW_BYTES;
    for (int u = threadIdx.x; u < kBM * L::CHUNKS; u += NT) {
      const int r = u / L::CHUNKS, c = u - r * L::CHUNKS;
      const int row = min(m0 + (GLU ? r & (ROWS - 1) : r), tg.n_out - 1);
      const uint8_t* base = GLU && r >= ROWS ? w_up : w;
      const bool ok = c < chunks;
      const uint8_t* src = ok ? base + static_cast<size_t>(row) * tg.row_stride + (start - o) + 16 * c : w;
      cp_async16(dst_base + r * L::ROW_BYTES + 16 * c, src, ok);
    }
    __half* b = act + buf * BN * L::ACT_LD;
    constexpr int CPR = L::SK / 8;  // 16-byte chunks per activation row
    for (int u = threadIdx.x; u < BN * CPR; u += NT) {
      const int r = u / CPR, c = u - r * CPR;
      const int col = s * L::SK + 8 * c;
      const int src_row = s_rows[r];
      const bool ok = src_row >= 0 && col < p.n_in;
      const __half* src = ok ? p.x + static_cast<int64_t>(src_row) * p.x_stride + col : p.x;
      cp_async16(b + r * L::ACT_LD + 8 * c, src, ok);
    }
  };

  // Runs lr0, lr0 + 1 of every row of the stage's raw bytes -> atile (zeros past the row's runs).
  auto dequant_step = [&](const uint8_t* stage_raw, int o, int lr0, int runs_in_stage) {
    for (int u = threadIdx.x; u < kBM * 2; u += NT) {
      const int r = u >> 1, j = u & 1;
      const int lr = lr0 + j;
      uint4* dst = reinterpret_cast<uint4*>(atile + r * kLds + 32 * j);
      const uint8_t* row = stage_raw + r * L::ROW_BYTES + o;
      if constexpr (T == kQ4_K) {
        uint32_t h[16];
        if (lr < runs_in_stage) {
          q4k_run32_h2(row, lr, h);
        } else {
#pragma unroll
          for (int i = 0; i < 16; ++i) h[i] = 0u;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) dst[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
      } else {
        float v[32];
        if (lr < runs_in_stage) {
          Deq<T>::run32(row, lr, v);
        } else {
#pragma unroll
          for (int i = 0; i < 32; ++i) v[i] = 0.0f;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q)
          dst[q] = make_uint4(pack_half2(v[8 * q], v[8 * q + 1]), pack_half2(v[8 * q + 2], v[8 * q + 3]),
                              pack_half2(v[8 * q + 4], v[8 * q + 5]), pack_half2(v[8 * q + 6], v[8 * q + 7]));
      }
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  // B fragments of k16 step kk of a 64-wide step (b: the step's first column).
  auto load_b = [&](const __half* b, int kk, uint32_t (*bf)[2]) {
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      uint32_t r[4];
      const int q = lane >> 3;
      ldmatrix_x4(r, b + (np * 16 + (q >> 1) * 8 + (lane & 7)) * L::ACT_LD + kk * 16 + (q & 1) * 8);
      bf[2 * np][0] = r[0]; bf[2 * np][1] = r[1];
      bf[2 * np + 1][0] = r[2]; bf[2 * np + 1][1] = r[3];
    }
  };

  load_stage(0, 0);
  cp_async_commit();
  for (int s = 0; s < n_stages; ++s) {
    if (DIRECT && s > 0) __syncthreads();  // every warp done with the buffers the next copies overwrite
    if (s + 1 < n_stages) load_stage((s + 1) & 1, s + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const uint8_t* stage_raw = raw + (s & 1) * kBM * L::ROW_BYTES;
    const __half* b_stage = act + (s & 1) * BN * L::ACT_LD;
    const int o = (s * L::BYTES) & 15;
    const int runs_in_stage = min(RUNS, n_runs - s * RUNS);
    if constexpr (DIRECT) {
      // Run constants of the stage (zero past the row's runs: their products vanish).
      for (int u = threadIdx.x; u < kBM * RUNS; u += NT) {
        const int r = u / RUNS, lr = u - r * RUNS;
        run_consts[u] = lr < runs_in_stage ? Frag<T>::scales(stage_raw + r * L::ROW_BYTES + o, lr) : make_uint2(0u, 0u);
      }
      __syncthreads();
      const int g = lane >> 2, t = lane & 3;
      for (int lr0 = 0; lr0 < runs_in_stage; lr0 += 2) {
        // a[run][mi][row g / g + 8][pair j]
        uint32_t a[2][2][2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int r = warp * 32 + mi * 16 + hr * 8 + g;
            const uint2* rc = run_consts + r * RUNS + lr0;
            Frag<T>::pairs2(stage_raw + r * L::ROW_BYTES + o, lr0, t, rc[0], rc[1], a[0][mi][hr], a[1][mi][hr]);
          }
        const __half* b = b_stage + 32 * lr0;
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          uint32_t bf[4][2];
          load_b(b, kk, bf);
          const int run = kk >> 1, j = (kk & 1) * 2;
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            const uint32_t af[4] = {a[run][mi][0][j], a[run][mi][1][j], a[run][mi][0][j + 1], a[run][mi][1][j + 1]};
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af, bf[ni]);
          }
        }
      }
    } else {
      for (int lr0 = 0; lr0 < runs_in_stage; lr0 += 2) {
        dequant_step(stage_raw, o, lr0, runs_in_stage);
        __syncthreads();
        const __half* b = b_stage + 32 * lr0;  // this step's 64 columns
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          uint32_t af[2][4], bf[4][2];
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
            ldmatrix_x4(af[mi], atile + (warp * 32 + mi * 16 + (lane & 15)) * kLds + kk * 16 + (lane >> 4) * 8);
          load_b(b, kk, bf);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
        }
        __syncthreads();  // the A tile is rewritten next step; the stage buffers by the next stage's copies
      }
    }
  }

  // Epilogue: c0,c1 at (row lane/4, cols 2*(lane%4)+{0,1}); c2,c3 at row + 8.
  if constexpr (GLU) {
    // Warps 2, 3 hold the up rows of warps 0, 1's gate rows, at the same
    // (lane, register) places: through shared memory to the gate warps.
    __syncthreads();  // every warp done with the stage buffers
    float* up_vals = reinterpret_cast<float*>(smem_raw);  // [64 threads x 2 warps][32 values]
    const int slot = ((warp & 1) * 32 + lane) * 32;
    if (warp >= 2) {
#pragma unroll
      for (int i = 0; i < 32; ++i) up_vals[slot + ((i + lane) & 31)] = acc[i >> 4][(i >> 2) & 3][i & 3];
    }
    __syncthreads();
    if (warp >= 2) return;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int mi = i >> 4, ni = (i >> 2) & 3, q = i & 3;
      const int m = m0 + warp * 32 + mi * 16 + (lane >> 2) + (q >> 1) * 8;
      const int n = ni * 8 + 2 * (lane & 3) + (q & 1);
      if (m < tg.n_out && n < n_valid) {
        const float g = acc[mi][ni][q], u = up_vals[slot + ((i + lane) & 31)];
        tg.y[static_cast<int64_t>(s_out[n]) * tg.y_stride + m] = (g / (1.0f + expf(-g))) * u;  // swiglu_kernel's formula
      }
    }
  } else {
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int m = m0 + warp * 32 + mi * 16 + (lane >> 2) + (q >> 1) * 8;
          const int n = ni * 8 + 2 * (lane & 3) + (q & 1);
          if (m < tg.n_out && n < n_valid) {
            float* out = tg.y + static_cast<int64_t>(s_out[n]) * tg.y_stride + m;
            *out = (p.accumulate ? *out : 0.0f) + acc[mi][ni][q];
          }
        }
      }
    }
  }
}

// F32 weights (routers, float masters), SIMT so expert selection sees
// float-exact logits: 32 rows x 32 tokens per block of 8 warps. Warp w sums
// the 16-wide K chunks w, w + 8, ... on its own (the next chunk's loads in
// flight while this one is multiplied), then the block adds the eight partial
// tiles in warp order: the same sums in the same order on every run. A tall
// K (2048) over few outputs (128 experts) needs this split to fill the GPU.
template <bool MOE>
__global__ void __launch_bounds__(256) gemm_f32_kernel(const GemmParams p) {
  pdl_begin();
  constexpr int BM = 32, BN = 32, BK = 16, NW = 8, NT = 32 * NW;
  constexpr int W_TILE = BK * (BM + 1), X_TILE = BK * (BN + 1);
  __shared__ float s_buf[NW * (W_TILE + X_TILE)];
  static_assert(NW * (W_TILE + X_TILE) >= NW * BM * BN, "partials fit the tile buffers");
  __shared__ int s_rows[BN], s_out[BN];
  const GemmTarget tg = target_of(p);
  const int m0 = blockIdx.x * BM;
  if (m0 >= tg.n_out) return;
  const uint8_t* w = tg.w;
  const uint8_t* no_up = nullptr;
  const int n_valid = token_tile<BN, MOE>(p, w, no_up, s_rows, s_out, NT);
  if (n_valid < 0) return;
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tr = lane & 7, tc = lane >> 3;  // this lane's outputs: rows 4*tr.., tokens 8*tc..
  float* ws = s_buf + warp * (W_TILE + X_TILE);  // [BK][BM + 1]
  float* xs = ws + W_TILE;                       // [BK][BN + 1]
  // Element e = lane + 32 i of a chunk: row or token e / 16, k = e % 16.
  float wv[BK], xv[BK];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < BK; ++i) {
      const int e = lane + 32 * i, r = e >> 4, k = k0 + (e & 15);
      const int row = m0 + r, src = s_rows[r];
      wv[i] = (row < tg.n_out && k < p.n_in)
                  ? reinterpret_cast<const float*>(w + static_cast<size_t>(row) * tg.row_stride)[k] : 0.0f;
      xv[i] = (src >= 0 && k < p.n_in) ? p.xf[static_cast<int64_t>(src) * p.xf_stride + k] : 0.0f;
    }
  };
  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  if (warp * BK < p.n_in) fetch(warp * BK);
  for (int k0 = warp * BK; k0 < p.n_in; k0 += NW * BK) {
#pragma unroll
    for (int i = 0; i < BK; ++i) {
      const int e = lane + 32 * i, r = e >> 4, k = e & 15;
      ws[k * (BM + 1) + r] = wv[i];
      xs[k * (BN + 1) + r] = xv[i];
    }
    __syncwarp();
    if (k0 + NW * BK < p.n_in) fetch(k0 + NW * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = ws[k * (BM + 1) + 4 * tr + i];
#pragma unroll
      for (int j = 0; j < 8; ++j) b[j] = xs[k * (BN + 1) + 8 * tc + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncwarp();
  }
  __syncthreads();  // every warp done with its tiles: the buffer now holds the partials
  float* part = s_buf + warp * (BM * BN);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) part[(4 * tr + i) * BN + 8 * tc + j] = acc[i][j];
  __syncthreads();
  for (int o = threadIdx.x; o < BM * BN; o += NT) {
    const int r = o / BN, n = o % BN, m = m0 + r;
    if (m >= tg.n_out || n >= n_valid) continue;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < NW; ++q) sum += s_buf[q * (BM * BN) + o];
    float* out = tg.y + static_cast<int64_t>(s_out[n]) * tg.y_stride + m;
    *out = (p.accumulate ? *out : 0.0f) + sum;
  }
}

template <uint32_t T, int BN, bool MOE, bool DIRECT, bool GLU>
cudaError_t set_mma_attr() {
  return cudaFuncSetAttribute(gemm_mma_kernel<T, BN, MOE, DIRECT, GLU>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(mma_smem_bytes<T, BN, DIRECT>()));
}

// Grid: x row blocks of the widest target, y token tiles (or expert tiles), z targets.
int max_n_out(const GemmParams& p) {
  int m = 0;
  for (int i = 0; i < p.n_targets; ++i) m = std::max(m, p.t[i].n_out);
  return m;
}

template <uint32_t T, int BN, bool MOE, bool DIRECT, bool GLU>
cudaError_t launch_mma_variant(const GemmParams& p, unsigned grid_y, cudaStream_t s) {
  static const cudaError_t attr = set_mma_attr<T, BN, MOE, DIRECT, GLU>();
  if (attr != cudaSuccess) return attr;
  dim3 grid(ceil_div(max_n_out(p), GLU ? kBM / 2 : kBM), grid_y, static_cast<unsigned>(p.n_targets));
  launch_pdl(gemm_mma_kernel<T, BN, MOE, DIRECT, GLU>, grid, dim3(128), mma_smem_bytes<T, BN, DIRECT>(), s, p);
  return launch_status();
}

template <uint32_t T, int BN, bool MOE, bool GLU = false>
cudaError_t launch_mma(const GemmParams& p, unsigned grid_y, cudaStream_t s) {
  if constexpr (Frag<T>::kDirect) {
    if (direct_frags_enabled()) return launch_mma_variant<T, BN, MOE, true, GLU>(p, grid_y, s);
  }
  return launch_mma_variant<T, BN, MOE, false, GLU>(p, grid_y, s);
}

template <uint32_t T, int BN, bool MOE, bool GLU = false>
cudaError_t init_mma_attrs() {
  cudaError_t err = set_mma_attr<T, BN, MOE, false, GLU>();
  if constexpr (Frag<T>::kDirect) {
    if (err == cudaSuccess) err = set_mma_attr<T, BN, MOE, true, GLU>();
  }
  return err;
}

bool gemm_matrix_ok(const DevMatrix& w) {
  if (!w.data || !matrix_type_supported(w.type) || w.n_in <= 0 || w.n_out <= 0) return false;
  if (w.row_stride % 16 != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.n_out > INT32_MAX || w.n_in > INT32_MAX || w.row_stride > INT32_MAX) return false;  // byte offsets in a row are int
  if (w.type != kF32 && w.n_in % 32 != 0) return false;
  const TensorTypeInfo& ti = tensor_type_info(w.type);
  return w.n_in % ti.block_elems == 0;
}

bool gemm_act(const DevMatrix& w, const ActView& act, GemmParams& p) {
  if (w.type == kF32) {
    if (!act.f32) return false;
    p.xf = act.f32;
    p.xf_stride = act.f32_stride;
    return true;
  }
  if (!act.f16 || act.f16_stride % 8 != 0 || reinterpret_cast<uintptr_t>(act.f16) % 16 != 0) return false;
  p.x = reinterpret_cast<const __half*>(act.f16);
  p.x_stride = act.f16_stride;
  return true;
}

template <bool MOE, bool GLU = false>
cudaError_t launch_gemm(const DevMatrix& w, const GemmParams& p, unsigned grid_y_dense, unsigned grid_y_moe,
                        cudaStream_t s) {
  if (const cudaError_t e = grids_ready_for(w.type); e != cudaSuccess) return e;
  if (w.type == kF32) {
    if (GLU) return cudaErrorNotSupported;
    dim3 grid(ceil_div(max_n_out(p), 32), MOE ? grid_y_moe : grid_y_dense, static_cast<unsigned>(p.n_targets));
    launch_pdl(gemm_f32_kernel<MOE>, grid, dim3(256), 0, s, p);
    return launch_status();
  }
  cudaError_t err = cudaErrorNotSupported;
  dispatch_type(w.type, [&]<uint32_t T>() {
    if constexpr (T != kF32) {
      if (MOE) err = launch_mma<T, kMoeTileTokens, true, GLU>(p, grid_y_moe, s);
      else if constexpr (!GLU) err = launch_mma<T, 32, false>(p, grid_y_dense, s);
    }
  });
  return err;
}

GemmTarget gemm_target(const DevMatrix& w, float* y, int64_t y_stride) {
  return GemmTarget{static_cast<const uint8_t*>(w.data), w.row_stride, static_cast<int>(w.n_out), y, y_stride};
}

GemmParams gemm_base(const DevMatrix& w, float* y, int64_t y_stride) {
  GemmParams p{};
  p.t[0] = gemm_target(w, y, y_stride);
  p.n_targets = 1;
  p.expert_stride = w.expert_stride;
  p.n_in = static_cast<int>(w.n_in);
  p.act_div = 1;
  return p;
}

// Every row of a stacked expert matrix starts 16-byte aligned (the stages are copied in 16-byte chunks).
bool expert_stack_ok(const DevMatrix& w) { return w.expert_stride % 16 == 0; }

bool moe_groups_ok(const MoeGroups& g) {
  return g.offsets && g.slots && g.counters && g.tiles && g.max_tiles >= 1 && g.max_tiles <= 65535;
}

void set_groups(const MoeGroups& g, int act_div, GemmParams& p) {
  p.offsets = g.offsets;
  p.slots = g.slots;
  p.counters = g.counters;
  p.tiles = g.tiles;
  p.act_div = act_div;
}

}  // namespace

ActFormat act_format_gemm(uint32_t type) { return type == kF32 ? ActFormat::F32 : ActFormat::F16; }

cudaError_t gemm(const DevMatrix& w, const ActView& act, int n_tokens, float* y, int64_t y_stride, bool accumulate,
                 cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gemm_matrix_ok(w) || !y || n_tokens < 0, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  GemmParams p = gemm_base(w, y, y_stride);
  GUILD_CUDA_RETURN_IF(!gemm_act(w, act, p), cudaErrorInvalidValue);
  p.n_tokens = n_tokens;
  p.accumulate = accumulate;
  GUILD_CUDA_RETURN_IF(ceil_div(n_tokens, 32) > 65535u, cudaErrorInvalidValue);
  return launch_gemm<false>(w, p, ceil_div(n_tokens, 32), 0, s);
}

bool gemm_multi_supported(const DevMatrix* ws, int n_w) {
  if (!ws || n_w < 1 || n_w > kGemvMaxSegments) return false;
  for (int i = 0; i < n_w; ++i) {
    if (!gemm_matrix_ok(ws[i]) || ws[i].type != ws[0].type || ws[i].n_in != ws[0].n_in) return false;
  }
  return true;
}

cudaError_t gemm_multi(const DevMatrix* ws, int n_w, const ActView& act, int n_tokens, float* const* ys,
                       const int64_t* y_strides, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gemm_multi_supported(ws, n_w) || !ys || !y_strides || n_tokens < 0, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  GemmParams p = gemm_base(ws[0], ys[0], y_strides[0]);
  for (int i = 0; i < n_w; ++i) {
    GUILD_CUDA_RETURN_IF(!ys[i], cudaErrorInvalidValue);
    p.t[i] = gemm_target(ws[i], ys[i], y_strides[i]);
  }
  p.n_targets = n_w;
  GUILD_CUDA_RETURN_IF(!gemm_act(ws[0], act, p), cudaErrorInvalidValue);
  p.n_tokens = n_tokens;
  GUILD_CUDA_RETURN_IF(ceil_div(n_tokens, 32) > 65535u, cudaErrorInvalidValue);
  return launch_gemm<false>(ws[0], p, ceil_div(n_tokens, 32), 0, s);
}

cudaError_t moe_gemm(const DevMatrix& w, const ActView& act, const MoeGroups& g, int act_div, float* y,
                     int64_t y_stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gemm_matrix_ok(w) || !expert_stack_ok(w) || !y || act_div < 1 || !moe_groups_ok(g),
                       cudaErrorInvalidValue);
  GemmParams p = gemm_base(w, y, y_stride);
  GUILD_CUDA_RETURN_IF(!gemm_act(w, act, p), cudaErrorInvalidValue);
  set_groups(g, act_div, p);
  return launch_gemm<true>(w, p, 0, static_cast<unsigned>(g.max_tiles), s);
}

bool moe_gemm_glu_supported(const DevMatrix& gate, const DevMatrix& up) {
  return gemm_matrix_ok(gate) && gemm_matrix_ok(up) && expert_stack_ok(gate) && gate.type != kF32 && up.type == gate.type &&
         up.n_in == gate.n_in && up.n_out == gate.n_out && up.row_stride == gate.row_stride &&
         up.expert_stride == gate.expert_stride;
}

cudaError_t moe_gemm_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const MoeGroups& g,
                         int act_div, float* y, int64_t y_stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!moe_gemm_glu_supported(gate, up) || !y || act_div < 1 || !moe_groups_ok(g),
                       cudaErrorInvalidValue);
  GemmParams p = gemm_base(gate, y, y_stride);
  p.w_up = static_cast<const uint8_t*>(up.data);
  GUILD_CUDA_RETURN_IF(!gemm_act(gate, act, p), cudaErrorInvalidValue);
  set_groups(g, act_div, p);
  return launch_gemm<true, true>(gate, p, 0, static_cast<unsigned>(g.max_tiles), s);
}

void set_gemm_direct_frags(bool on) { g_direct_frags.store(on, std::memory_order_relaxed); }

cudaError_t gemm_kernels_init() {
  cudaError_t err = cudaSuccess;
  for (uint32_t t : {kF16, kBF16, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kIQ4_NL, kMXFP4, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,
                     kIQ4_XS, kIQ2_XXS, kIQ2_XS, kIQ2_S, kIQ3_XXS, kIQ3_S, kIQ1_S, kIQ1_M, kTQ1_0, kTQ2_0}) {
    dispatch_type(t, [&]<uint32_t T>() {
      if constexpr (T != kF32) {
        cudaError_t e1 = init_mma_attrs<T, kMoeTileTokens, true>();
        cudaError_t e2 = init_mma_attrs<T, 32, false>();
        cudaError_t e3 = init_mma_attrs<T, kMoeTileTokens, true, true>();
        if (err == cudaSuccess) err = e1 != cudaSuccess ? e1 : (e2 != cudaSuccess ? e2 : e3);
      }
    });
  }
  return err;
}

}  // namespace guild::cuda
