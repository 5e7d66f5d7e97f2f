// Attention over the fp16 KV cache.
//  * decode (one query token): split-K flash decoding. A block takes one KV
//    head, up to 8 query heads of its group and a chunk of 128 positions:
//    scores (one position per thread, 16-byte K loads, the group's queries
//    broadcast from shared memory), chunk softmax, P·V with a deterministic
//    reduction; the last block of a head set to finish (a counter per set)
//    merges the chunks (log-sum-exp) and can emit the Q8_1 input of the
//    output projection: no separate combine launch. The grid covers a range
//    of positions the host names (n_kv_max: a captured step serves every
//    position below it) and blocks past the current length exit; the length
//    is read from device memory.
//  * prefill (several query tokens): flash attention with tensor cores: 64
//    queries per block (16 per warp), K/V tiles of 64 positions by cp.async,
//    S = Q·Kᵀ and O += P·V by mma.sync.m16n8k16 (fp16 in, fp32 out), online
//    softmax in fp32 (exp2 with log2(e) folded into the query scale), causal mask.
//  * both: an optional sliding window (keys outside it are masked and the
//    chunks or tiles wholly outside are skipped) and learned per-head sink
//    logits, which join each softmax's maximum and denominator.
#include <atomic>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "common.cuh"
#include "quant_tables.h"
#include "rope.cuh"

namespace guild::cuda {

cudaError_t gemm_kernels_init();
void set_gemm_direct_frags(bool on);

namespace {

constexpr int kChunk = 128;  // positions per decode block
constexpr int kDecodeThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// The cache row of position p: a sliding-window layer's ring wraps.
__device__ __forceinline__ int kv_row(const AttnArgs& a, int p) { return a.kv_rows > 0 ? p % a.kv_rows : p; }

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// ---- decode ----------------------------------------------------------------------------------

// Heads per block: the largest divisor of the group size (<= 8) that still
// gives kDecodeMinBlocks blocks over the chunks of the launch's shortest
// length (n_kv_min); below that, one head per block. A block's
// heads share its reads of the K/V chunk, but at short contexts (few chunks)
// a step is latency-bound and more, smaller blocks finish sooner (the other
// heads of a group then read the chunk from L2).
constexpr int kDecodeMinBlocks = 128;
int heads_per_block(int group, int blocks_per_head_set) {
  for (int h = 8; h >= 1; --h)
    if (group % h == 0 && blocks_per_head_set * (group / h) >= kDecodeMinBlocks) return h;
  return 1;
}

// qkv_post folded into decode attention (one token): a.q holds the raw q
// projection; each block norms and rotates its own heads' q, and the blocks
// of the chunk holding the current position store its K and V first.
struct DecodePostDev {
  bool on;
  const float* k;
  const float* v;
  const float* q_norm;
  const float* k_norm;
  float eps;
  __half* k_cache;
  __half* v_cache;
  const float* cs;  // the position's cos/sin pairs
  RopeDev rope;
};

template <int D, int GM>
__global__ void __launch_bounds__(kDecodeThreads) attn_decode_kernel(const AttnArgs a, const int32_t* __restrict__ pos0,
                                                                     int hpb, float* __restrict__ part_o,
                                                                     float* __restrict__ part_ml,
                                                                     unsigned int* __restrict__ counters,
                                                                     int8_t* __restrict__ yq, half2* __restrict__ yds,
                                                                     const DecodePostDev post) {
  pdl_begin();
  constexpr int DC = D / 8;                     // 16-byte chunks per row
  constexpr int NPG = kDecodeThreads / DC;      // position groups in P·V
  __shared__ __align__(16) float q_s[GM][D];
  __shared__ float sc[GM][kChunk];
  __shared__ __align__(16) float red[NPG][GM][D];
  const int kvh = blockIdx.x;
  const int chunk = blockIdx.y;
  const int group = a.n_head / a.n_head_kv;
  const int h0 = kvh * group + blockIdx.z * hpb;
  // The launch sets n_kv_max (<= n_ctx, within the grid); the host keeps pos
  // below it. Past it, stay inside the grid and the cache.
  const int cur_pos = *pos0;
  const int n_kv = min(cur_pos + 1, a.n_kv_max);
  // A sliding window leaves keys below lo out of the softmax: chunks wholly
  // below it do nothing and are not counted or merged.
  const int lo = a.window > 0 ? max(0, n_kv - a.window) : 0;
  const int first_chunk = lo / kChunk;
  const int c0 = chunk * kChunk;
  if (c0 >= n_kv || chunk < first_chunk) return;
  const int c1 = min(c0 + kChunk, n_kv);
  const int kv_dim = a.n_head_kv * D;
  const int tid = threadIdx.x;

  if (!post.on) {
    for (int i = tid; i < GM * D; i += kDecodeThreads) {
      const int g = i / D, d = i % D;
      q_s[g][d] = g < hpb ? a.q[static_cast<int64_t>(h0 + g) * D + d] * a.scale : 0.0f;
    }
  } else {
    // qkv_post's values (head_post_warp), then the scale as above.
    const int warp = tid >> 5, lane = tid & 31;
    for (int g = warp; g < GM; g += kDecodeThreads / 32) {
      if (g < hpb) {
        head_post_warp(a.q + static_cast<int64_t>(h0 + g) * D, post.q_norm, post.eps, D, post.rope, post.cs, q_s[g],
                       lane);
        for (int d = lane; d < D; d += 32) q_s[g][d] = q_s[g][d] * a.scale;
      } else {
        for (int d = lane; d < D; d += 32) q_s[g][d] = 0.0f;
      }
    }
    // The current position's K and V, stored by every block that reads them
    // (the same bits from each), before the loops below read the cache. A
    // position past the launch's range (a host error) stores nothing rather
    // than overwrite the clamped, valid row.
    const int pos = n_kv - 1;
    if (pos < c1 && pos == cur_pos) {
      const int64_t row = static_cast<int64_t>(kv_row(a, pos)) * kv_dim + kvh * D;
      if (warp == 0) {
        float* kbuf = &red[0][0][0];
        head_post_warp(post.k + kvh * D, post.k_norm, post.eps, D, post.rope, post.cs, kbuf, lane);
        for (int d = lane; d < D; d += 32) post.k_cache[row + d] = __float2half_rn(kbuf[d]);
      } else if (warp == 1) {
        for (int d = lane; d < D; d += 32) post.v_cache[row + d] = __float2half_rn(post.v[kvh * D + d]);
      }
    }
  }
  __syncthreads();

  // Scores: thread t takes position c0 + t.
  {
    const int p = c0 + tid;
    float acc[GM];
#pragma unroll
    for (int g = 0; g < GM; ++g) acc[g] = 0.0f;
    if (p < c1 && p >= lo) {
      const uint4* krow = reinterpret_cast<const uint4*>(a.k_cache + static_cast<int64_t>(kv_row(a, p)) * kv_dim + kvh * D);
#pragma unroll 4
      for (int c = 0; c < DC; ++c) {
        const uint4 kv = krow[c];  // not __ldg: this kernel may have just stored the row
        const float2 k0 = __half22float2(*reinterpret_cast<const __half2*>(&kv.x));
        const float2 k1 = __half22float2(*reinterpret_cast<const __half2*>(&kv.y));
        const float2 k2 = __half22float2(*reinterpret_cast<const __half2*>(&kv.z));
        const float2 k3 = __half22float2(*reinterpret_cast<const __half2*>(&kv.w));
#pragma unroll
        for (int g = 0; g < GM; ++g) {
          const float4 qa = *reinterpret_cast<const float4*>(&q_s[g][8 * c]);
          const float4 qb = *reinterpret_cast<const float4*>(&q_s[g][8 * c + 4]);
          acc[g] += qa.x * k0.x + qa.y * k0.y + qa.z * k1.x + qa.w * k1.y + qb.x * k2.x + qb.y * k2.y +
                    qb.z * k3.x + qb.w * k3.y;
        }
      }
    }
#pragma unroll
    for (int g = 0; g < GM; ++g) sc[g][tid] = p < c1 && p >= lo ? acc[g] : -INFINITY;
  }
  __syncthreads();

  // Chunk softmax per head (warp w takes heads w, w+4, ...).
  __shared__ float s_m[GM], s_l[GM];
  {
    const int warp = tid >> 5, lane = tid & 31;
    for (int g = warp; g < GM; g += kDecodeThreads / 32) {
      float m = -INFINITY;
      for (int i = lane; i < kChunk; i += 32) m = fmaxf(m, sc[g][i]);
      m = warp_max(m);
      float l = 0.0f;
      for (int i = lane; i < kChunk; i += 32) {
        const float e = sc[g][i] == -INFINITY ? 0.0f : __expf(sc[g][i] - m);
        sc[g][i] = e;
        l += e;
      }
      l = warp_sum(l);
      if (lane == 0) { s_m[g] = m; s_l[g] = l; }
    }
  }
  __syncthreads();

  // P·V: thread = (position group pg, 8-element chunk dc).
  {
    const int dc = tid % DC, pg = tid / DC;
    float acc[GM][8];
#pragma unroll
    for (int g = 0; g < GM; ++g)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
    for (int p = c0 + pg; pg < NPG && p < c1; p += NPG) {
      if (p < lo) continue;  // outside the window: weight 0
      const uint4 vv = reinterpret_cast<const uint4*>(a.v_cache + static_cast<int64_t>(kv_row(a, p)) * kv_dim + kvh * D)[dc];
      const float2 v0 = __half22float2(*reinterpret_cast<const __half2*>(&vv.x));
      const float2 v1 = __half22float2(*reinterpret_cast<const __half2*>(&vv.y));
      const float2 v2 = __half22float2(*reinterpret_cast<const __half2*>(&vv.z));
      const float2 v3 = __half22float2(*reinterpret_cast<const __half2*>(&vv.w));
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        const float e = sc[g][p - c0];
        acc[g][0] += e * v0.x; acc[g][1] += e * v0.y; acc[g][2] += e * v1.x; acc[g][3] += e * v1.y;
        acc[g][4] += e * v2.x; acc[g][5] += e * v2.y; acc[g][6] += e * v3.x; acc[g][7] += e * v3.y;
      }
    }
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (pg >= NPG) break;
      float4* r = reinterpret_cast<float4*>(&red[pg][g][8 * dc]);
      r[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
      r[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    }
  }
  __syncthreads();
  for (int i = tid; i < hpb * D; i += kDecodeThreads) {
    const int g = i / D, d = i % D;
    float o = 0.0f;
#pragma unroll
    for (int pg = 0; pg < NPG; ++pg) o += red[pg][g][d];
    part_o[(static_cast<int64_t>(chunk) * a.n_head + h0 + g) * D + d] = o;
  }
  if (tid < hpb) {
    part_ml[(static_cast<int64_t>(chunk) * a.n_head + h0 + tid) * 2] = s_m[tid];
    part_ml[(static_cast<int64_t>(chunk) * a.n_head + h0 + tid) * 2 + 1] = s_l[tid];
  }

  // The head set's last block merges every chunk. Each block publishes its
  // partials (fence) before it counts; the last one to count resets the
  // counter for the next launch and reads the others' partials past L1. The
  // merge runs in chunk order whichever block is last: deterministic.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  const int n_chunks = (n_kv + kChunk - 1) / kChunk;
  if (tid == 0) {
    unsigned int* counter = counters + kvh * gridDim.z + blockIdx.z;
    last = atomicAdd(counter, 1u) == static_cast<unsigned int>(n_chunks - first_chunk - 1);
    if (last) atomicExch(counter, 0u);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Per head, the largest chunk maximum M (lanes over chunks; a learned sink
  // logit joins the maximum and starts the sum L), then tiles of
  // up to kChunk chunks: each chunk's factor exp(m - M) into sc (the sum L
  // accumulated by the head's warp), and every thread adds the factored
  // partial outputs of its elements for all the block's heads at once (GM x 4
  // loads in flight: the merge is latency-bound, not bandwidth-bound).
  __shared__ float s_M[GM], s_L[GM];
  const int warp = tid >> 5, lane = tid & 31;
  for (int g = warp; g < hpb; g += kDecodeThreads / 32) {
    float m = -INFINITY;
    for (int c = first_chunk + lane; c < n_chunks; c += 32)
      m = fmaxf(m, __ldcg(part_ml + (static_cast<int64_t>(c) * a.n_head + h0 + g) * 2));
    m = warp_max(m);
    if (lane == 0) {
      const float sink = a.sinks ? a.sinks[h0 + g] : -INFINITY;
      s_M[g] = fmaxf(m, sink);
      s_L[g] = a.sinks ? __expf(sink - s_M[g]) : 0.0f;
    }
  }
  constexpr int DPT = (D + kDecodeThreads - 1) / kDecodeThreads;  // elements per thread
  float acc[GM][DPT];
#pragma unroll
  for (int g = 0; g < GM; ++g)
#pragma unroll
    for (int j = 0; j < DPT; ++j) acc[g][j] = 0.0f;
  for (int t0 = first_chunk; t0 < n_chunks; t0 += kChunk) {
    const int nt = min(kChunk, n_chunks - t0);
    __syncthreads();  // s_M written; the previous tile's factors used
    for (int g = warp; g < hpb; g += kDecodeThreads / 32) {
      float l = 0.0f;
      for (int i = lane; i < nt; i += 32) {
        const int64_t at = (static_cast<int64_t>(t0 + i) * a.n_head + h0 + g) * 2;
        const float m = __ldcg(part_ml + at);
        const float f = m == -INFINITY ? 0.0f : __expf(m - s_M[g]);
        sc[g][i] = f;
        l += f * __ldcg(part_ml + at + 1);
      }
      l = warp_sum(l);
      if (lane == 0) s_L[g] += l;
    }
    __syncthreads();
    // Branch-free loads (heads past hpb and elements past D read valid
    // neighbours and are never written), issued four chunks at a time.
    auto add_chunks = [&](int i, auto n_chunk_tag) {
      constexpr int U = decltype(n_chunk_tag)::value;
      float v[U][GM][DPT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float* po = part_o + (static_cast<int64_t>(t0 + i + u) * a.n_head + h0) * D;
#pragma unroll
        for (int g = 0; g < GM; ++g)
#pragma unroll
          for (int j = 0; j < DPT; ++j)
            v[u][g][j] = __ldcg(po + min(g, hpb - 1) * D + min(tid + j * kDecodeThreads, D - 1));
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int g = 0; g < GM; ++g) {
          const float f = sc[min(g, hpb - 1)][i + u];
#pragma unroll
          for (int j = 0; j < DPT; ++j) acc[g][j] += f * v[u][g][j];
        }
    };
    int i = 0;
    for (; i + 4 <= nt; i += 4) add_chunks(i, std::integral_constant<int, 4>{});
    for (; i < nt; ++i) add_chunks(i, std::integral_constant<int, 1>{});
  }
  __syncthreads();  // s_L final
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= hpb) break;
    const int h = h0 + g;
    const float L = s_L[g];
#pragma unroll
    for (int j = 0; j < DPT; ++j) {
      // Whole warps skip elements past D (q8_1_warp needs the warp's 32).
      if (j * kDecodeThreads + (tid & ~31) >= D) break;
      const int d = tid + j * kDecodeThreads;
      const float v = L > 0.0f ? acc[g][j] / L : 0.0f;
      if (d < D) a.out[static_cast<int64_t>(h) * D + d] = v;
      if (yq) {  // D is a multiple of 32: this warp quantizes one 32-run
        q8_1_warp(v, yq + static_cast<int64_t>(h) * D + d, yds + (static_cast<int64_t>(h) * D + d) / 32);
      }
    }
  }
}

template <int D>
cudaError_t launch_decode_d(const AttnArgs& a, const int32_t* pos0, float* work, const Q8Act* q8,
                            const DecodePostDev& post, cudaStream_t s) {
  const int group = a.n_head / a.n_head_kv;
  // The workspace is laid out for the capacity; the grid covers n_kv_max
  // (a.n_kv_min / n_kv_max resolved by attention_decode_impl).
  const int ctx_chunks = (a.n_ctx + kChunk - 1) / kChunk;
  const int n_chunks = (a.n_kv_max + kChunk - 1) / kChunk;
  const int hpb = heads_per_block(group, a.n_head_kv * ((a.n_kv_min + kChunk - 1) / kChunk));
  float* part_o = work;
  float* part_ml = work + static_cast<size_t>(ctx_chunks) * a.n_head * D;
  unsigned int* counters = reinterpret_cast<unsigned int*>(part_ml + static_cast<size_t>(ctx_chunks) * a.n_head * 2);
  int8_t* yq = q8 ? q8->qs : nullptr;
  half2* yds = q8 ? reinterpret_cast<half2*>(q8->ds) : nullptr;
  dim3 grid(a.n_head_kv, n_chunks, group / hpb);
  // The kernel's head capacity GM: the power of two at or above hpb.
  auto* kernel = hpb == 1 ? attn_decode_kernel<D, 1>
                 : hpb == 2 ? attn_decode_kernel<D, 2>
                 : hpb <= 4 ? attn_decode_kernel<D, 4>
                            : attn_decode_kernel<D, 8>;
  launch_pdl(kernel, grid, dim3(kDecodeThreads), 0, s, a, pos0, hpb, part_o, part_ml, counters, yq, yds, post);
  return launch_status();
}

// ---- prefill --------------------------------------------------------------------------------------

constexpr int kQTile = 64, kKTile = 64;

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <int D>
constexpr size_t prefill_smem() { return static_cast<size_t>(kQTile + 2 * kKTile) * (D + 8) * sizeof(__half); }

template <int D>
__global__ void __launch_bounds__(128) attn_prefill_kernel(const AttnArgs a, const int32_t* __restrict__ pos0,
                                                           int n_tokens) {
  pdl_begin();
  constexpr int LD = D + 8;
  extern __shared__ __align__(16) uint8_t smem[];
  __half* Qs = reinterpret_cast<__half*>(smem);
  __half* Ks = Qs + kQTile * LD;
  __half* Vs = Ks + kKTile * LD;
  const int q0 = blockIdx.x * kQTile;
  const int h = blockIdx.y;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const int kv_dim = a.n_head_kv * D;
  const int p0 = *pos0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float qscale = a.scale * kLog2e;

  // Q tile (fp16, scaled).
  for (int i = threadIdx.x; i < kQTile * D / 2; i += 128) {
    const int r = (2 * i) / D, c = (2 * i) % D;
    float2 v = make_float2(0.0f, 0.0f);
    if (q0 + r < n_tokens) {
      const float* src = a.q + static_cast<int64_t>(q0 + r) * a.q_stride + static_cast<int64_t>(h) * D + c;
      v = make_float2(src[0] * qscale, src[1] * qscale);
    }
    *reinterpret_cast<__half2*>(Qs + r * LD + c) = __floats2half2_rn(v.x, v.y);
  }
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldsm_x4(qf[kk], Qs + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};
  const int qi0 = q0 + warp * 16 + (lane >> 2);  // this thread's rows: qi0, qi0 + 8
  const int qpos[2] = {p0 + qi0, p0 + qi0 + 8};

  const int last_q = min(q0 + kQTile, n_tokens) - 1;
  const int kv_end = p0 + last_q + 1;  // exclusive
  // A sliding window: the block's first query sees keys from p0 + q0 - window + 1 on.
  const int kv_begin = a.window > 0 ? max(0, p0 + q0 - a.window + 1) / kKTile * kKTile : 0;
  for (int j0 = kv_begin; j0 < kv_end; j0 += kKTile) {
    __syncthreads();  // previous tile fully consumed
    for (int i = threadIdx.x; i < kKTile * (D / 8); i += 128) {
      const int r = i / (D / 8), c = i % (D / 8);
      const bool ok = j0 + r < kv_end;
      const int64_t off = static_cast<int64_t>(ok ? kv_row(a, j0 + r) : 0) * kv_dim + kvh * D + 8 * c;
      cp_async16(Ks + r * LD + 8 * c, a.k_cache + off, ok);
    }
    cp_async_commit();
    for (int i = threadIdx.x; i < kKTile * (D / 8); i += 128) {
      const int r = i / (D / 8), c = i % (D / 8);
      const bool ok = j0 + r < kv_end;
      const int64_t off = static_cast<int64_t>(ok ? kv_row(a, j0 + r) : 0) * kv_dim + kvh * D + 8 * c;
      cp_async16(Vs + r * LD + 8 * c, a.v_cache + off, ok);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    float sfr[kKTile / 8][4];
#pragma unroll
    for (int i = 0; i < kKTile / 8; ++i) sfr[i][0] = sfr[i][1] = sfr[i][2] = sfr[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kKTile / 16; ++np) {
        uint32_t r[4];
        const int q = lane >> 3;
        ldsm_x4(r, Ks + (np * 16 + (q >> 1) * 8 + (lane & 7)) * LD + kk * 16 + (q & 1) * 8);
        mma16816(sfr[2 * np], qf[kk], r[0], r[1]);
        mma16816(sfr[2 * np + 1], qf[kk], r[2], r[3]);
      }
    }
    // Mask and online softmax (rows qi0 and qi0 + 8; a quad of lanes shares a row).
    float mx[2] = {m_r[0], m_r[1]};
#pragma unroll
    for (int nt = 0; nt < kKTile / 8; ++nt) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int j = j0 + nt * 8 + 2 * (lane & 3) + (q & 1);
        const int rr = q >> 1;
        if (j > qpos[rr] || (a.window > 0 && j <= qpos[rr] - a.window)) sfr[nt][q] = -INFINITY;
        mx[rr] = fmaxf(mx[rr], sfr[nt][q]);
      }
    }
    float alpha[2], mref[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
      mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
      mref[rr] = mx[rr] == -INFINITY ? 0.0f : mx[rr];
      alpha[rr] = m_r[rr] == -INFINITY ? 0.0f : exp2f(m_r[rr] - mref[rr]);
      m_r[rr] = mx[rr];
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < kKTile / 8; ++nt) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int rr = q >> 1;
        const float e = exp2f(sfr[nt][q] - mref[rr]);
        sfr[nt][q] = e;
        rs[rr] += e;
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      rs[rr] += __shfl_xor_sync(0xffffffffu, rs[rr], 1);
      rs[rr] += __shfl_xor_sync(0xffffffffu, rs[rr], 2);
      l_r[rr] = l_r[rr] * alpha[rr] + rs[rr];
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= alpha[0]; o[dt][1] *= alpha[0];
      o[dt][2] *= alpha[1]; o[dt][3] *= alpha[1];
    }
    cp_async_wait<0>();
    __syncthreads();
    // O += P·V
#pragma unroll
    for (int kk = 0; kk < kKTile / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack2(sfr[2 * kk][0], sfr[2 * kk][1]);
      pa[1] = pack2(sfr[2 * kk][2], sfr[2 * kk][3]);
      pa[2] = pack2(sfr[2 * kk + 1][0], sfr[2 * kk + 1][1]);
      pa[3] = pack2(sfr[2 * kk + 1][2], sfr[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t r[4];
        const int q = lane >> 3;
        ldsm_x4_t(r, Vs + (kk * 16 + (q & 1) * 8 + (lane & 7)) * LD + dp * 16 + (q >> 1) * 8);
        mma16816(o[2 * dp], pa, r[0], r[1]);
        mma16816(o[2 * dp + 1], pa, r[2], r[3]);
      }
    }
  }
  // A learned sink logit (log2 units here) joins each row's denominator.
  if (a.sinks) {
    const float sink = a.sinks[h] * kLog2e;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float m = fmaxf(m_r[rr], sink);
      const float f = m_r[rr] == -INFINITY ? 0.0f : exp2f(m_r[rr] - m);
      l_r[rr] = l_r[rr] * f + exp2f(sink - m);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][2 * rr] *= f;
        o[dt][2 * rr + 1] *= f;
      }
    }
  }
  // Normalise and write.
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int qi = qi0 + 8 * rr;
    if (qi >= n_tokens) continue;
    const float inv = l_r[rr] > 0.0f ? 1.0f / l_r[rr] : 0.0f;
    float* dst = a.out + static_cast<int64_t>(qi) * a.out_stride + static_cast<int64_t>(h) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int d = dt * 8 + 2 * (lane & 3);
      *reinterpret_cast<float2*>(dst + d) = make_float2(o[dt][2 * rr] * inv, o[dt][2 * rr + 1] * inv);
    }
  }
}

template <int D>
cudaError_t prefill_attr() {
  return cudaFuncSetAttribute(attn_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(prefill_smem<D>()));
}

template <int D>
cudaError_t launch_prefill_d(const AttnArgs& a, const int32_t* pos0, int n_tokens, cudaStream_t s) {
  static const cudaError_t attr = prefill_attr<D>();
  if (attr != cudaSuccess) return attr;
  dim3 grid(ceil_div(n_tokens, kQTile), a.n_head);
  launch_pdl(attn_prefill_kernel<D>, dim3(grid), dim3(128), prefill_smem<D>(), s, a, pos0, n_tokens);
  return launch_status();
}

bool attn_args_ok(const AttnArgs& a) {
  if (!a.q || !a.k_cache || !a.v_cache || !a.out) return false;
  if (a.n_head <= 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0 || a.n_ctx <= 0 || a.window < 0) return false;
  // A ring must hold every key a query of the pass can see.
  if (a.kv_rows < 0 || (a.kv_rows > 0 && (a.window <= 0 || a.kv_rows < a.window))) return false;
  if (reinterpret_cast<uintptr_t>(a.k_cache) % 16 != 0 || reinterpret_cast<uintptr_t>(a.v_cache) % 16 != 0) return false;
  return true;
}

}  // namespace

size_t attention_decode_workspace_floats(int n_head, int head_dim, int n_ctx) {
  const size_t n_chunks = (static_cast<size_t>(n_ctx) + kChunk - 1) / kChunk;
  // partial outputs and (max, sum) per chunk and head, then a counter per head set (<= n_head)
  return n_chunks * static_cast<size_t>(n_head) * (static_cast<size_t>(head_dim) + 2) + static_cast<size_t>(n_head);
}

bool attention_head_dim_supported(int head_dim, bool prefill) {
  if (prefill) return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128;
  return head_dim == 32 || head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

static cudaError_t attention_decode_impl(const AttnArgs& a, const int32_t* pos0, float* work, const Q8Act* out_q8,
                                         const DecodePostDev& post, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!attn_args_ok(a) || !pos0 || !work, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!attention_head_dim_supported(a.head_dim, false), cudaErrorNotSupported);
  GUILD_CUDA_RETURN_IF(out_q8 && (a.head_dim % 32 != 0 || !out_q8->qs || !out_q8->ds), cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF((a.n_ctx + kChunk - 1) / kChunk > 65535, cudaErrorInvalidValue);
  // The launch's lengths, defaults filled in (0: n_ctx, then n_kv_max).
  AttnArgs r = a;
  r.n_kv_max = a.n_kv_max > 0 ? a.n_kv_max : a.n_ctx;
  r.n_kv_min = a.n_kv_min > 0 ? a.n_kv_min : r.n_kv_max;
  GUILD_CUDA_RETURN_IF(a.n_kv_max < 0 || r.n_kv_max > a.n_ctx || a.n_kv_min < 0 || r.n_kv_min > r.n_kv_max,
                       cudaErrorInvalidValue);
  switch (a.head_dim) {
    case 32: return launch_decode_d<32>(r, pos0, work, out_q8, post, s);
    case 64: return launch_decode_d<64>(r, pos0, work, out_q8, post, s);
    case 80: return launch_decode_d<80>(r, pos0, work, out_q8, post, s);
    case 96: return launch_decode_d<96>(r, pos0, work, out_q8, post, s);
    case 128: return launch_decode_d<128>(r, pos0, work, out_q8, post, s);
    case 256: return launch_decode_d<256>(r, pos0, work, out_q8, post, s);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t attention_decode(const AttnArgs& a, const int32_t* pos0, float* work, const Q8Act* out_q8, cudaStream_t s) {
  return attention_decode_impl(a, pos0, work, out_q8, DecodePostDev{}, s);
}

cudaError_t attention_decode_post(const AttnArgs& a, const QkvPost& p, const RopeConfig& r, const float* cs,
                                  const int32_t* pos0, float* work, const Q8Act* out_q8, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!p.k || !p.v || !p.k_cache || !p.v_cache || p.q != a.q, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(p.k_cache != a.k_cache || p.v_cache != a.v_cache || p.kv_rows != a.kv_rows || p.n_head != a.n_head ||
                           p.n_head_kv != a.n_head_kv || p.head_dim != a.head_dim,
                       cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(a.head_dim > kMaxHeadDim || r.n_rot < 0 || r.n_rot > a.head_dim || r.n_rot % 2 != 0 ||
                           (r.n_rot > 0 && !cs),
                       cudaErrorInvalidValue);
  DecodePostDev d{};
  d.on = true;
  d.k = p.k;
  d.v = p.v;
  d.q_norm = p.q_norm;
  d.k_norm = p.k_norm;
  d.eps = p.eps;
  d.k_cache = reinterpret_cast<__half*>(p.k_cache);
  d.v_cache = reinterpret_cast<__half*>(p.v_cache);
  d.cs = cs;
  d.rope = rope_dev(r);
  return attention_decode_impl(a, pos0, work, out_q8, d, s);
}

cudaError_t attention_prefill(const AttnArgs& a, const int32_t* pos0, int n_tokens, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!attn_args_ok(a) || !pos0 || n_tokens < 0, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(a.kv_rows > 0 && n_tokens + a.window - 1 > a.kv_rows, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!attention_head_dim_supported(a.head_dim, true), cudaErrorNotSupported);
  GUILD_CUDA_RETURN_IF(a.q_stride % 2 != 0 || a.out_stride % 2 != 0, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  switch (a.head_dim) {
    case 32: return launch_prefill_d<32>(a, pos0, n_tokens, s);
    case 64: return launch_prefill_d<64>(a, pos0, n_tokens, s);
    case 96: return launch_prefill_d<96>(a, pos0, n_tokens, s);
    case 128: return launch_prefill_d<128>(a, pos0, n_tokens, s);
    default: return cudaErrorNotSupported;
  }
}

namespace {
// -1: not decided (no kernels_init yet: plain launches), 0 off, 1 on.
std::atomic<int> g_pdl{-1};
}  // namespace

bool pdl_enabled() { return g_pdl.load(std::memory_order_relaxed) == 1; }

cudaError_t kernels_init(const KernelSwitches& switches) {
  set_gemm_direct_frags(switches.gemm_direct);
  cudaError_t err = gemm_kernels_init();
  if (err != cudaSuccess) return err;
  if ((err = quant_tables_init()) != cudaSuccess) return err;
  // Programmatic dependent launch: on when every device initialised so far
  // has compute capability 9.0+ (switches.pdl false turns it off, for measuring).
  int dev = 0, major = 0;
  if ((err = cudaGetDevice(&dev)) != cudaSuccess ||
      (err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess)
    return err;
  // The wait is compiled only into sm_90+ code: a build whose code for this
  // device is older PTX (JIT-compiled) must not let kernels start early (every
  // kernel of the package is built for the same architectures: one stands for all).
  cudaFuncAttributes fa{};
  if ((err = cudaFuncGetAttributes(&fa, attn_decode_kernel<128, 1>)) != cudaSuccess) return err;
  const bool on = major >= 9 && fa.ptxVersion >= 90 && switches.pdl;
  int cur = g_pdl.load();
  while (!g_pdl.compare_exchange_weak(cur, (cur == -1 || cur == 1) && on ? 1 : 0)) {
  }
  for (cudaError_t e : {prefill_attr<32>(), prefill_attr<64>(), prefill_attr<96>(), prefill_attr<128>()})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // namespace guild::cuda
