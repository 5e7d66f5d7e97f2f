// Elementwise kernels, activation formats, RMSNorm, RoPE (+ q/k norm and KV
// store), MoE routing/grouping/combination, argmax and embedding lookups.
#include <cmath>

#include "quant_tables.h"
#include "quant_types.cuh"
#include "rope.cuh"
#include "route.cuh"

namespace guild::cuda {
GUILD_IQ_GRID_UPLOADER(iq_grids_upload_ops)
namespace {

// ---- activation formats ---------------------------------------------------------------

// One warp per 32-run: d = amax/127, q = round(x/d) (ties away from zero), (d, d*sum q).
__global__ void quantize_q8_1_kernel(const float* __restrict__ x, int64_t x_stride, int rows, int n_runs,
                                     int8_t* __restrict__ qs, int64_t qs_stride, half2* __restrict__ ds,
                                     int64_t ds_stride) {
  pdl_begin();
  const int64_t run = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (run >= static_cast<int64_t>(rows) * n_runs) return;
  const int r = static_cast<int>(run / n_runs), b = static_cast<int>(run % n_runs);
  const float v = x[r * x_stride + 32 * b + lane];
  q8_1_warp(v, qs + r * qs_stride + 32 * b + lane, ds + r * ds_stride + b);
}

// Block x = row, y = a 1024-wide column chunk; four elements per thread
// (one 16-byte load, one 8-byte store) when the rows allow.
__global__ void convert_f16_kernel(const float* __restrict__ x, int64_t x_stride, int n, __half* __restrict__ y,
                                   int64_t y_stride, bool vec4) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int c0 = (blockIdx.y * blockDim.x + threadIdx.x) * 4;
  if (c0 >= n) return;
  const float* xr = x + r * x_stride;
  __half* yr = y + r * y_stride;
  if (vec4 && c0 + 4 <= n) {
    const float4 v = *reinterpret_cast<const float4*>(xr + c0);
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(yr + c0) = packed;
    return;
  }
  for (int c = c0; c < min(n, c0 + 4); ++c) yr[c] = __float2half_rn(xr[c]);
}

// ---- RMSNorm --------------------------------------------------------------------------

template <int THREADS>
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < THREADS / 32 ? red[lane] : 0.0f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) rms_norm_kernel(float* __restrict__ x, const float* __restrict__ add,
                                                           const float* __restrict__ w, float eps, int n,
                                                           float* __restrict__ y, int8_t* __restrict__ yq,
                                                           int64_t yq_stride, half2* __restrict__ yds,
                                                           int64_t yds_stride, __half* __restrict__ yh,
                                                           int64_t yh_stride) {
  pdl_begin();
  __shared__ float red[32];
  const int row = blockIdx.x;
  // gridDim.y > 1 (one row, no add): every block sums the whole row and
  // writes its share of the outputs (blockIdx.y's runs / elements), so one
  // token's norm is not one block's serial work.
  const int split = blockIdx.y, n_split = gridDim.y;
  float* xr = x + static_cast<int64_t>(row) * n;
  const float* ar = add ? add + static_cast<int64_t>(row) * n : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += THREADS) {
    float v = xr[i];
    if (ar) { v += ar[i]; xr[i] = v; }
    ss += v * v;
  }
  const float mean = block_sum<THREADS>(ss, red) / static_cast<float>(n);
  const float scale = 1.0f / sqrtf(mean + eps);
  float* yr = y ? y + static_cast<int64_t>(row) * n : nullptr;
  __half* yhr = yh ? yh + static_cast<int64_t>(row) * yh_stride : nullptr;
  if (!yq) {
    for (int i = split * THREADS + threadIdx.x; i < n; i += n_split * THREADS) {
      float v = __fmul_rn(xr[i], scale);
      if (w) v = __fmul_rn(v, w[i]);
      if (yr) yr[i] = v;
      if (yhr) yhr[i] = __float2half_rn(v);
    }
    return;
  }
  // With Q8_1 output, warps take whole 32-runs (n is a multiple of 32).
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int b = split * (THREADS / 32) + warp; b < n / 32; b += n_split * (THREADS / 32)) {
    const int i = 32 * b + lane;
    float v = __fmul_rn(xr[i], scale);
    if (w) v = __fmul_rn(v, w[i]);
    if (yr) yr[i] = v;
    if (yhr) yhr[i] = __float2half_rn(v);
    q8_1_warp(v, yq + row * yq_stride + i, yds + row * yds_stride + b);
  }
}

// ---- RoPE -------------------------------------------------------------------------------

// cs[t][2p], cs[t][2p+1] = cos, sin of the angle of pair p at position pos0 + t.
__global__ void rope_table_kernel(RopeDev r, const int32_t* __restrict__ pos0, int n_tokens, float* __restrict__ cs) {
  pdl_begin();
  const int t = blockIdx.x;
  const int half = r.n_rot / 2;
  const int pos = *pos0 + t;
  for (int p = threadIdx.x; p < half; p += blockDim.x) {
    // theta_extrap = pos * theta_scale^p by repeated float multiplication (as ops/rope.cpp).
    float theta_extrap = static_cast<float>(pos);
    for (int k = 0; k < p; ++k) theta_extrap = __fmul_rn(theta_extrap, r.theta_scale);
    const float theta_interp = __fmul_rn(r.freq_scale, theta_extrap);
    float theta = theta_interp;
    float mscale = r.attn_factor;
    if (r.ext_factor != 0.0f) {
      const float ramp_mix = __fmul_rn(yarn_ramp_dev(r.corr_low, r.corr_high, 2 * p), r.ext_factor);
      theta = __fadd_rn(__fmul_rn(theta_interp, 1.0f - ramp_mix), __fmul_rn(theta_extrap, ramp_mix));
      mscale = __fmul_rn(mscale, r.mscale_ext);
    }
    float sn, cn;
    sincosf(theta, &sn, &cn);
    cs[static_cast<int64_t>(t) * r.n_rot + 2 * p] = __fmul_rn(cn, mscale);
    cs[static_cast<int64_t>(t) * r.n_rot + 2 * p + 1] = __fmul_rn(sn, mscale);
  }
}


__global__ void rope_apply_kernel(RopeDev r, const float* __restrict__ cs, float* __restrict__ x, int n_heads,
                                  int head_dim, int64_t stride) {
  pdl_begin();
  __shared__ float buf[4][kMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x;
  const int h = blockIdx.y * 4 + warp;
  if (h >= n_heads) return;
  float* v = x + static_cast<int64_t>(t) * stride + static_cast<int64_t>(h) * head_dim;
  for (int i = lane; i < head_dim; i += 32) buf[warp][i] = v[i];
  __syncwarp();
  rope_head_warp(r, cs + static_cast<int64_t>(t) * r.n_rot, buf[warp], lane);
  __syncwarp();
  for (int i = lane; i < head_dim; i += 32) v[i] = buf[warp][i];
}

// One warp per head: blockIdx.y*4 + warp < n_head: q heads; then n_head_kv k heads; then v heads.
__global__ void qkv_post_kernel(QkvPost p, RopeDev r, const float* __restrict__ cs, const int32_t* __restrict__ pos0) {
  pdl_begin();
  __shared__ float buf[4][kMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x;
  const int hh = blockIdx.y * 4 + warp;
  const int D = p.head_dim;
  const int kv_dim = p.n_head_kv * D;
  const int pos = *pos0 + t;
  const int row = p.kv_rows > 0 ? pos % p.kv_rows : pos;  // a sliding-window layer's ring
  if (hh >= p.n_head + 2 * p.n_head_kv) return;
  if (hh >= p.n_head + p.n_head_kv) {  // V: store as fp16
    const int h = hh - p.n_head - p.n_head_kv;
    const float* src = p.v + static_cast<int64_t>(t) * p.v_stride + static_cast<int64_t>(h) * D;
    __half* dst = reinterpret_cast<__half*>(p.v_cache) + static_cast<int64_t>(row) * kv_dim + static_cast<int64_t>(h) * D;
    for (int i = lane; i < D; i += 32) dst[i] = __float2half_rn(src[i]);
    return;
  }
  const bool is_q = hh < p.n_head;
  const int h = is_q ? hh : hh - p.n_head;
  const float* src = is_q ? p.q + static_cast<int64_t>(t) * p.q_stride + static_cast<int64_t>(h) * D
                          : p.k + static_cast<int64_t>(t) * p.k_stride + static_cast<int64_t>(h) * D;
  float* v = buf[warp];
  head_post_warp(src, is_q ? p.q_norm : p.k_norm, p.eps, D, r, cs + static_cast<int64_t>(t) * r.n_rot, v, lane);
  if (is_q) {
    float* dst = p.q + static_cast<int64_t>(t) * p.q_stride + static_cast<int64_t>(h) * D;
    for (int i = lane; i < D; i += 32) dst[i] = v[i];
  } else {
    __half* dst = reinterpret_cast<__half*>(p.k_cache) + static_cast<int64_t>(row) * kv_dim + static_cast<int64_t>(h) * D;
    for (int i = lane; i < D; i += 32) dst[i] = __float2half_rn(v[i]);
  }
}

// ---- elementwise ----------------------------------------------------------------------------

__global__ void swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t n, float* __restrict__ o) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = g[i];
  o[i] = (x / (1.0f + expf(-x))) * u[i];
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

// ---- MoE --------------------------------------------------------------------------------------

// One warp per token (route.cuh).
__global__ void moe_route_kernel(const float* __restrict__ logits, int n_tokens, int n_expert, int k,
                                 int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_begin();
  __shared__ int sel_id[4][kRouteMaxK];
  __shared__ float sel_l[4][kRouteMaxK];
  const int warp = threadIdx.x >> 5;
  const int t = blockIdx.x * 4 + warp;
  if (t >= n_tokens) return;
  route_token_warp(logits + static_cast<int64_t>(t) * n_expert, n_expert, k, ids + static_cast<int64_t>(t) * k,
                   weights + static_cast<int64_t>(t) * k, sel_id[warp], sel_l[warp]);
}

// Single block: counts per expert, offsets, active list, GEMM tile list, then
// a stable (token-order) fill of the slots. With up to 256 experts each warp
// fills a 32nd of the slots from its own cursors (the experts' counts in the
// warps before it): a prompt's 4096 slots in 4 ballot rounds per warp instead
// of 128 by one warp. More experts: one warp fills all, in order.
constexpr int kGroupThreads = 1024;
constexpr int kGroupWarps = kGroupThreads / 32;
constexpr int kGroupMaxExperts = 1024;
constexpr int kGroupSmemSlots = 8192;  // slot ids staged in shared memory up to this many

// Appends the valid slots of [begin, end) (in order) at cursor[e] per expert e,
// one warp, 32 slots per round.
__device__ __forceinline__ void fill_slots_warp(const int32_t* __restrict__ ids, const int* s_ids, bool in_smem,
                                                int begin, int end, int n_expert, int* cursor,
                                                int32_t* __restrict__ slots) {
  const int lane = threadIdx.x & 31;
  const unsigned lt = (1u << lane) - 1u;
  for (int base = begin; base < end; base += 32) {
    const int s = base + lane;
    const int e = s < end ? (in_smem ? s_ids[s] : ids[s]) : -1;
    const bool ok = e >= 0 && e < n_expert;
    const unsigned valid = __ballot_sync(0xffffffffu, ok);
    const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1) & valid;
    const int rank = __popc(same & lt);
    int pos = 0;
    if (ok) pos = cursor[e] + rank;
    __syncwarp();
    if (ok) {
      slots[pos] = s;
      if (rank == __popc(same) - 1) cursor[e] = pos + 1;  // the last of the group moves the cursor
    }
    __syncwarp();
  }
}

__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(const int32_t* __restrict__ ids, int n_slots,
                                                                 int n_expert, int tile, int max_tiles,
                                                                 int32_t* __restrict__ offsets,
                                                                 int32_t* __restrict__ slots,
                                                                 int32_t* __restrict__ active,
                                                                 int32_t* __restrict__ counters,
                                                                 int32_t* __restrict__ tiles) {
  pdl_begin();
  __shared__ int cnt[kGroupMaxExperts];
  __shared__ int cur[kGroupMaxExperts];
  __shared__ int s_ids[kGroupSmemSlots];  // slot ids, or (per_warp) the warps' counts and cursors
  __shared__ int s_active, s_tiles;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool per_warp = n_expert * kGroupWarps <= kGroupSmemSlots;
  const bool in_smem = !per_warp && n_slots <= kGroupSmemSlots;
  const int chunk = (n_slots + kGroupWarps - 1) / kGroupWarps;  // per_warp: warp w's slots [w chunk, (w+1) chunk)
  const int my_begin = min(n_slots, warp * chunk), my_end = min(n_slots, my_begin + chunk);
  int* warp_counts = s_ids;  // per_warp: [warp][expert]
  for (int e = tid; e < n_expert; e += kGroupThreads) cnt[e] = 0;
  if (per_warp) {
    for (int i = tid; i < n_expert * kGroupWarps; i += kGroupThreads) warp_counts[i] = 0;
  } else if (in_smem) {
    for (int s = tid; s < n_slots; s += kGroupThreads) s_ids[s] = ids[s];
  }
  __syncthreads();
  if (per_warp) {
    for (int s = my_begin + lane; s < my_end; s += 32) {
      const int e = ids[s];
      if (e >= 0 && e < n_expert) atomicAdd(&warp_counts[warp * n_expert + e], 1);
    }
    __syncthreads();
    for (int e = tid; e < n_expert; e += kGroupThreads) {
      int c = 0;
      for (int w = 0; w < kGroupWarps; ++w) c += warp_counts[w * n_expert + e];
      cnt[e] = c;
    }
  } else {
    for (int s = tid; s < n_slots; s += kGroupThreads) {
      const int e = in_smem ? s_ids[s] : ids[s];
      if (e >= 0 && e < n_expert) atomicAdd(&cnt[e], 1);
    }
  }
  __syncthreads();
  if (tid < 32) {
    // Warp 0 scans: each lane owns a contiguous range of experts.
    const int per = (n_expert + 31) / 32;
    const int e0 = min(n_expert, tid * per), e1 = min(n_expert, e0 + per);
    int sum_s = 0, sum_a = 0, sum_t = 0;
    for (int e = e0; e < e1; ++e) { sum_s += cnt[e]; sum_a += cnt[e] > 0; sum_t += (cnt[e] + tile - 1) / tile; }
    int inc_s = sum_s, inc_a = sum_a, inc_t = sum_t;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int ys = __shfl_up_sync(0xffffffffu, inc_s, o);
      const int ya = __shfl_up_sync(0xffffffffu, inc_a, o);
      const int yt = __shfl_up_sync(0xffffffffu, inc_t, o);
      if (tid >= o) { inc_s += ys; inc_a += ya; inc_t += yt; }
    }
    int off_s = inc_s - sum_s, off_a = inc_a - sum_a, off_t = inc_t - sum_t;
    for (int e = e0; e < e1; ++e) {
      const int c = cnt[e];
      offsets[e] = off_s;
      cur[e] = off_s;
      if (c > 0) active[off_a++] = e;
      const int nt = (c + tile - 1) / tile;
      for (int i = 0; i < nt; ++i)
        if (off_t + i < max_tiles) tiles[off_t + i] = (e << 16) | i;
      off_t += nt;
      off_s += c;
    }
    if (tid == 31) {
      offsets[n_expert] = inc_s;
      s_active = inc_a;
      s_tiles = min(inc_t, max_tiles);
    }
  }
  __syncthreads();
  if (tid == 0) { counters[0] = s_active; counters[1] = s_tiles; }
  if (per_warp) {
    // Warp w's cursor for expert e: the expert's offset plus the counts of warps before w.
    for (int e = tid; e < n_expert; e += kGroupThreads) {
      int run = cur[e];
      for (int w = 0; w < kGroupWarps; ++w) {
        const int c = warp_counts[w * n_expert + e];
        warp_counts[w * n_expert + e] = run;
        run += c;
      }
    }
    __syncthreads();
    fill_slots_warp(ids, s_ids, false, my_begin, my_end, n_expert, warp_counts + warp * n_expert, slots);
  } else if (warp == 0) {
    fill_slots_warp(ids, s_ids, in_smem, 0, n_slots, n_expert, cur, slots);
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int k, int n,
                                   float* __restrict__ x) {
  pdl_begin();
  const int t = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= n) return;
  const float* wt = w + static_cast<int64_t>(t) * k;
  float acc = 0.0f;
  for (int j = 0; j < k; ++j) {
    const float v = __fmul_rn(y[(static_cast<int64_t>(t) * k + j) * n + d], wt[j]);
    acc = j == 0 ? v : __fadd_rn(acc, v);
  }
  x[static_cast<int64_t>(t) * n + d] += acc;
}

__global__ void moe_combine_masked_kernel(const float* __restrict__ y, const float* __restrict__ w,
                                          const int32_t* __restrict__ slot_ids, int k, int n, float* __restrict__ x) {
  pdl_begin();
  const int t = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= n) return;
  const float* wt = w + static_cast<int64_t>(t) * k;
  const int32_t* st = slot_ids + static_cast<int64_t>(t) * k;
  float acc = 0.0f;
  bool any = false;
  for (int j = 0; j < k; ++j) {
    if (st[j] < 0) continue;
    const float v = __fmul_rn(y[(static_cast<int64_t>(t) * k + j) * n + d], wt[j]);
    acc = any ? __fadd_rn(acc, v) : v;
    any = true;
  }
  if (any) x[static_cast<int64_t>(t) * n + d] += acc;
}

__global__ void moe_remap_ids_kernel(const int32_t* __restrict__ ids, int n_slots, const int32_t* __restrict__ slot_of,
                                     int32_t* __restrict__ cache_ids, uint32_t* __restrict__ counts) {
  pdl_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_slots) return;
  const int32_t e = ids[i];
  cache_ids[i] = slot_of[e];
  if (counts) atomicAdd(&counts[e], 1u);
}

// ---- lookups --------------------------------------------------------------------------------

template <uint32_t T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ table, size_t row_stride, const int32_t* __restrict__ ids,
                                int n_runs, float* __restrict__ out, int64_t out_stride) {
  pdl_begin();
  const int i = blockIdx.y;
  const int run = blockIdx.x * blockDim.x + threadIdx.x;
  if (run >= n_runs) return;
  const uint8_t* row = table + static_cast<size_t>(ids[i]) * row_stride;
  float v[32];
  Deq<T>::run32(row, run, v);
  float4* o = reinterpret_cast<float4*>(out + static_cast<int64_t>(i) * out_stride + 32 * run);
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}

// Float tables whose rows are not whole 32-runs: one element per thread.
__global__ void get_rows_plain_kernel(const uint8_t* __restrict__ table, uint32_t type, size_t row_stride,
                                      const int32_t* __restrict__ ids, int n, float* __restrict__ out,
                                      int64_t out_stride) {
  pdl_begin();
  const int i = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n) return;
  const uint8_t* row = table + static_cast<size_t>(ids[i]) * row_stride;
  float v;
  if (type == kF32) v = reinterpret_cast<const float*>(row)[c];
  else if (type == kF16) v = h2f(reinterpret_cast<const uint16_t*>(row)[c]);
  else v = bf2f(reinterpret_cast<const uint16_t*>(row)[c]);
  out[static_cast<int64_t>(i) * out_stride + c] = v;
}

// Orderable key of (value, index): larger value wins, then the lower index.
// NaN never wins (callers skip it); the key 0 means "nothing seen".
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
  const uint32_t b = __float_as_uint(v == 0.0f ? 0.0f : v);  // -0 ties with +0
  const uint32_t ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(ord) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxPerThread = 16;

// Grid (chunks, rows): each block reduces its chunk of a row to one key and
// folds it into work[row] with atomicMax; the row's last block (counter in
// work[rows + row]) writes the index and leaves both words zero for the
// next launch (graph replays need no reset).
__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const float* __restrict__ x, int n, int rows,
                                                                unsigned long long* __restrict__ work,
                                                                int32_t* __restrict__ out) {
  pdl_begin();
  __shared__ unsigned long long red[kArgmaxThreads / 32];
  __shared__ bool last;
  const int row = blockIdx.y;
  const float* r = x + static_cast<int64_t>(row) * n;
  const int chunk = kArgmaxThreads * kArgmaxPerThread;
  const int begin = blockIdx.x * chunk, end = min(n, begin + chunk);
  unsigned long long best = 0;
  for (int i = begin + threadIdx.x; i < end; i += kArgmaxThreads) {
    const float v = r[i];
    if (!(v != v)) best = max(best, argmax_key(v, i));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) best = max(best, red[w]);
    if (best) atomicMax(&work[row], best);
    __threadfence();
    const unsigned long long done = atomicAdd(&work[rows + row], 1ull);
    last = done + 1 == gridDim.x;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence();  // acquire: every block's atomicMax happened before its count
    const unsigned long long k = atomicExch(&work[row], 0ull);
    work[rows + row] = 0;
    out[row] = k ? static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(k & 0xFFFFFFFFu)) : 0;
  }
}

}  // namespace

RopeDev rope_dev(const RopeConfig& r) {
  RopeDev d{};
  d.n_rot = r.n_rot;
  d.neox = r.neox;
  d.theta_scale = std::pow(r.freq_base, -2.0f / static_cast<float>(r.n_rot > 0 ? r.n_rot : 1));
  d.freq_scale = r.freq_scale;
  d.ext_factor = r.ext_factor;
  d.attn_factor = r.attn_factor;
  d.mscale_ext = 1.0f + 0.1f * std::log(1.0f / r.freq_scale);
  if (r.ext_factor != 0.0f) {
    auto corr_dim = [&](float n_rot) {
      return r.n_rot * std::log(r.n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) /
             (2.0f * std::log(r.freq_base));
    };
    d.corr_low = std::max(0.0f, std::floor(corr_dim(r.beta_fast)));
    d.corr_high = std::min(static_cast<float>(r.n_rot - 1), std::ceil(corr_dim(r.beta_slow)));
  }
  return d;
}

// ---- launchers ---------------------------------------------------------------------------------

cudaError_t quantize_q8_1(const float* x, int64_t x_stride, int rows, int n, const Q8Act& out, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !out.qs || !out.ds || rows < 0 || n % 32 != 0, cudaErrorInvalidValue);
  if (rows == 0 || n == 0) return cudaSuccess;
  const int64_t runs = static_cast<int64_t>(rows) * (n / 32);
  launch_pdl(quantize_q8_1_kernel, dim3(ceil_div(runs, 8)), dim3(256), 0, s, x, x_stride, rows, n / 32, out.qs, out.qs_stride,
                                                          reinterpret_cast<half2*>(out.ds), out.ds_stride);
  return launch_status();
}

cudaError_t convert_f16(const float* x, int64_t x_stride, int rows, int n, uint16_t* y, int64_t y_stride,
                        cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !y || rows < 0 || n < 0, cudaErrorInvalidValue);
  if (rows == 0 || n == 0) return cudaSuccess;
  const bool vec4 = x_stride % 4 == 0 && y_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(y) % 8 == 0;
  GUILD_CUDA_RETURN_IF(ceil_div(n, 1024) > 65535u, cudaErrorInvalidValue);
  launch_pdl(convert_f16_kernel, dim3(static_cast<unsigned>(rows), ceil_div(n, 1024)), dim3(256), 0, s, x, x_stride, n,
             reinterpret_cast<__half*>(y), y_stride, vec4);
  return launch_status();
}

cudaError_t rms_norm(float* x, const float* add, const float* w, float eps, int rows, int n, float* y_f32,
                     const Q8Act* y_q8, uint16_t* y_f16, int64_t y_f16_stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(y_f16 && y_f16_stride < n, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!x || rows < 0 || n <= 0, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(y_q8 && (n % 32 != 0 || !y_q8->qs || !y_q8->ds), cudaErrorInvalidValue);
  if (rows == 0) return cudaSuccess;
  int8_t* yq = y_q8 ? y_q8->qs : nullptr;
  half2* yds = y_q8 ? reinterpret_cast<half2*>(y_q8->ds) : nullptr;
  const int64_t qs_stride = y_q8 ? y_q8->qs_stride : 0, ds_stride = y_q8 ? y_q8->ds_stride : 0;
  // One row without an add (decode): 128-thread blocks, each writing one
  // 32-run per warp; otherwise one block per row.
  if (rows == 1 && !add && n >= 1024) {
    const unsigned splits = static_cast<unsigned>(ceil_div(n, 128));
    launch_pdl(rms_norm_kernel<128>, dim3(1, splits), dim3(128), 0, s, x, add, w, eps, n, y_f32, yq, qs_stride, yds,
               ds_stride, reinterpret_cast<__half*>(y_f16), y_f16_stride);
  } else if (n >= 1024) {
    launch_pdl(rms_norm_kernel<512>, dim3(rows), dim3(512), 0, s, x, add, w, eps, n, y_f32, yq, qs_stride, yds, ds_stride,
                                               reinterpret_cast<__half*>(y_f16), y_f16_stride);
  } else {
    launch_pdl(rms_norm_kernel<128>, dim3(rows), dim3(128), 0, s, x, add, w, eps, n, y_f32, yq, qs_stride, yds, ds_stride,
                                               reinterpret_cast<__half*>(y_f16), y_f16_stride);
  }
  return launch_status();
}

cudaError_t rope_table(const RopeConfig& r, const int32_t* pos0, int n_tokens, float* cs, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!pos0 || !cs || n_tokens < 0 || r.n_rot <= 0 || r.n_rot % 2 != 0, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  launch_pdl(rope_table_kernel, dim3(n_tokens), dim3(64), 0, s, rope_dev(r), pos0, n_tokens, cs);
  return launch_status();
}

cudaError_t rope_apply(const RopeConfig& r, const float* cs, float* x, int n_tokens, int n_heads, int head_dim,
                       int64_t stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!cs || !x || head_dim > kMaxHeadDim || r.n_rot > head_dim || r.n_rot % 2 != 0,
                       cudaErrorInvalidValue);
  if (n_tokens == 0 || n_heads == 0) return cudaSuccess;
  launch_pdl(rope_apply_kernel, dim3(n_tokens, ceil_div(n_heads, 4)), dim3(128), 0, s, rope_dev(r), cs, x, n_heads, head_dim, stride);
  return launch_status();
}

cudaError_t qkv_post(const QkvPost& p, const RopeConfig& r, const float* cs, const int32_t* pos0, int n_tokens,
                     cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!p.q || !p.k || !p.v || !p.k_cache || !p.v_cache || !pos0, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(p.head_dim <= 0 || p.head_dim > kMaxHeadDim || r.n_rot > p.head_dim || r.n_rot % 2 != 0,
                       cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(r.n_rot > 0 && !cs, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(p.kv_rows < 0 || (p.kv_rows > 0 && n_tokens > p.kv_rows), cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  const int heads = p.n_head + 2 * p.n_head_kv;
  launch_pdl(qkv_post_kernel, dim3(n_tokens, ceil_div(heads, 4)), dim3(128), 0, s, p, rope_dev(r), cs, pos0);
  return launch_status();
}

cudaError_t swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gate || !up || !out || n < 0, cudaErrorInvalidValue);
  if (n == 0) return cudaSuccess;
  launch_pdl(swiglu_kernel, dim3(ceil_div(n, 256)), dim3(256), 0, s, gate, up, n, out);
  return launch_status();
}

cudaError_t add_inplace(float* x, const float* y, int64_t n, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !y || n < 0, cudaErrorInvalidValue);
  if (n == 0) return cudaSuccess;
  launch_pdl(add_kernel, dim3(ceil_div(n, 256)), dim3(256), 0, s, x, y, n);
  return launch_status();
}

cudaError_t moe_route(const float* logits, int n_tokens, int n_expert, int k, int32_t* ids, float* weights,
                      cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!logits || !ids || !weights || n_expert < 1 || n_expert > 32 * kRouteMaxPerLane || k < 1 ||
                           k > kRouteMaxK || k > n_expert,
                       cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  launch_pdl(moe_route_kernel, dim3(ceil_div(n_tokens, 4)), dim3(128), 0, s, logits, n_tokens, n_expert, k, ids, weights);
  return launch_status();
}

int moe_max_tiles(int n_tokens, int k, int n_expert) {
  const int n_slots = n_tokens * k;
  return n_slots / kMoeTileTokens + std::min(n_expert, n_slots) + 1;
}

cudaError_t moe_group(const MoeGroups& g, int n_tokens, int k, int n_expert, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!g.ids || !g.offsets || !g.slots || !g.active || !g.counters || !g.tiles, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(n_expert < 1 || n_expert > kGroupMaxExperts || n_expert > 32767 || k < 1 || n_tokens < 0,
                       cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(g.max_tiles < 1, cudaErrorInvalidValue);
  launch_pdl(moe_group_kernel, dim3(1), dim3(kGroupThreads), 0, s, g.ids, n_tokens * k, n_expert, kMoeTileTokens, g.max_tiles, g.offsets,
                                               g.slots, g.active, g.counters, g.tiles);
  return launch_status();
}

cudaError_t moe_combine(const float* y, const float* weights, int n_tokens, int k, int n, float* x, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!y || !weights || !x || k < 1 || n < 1, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  GUILD_CUDA_RETURN_IF(n_tokens > 65535, cudaErrorInvalidValue);
  launch_pdl(moe_combine_kernel, dim3(ceil_div(n, 256), n_tokens), dim3(256), 0, s, y, weights, k, n, x);
  return launch_status();
}

cudaError_t moe_combine_masked(const float* y, const float* weights, const int32_t* slot_ids, int n_tokens, int k,
                               int n, float* x, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!y || !weights || !slot_ids || !x || k < 1 || n < 1, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  GUILD_CUDA_RETURN_IF(n_tokens > 65535, cudaErrorInvalidValue);
  launch_pdl(moe_combine_masked_kernel, dim3(ceil_div(n, 256), n_tokens), dim3(256), 0, s, y, weights, slot_ids, k, n, x);
  return launch_status();
}

cudaError_t moe_remap_ids(const int32_t* ids, int n_slots, const int32_t* slot_of, int32_t* cache_ids,
                          uint32_t* counts, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!ids || !slot_of || !cache_ids || n_slots < 0, cudaErrorInvalidValue);
  if (n_slots == 0) return cudaSuccess;
  launch_pdl(moe_remap_ids_kernel, dim3(ceil_div(n_slots, 256)), dim3(256), 0, s, ids, n_slots, slot_of, cache_ids, counts);
  return launch_status();
}

cudaError_t get_rows(const DevMatrix& table, const int32_t* ids, int n, float* out, int64_t out_stride,
                     cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!table.data || !ids || !out || !matrix_type_supported(table.type), cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(n > 65535 || n < 0, cudaErrorInvalidValue);
  if (n == 0) return cudaSuccess;
  if (const cudaError_t e = grids_ready_for(table.type); e != cudaSuccess) return e;
  const uint8_t* data = static_cast<const uint8_t*>(table.data);
  if (table.n_in % 32 != 0 || out_stride % 4 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    GUILD_CUDA_RETURN_IF(!is_float_type(table.type), cudaErrorInvalidValue);
    launch_pdl(get_rows_plain_kernel, dim3(ceil_div(table.n_in, 128), n), dim3(128), 0, s, data, table.type, table.row_stride, ids,
                                                                            static_cast<int>(table.n_in), out, out_stride);
    return launch_status();
  }
  const int n_runs = static_cast<int>(table.n_in / 32);
  dim3 grid(ceil_div(n_runs, 64), n);
  cudaError_t err = cudaErrorNotSupported;
  dispatch_type(table.type, [&]<uint32_t T>() {
    launch_pdl(get_rows_kernel<T>, dim3(grid), dim3(64), 0, s, data, table.row_stride, ids, n_runs, out, out_stride);
    err = launch_status();
  });
  return err;
}

size_t argmax_workspace_bytes(int rows) { return static_cast<size_t>(rows > 0 ? rows : 0) * 2 * sizeof(uint64_t); }

cudaError_t argmax_rows(const float* x, int rows, int n, int32_t* out, uint64_t* work, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !out || !work || rows < 0 || rows > 65535 || n < 1, cudaErrorInvalidValue);
  if (rows == 0) return cudaSuccess;
  const dim3 grid(ceil_div(n, kArgmaxThreads * kArgmaxPerThread), rows);
  launch_pdl(argmax_kernel, dim3(grid), dim3(kArgmaxThreads), 0, s, x, n, rows, reinterpret_cast<unsigned long long*>(work), out);
  return launch_status();
}

}  // namespace guild::cuda
