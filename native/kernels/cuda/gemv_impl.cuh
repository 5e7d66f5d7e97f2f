// Matrix-vector kernels (shared by gemv*.cu; see gemv.cu). Matrix-vector products for decode (and small token counts), dequantization
// fused into the dot products:
//  * quantized weights x Q8_1 activations: each lane owns a "unit" of a quant
//    block (16 bytes of Q4_K/Q5_K quants, one 128-bit load), integer dp4a dots
//    per 32-run, scales applied in float; a warp walks one or two rows, four
//    warps per block; columns (tokens) share every weight load.
//  * F32/F16/BF16 weights x float activations: 16-byte weight loads, float FMA.
// Variants: dense (columns 0..n-1), GLU (gate and up rows read together,
// silu(g)*u written), and grouped experts (the expert and its slots come from
// the device-side routing; each active expert's rows are read once for all
// its slots).
#pragma once
#include "common.cuh"

namespace guild::cuda::gemv_detail {

constexpr int kWarps = 4;

struct GemvParams {
  const uint8_t* w;       // matrix / expert 0
  const uint8_t* w2;      // GLU: up matrix
  size_t row_stride;
  size_t expert_stride;
  int n_in, n_out;
  // activations
  const int8_t* aq; const half2* ads; int64_t aq_stride, ads_stride;
  const float* af; int64_t af_stride;
  int n_cols;             // dense: columns
  int stage;              // quantized kernel: stage each warp's rows in shared memory (bytes per warp), 0 = read global
  float* y; int64_t y_stride;
  bool accumulate;
  // grouped experts
  const int32_t* offsets; const int32_t* slots; const int32_t* active; const int32_t* counters;
  int act_div;
  // experts chosen directly (one token): block y computes choice y's expert
  // direct[y] (-1: computed elsewhere) into output row y from activation row
  // y / act_div; the grouping above is not used
  const int32_t* direct;
  // combine kernels: x[r] += sum_j combine_w[j] * (W_direct[j] row r · act row j), j < k
  const float* combine_w;
  int k;
  int n_expert;  // experts in the stack (bounds the combine's prefetch)
  // dense, several matrices of one type and row size in one launch (e.g.
  // q, k, v): blocks [seg_first_block[i], seg_first_block[i+1]) compute matrix i
  int n_seg;
  const uint8_t* seg_w[kGemvMaxSegments];
  float* seg_y[kGemvMaxSegments];
  int64_t seg_y_stride[kGemvMaxSegments];
  int seg_n_out[kGemvMaxSegments];
  int seg_first_block[kGemvMaxSegments + 1];
};

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

// Column c's activation row index and output row for the current group.
struct Cols {
  int act_row[kGemvMaxCols];
  int out_row[kGemvMaxCols];
  int n;
};

template <int NC, bool MOE>
__device__ __forceinline__ bool next_cols(const GemvParams& p, int expert_idx, int& cursor, Cols& c,
                                          const uint8_t*& w, const uint8_t*& w2) {
  if (!MOE) {
    if (cursor >= p.n_cols) return false;
    c.n = min(NC, p.n_cols - cursor);
#pragma unroll
    for (int i = 0; i < NC; ++i) { c.act_row[i] = cursor + i; c.out_row[i] = cursor + i; }
    cursor += NC;
    return true;
  }
  if (p.direct) {
    const int e = p.direct[expert_idx];
    if (cursor > 0 || e < 0) return false;
    c.n = 1;
#pragma unroll
    for (int i = 0; i < NC; ++i) { c.act_row[i] = expert_idx / p.act_div; c.out_row[i] = expert_idx; }
    w = p.w + static_cast<size_t>(e) * p.expert_stride;
    if (p.w2) w2 = p.w2 + static_cast<size_t>(e) * p.expert_stride;
    cursor = 1;
    return true;
  }
  const int e = p.active[expert_idx];
  const int end = p.offsets[e + 1];
  const int begin = p.offsets[e] + cursor;
  if (begin >= end) return false;
  c.n = min(NC, end - begin);
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const int slot = p.slots[begin + min(i, c.n - 1)];
    c.out_row[i] = slot;
    c.act_row[i] = slot / p.act_div;
  }
  w = p.w + static_cast<size_t>(e) * p.expert_stride;
  if (p.w2) w2 = p.w2 + static_cast<size_t>(e) * p.expert_stride;
  cursor += NC;
  return true;
}

// A warp's rows (and the GLU partner's) into its stage with coalesced 16-byte
// cp.async: every byte of the rows read once, whole sectors.
__device__ __forceinline__ void stage_rows(uint8_t* buf, int half, const uint8_t* g, const uint8_t* g2, int n16,
                                           int lane) {
  for (int i = lane; i < n16; i += 32) {
    cp_async16_g2s(buf + 16 * i, g + 16 * static_cast<size_t>(i));
    if (g2) cp_async16_g2s(buf + half + 16 * i, g2 + 16 * static_cast<size_t>(i));
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

template <uint32_t T, int NC, int R, bool MOE, bool GLU>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_kernel(const GemvParams p) {
  using U = QUnit<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // This block's matrix (several in one launch: find its segment).
  int block = blockIdx.x, n_out = p.n_out;
  const uint8_t* w = p.w;
  float* y = p.y;
  int64_t y_stride = p.y_stride;
  if (!MOE && p.n_seg > 1) {
    int sg = 0;
    while (sg + 1 < p.n_seg && block >= p.seg_first_block[sg + 1]) ++sg;
    block -= p.seg_first_block[sg];
    n_out = p.seg_n_out[sg];
    w = p.seg_w[sg];
    y = p.seg_y[sg];
    y_stride = p.seg_y_stride[sg];
  }
  const int row0 = (block * kWarps + warp) * R;
  const int nb = p.n_in / U::QK;
  const int units_row = nb * U::UNITS;
  const int n_rows = min(R, n_out - row0);
  const int n16 = n_rows > 0 ? static_cast<int>(static_cast<size_t>(n_rows) * p.row_stride / 16) : 0;

  extern __shared__ __align__(16) uint8_t gemv_stage[];
  uint8_t* buf = gemv_stage + static_cast<size_t>(warp) * p.stage;
  const uint8_t* w2 = p.w2;
  const uint8_t* staged = nullptr;  // global rows currently in this warp's stage
  // Dense weights never change while a step runs: their copy starts before
  // the wait for the previous kernel, so it overlaps that kernel's tail.
  if (!MOE && p.stage && n_rows > 0) {
    staged = w + static_cast<size_t>(row0) * p.row_stride;
    stage_rows(buf, p.stage / 2, staged, GLU ? w2 + static_cast<size_t>(row0) * p.row_stride : nullptr, n16, lane);
  }
  pdl_begin();
  if (MOE && !p.direct && blockIdx.y >= static_cast<unsigned>(p.counters[0])) return;
  if (row0 >= n_out) return;

  const uint8_t* src = nullptr;     // where the unit loads read (global or stage)
  const uint8_t* src2 = nullptr;
  int cursor = 0;
  Cols c;
  while (next_cols<NC, MOE>(p, blockIdx.y, cursor, c, w, w2)) {
    const uint8_t* g = w + static_cast<size_t>(row0) * p.row_stride;
    const uint8_t* g2 = GLU ? w2 + static_cast<size_t>(row0) * p.row_stride : nullptr;
    if (p.stage) {
      // The warp's rows from its stage (copied here unless already there).
      if (staged != g) {
        stage_rows(buf, p.stage / 2, g, g2, n16, lane);
        staged = g;
      }
      asm volatile("cp.async.wait_group 0;\n" ::);
      __syncwarp();
      src = buf;
      src2 = GLU ? buf + p.stage / 2 : nullptr;
    } else {
      src = g;
      src2 = g2;
    }
    float acc[R][NC], acc2[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NC; ++j) { acc[r][j] = 0.0f; acc2[r][j] = 0.0f; }

    const int8_t* aq[NC];
    const half2* ads[NC];
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      aq[j] = p.aq + static_cast<int64_t>(c.act_row[j]) * p.aq_stride;
      ads[j] = p.ads + static_cast<int64_t>(c.act_row[j]) * p.ads_stride;
    }

    // Lane i walks units i, i+32, ... of the warp's rows (flattened), with the
    // next unit's weight bytes loaded before the current one is used
    // (register double buffering keeps two loads per lane in flight).
    {
    int r = 0, idx = lane;
    while (idx >= units_row && r < n_rows) { idx -= units_row; ++r; }
    auto wptr = [&](const uint8_t* base, int rr, int ii) {
      return base + static_cast<size_t>(rr) * p.row_stride + static_cast<size_t>(ii / U::UNITS) * U::BYTES;
    };
    typename U::W wv{}, wv2{};
    if (r < n_rows) {
      wv = U::load(wptr(src, r, idx), idx % U::UNITS);
      if (GLU) wv2 = U::load(wptr(src2, r, idx), idx % U::UNITS);
    }
    while (r < n_rows) {
      int r2 = r, idx2 = idx + 32;
      while (idx2 >= units_row && r2 < n_rows) { idx2 -= units_row; ++r2; }
      typename U::W nv{}, nv2{};
      if (r2 < n_rows) {
        nv = U::load(wptr(src, r2, idx2), idx2 % U::UNITS);
        if (GLU) nv2 = U::load(wptr(src2, r2, idx2), idx2 % U::UNITS);
      }
      const int b = idx / U::UNITS, u = idx % U::UNITS;
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        if (j < c.n) {
          const int8_t* a = aq[j] + b * U::QK;
          const half2* d = ads[j] + b * (U::QK / 32);
          const float v = U::dot(wv, a, d, u);
          float v2 = 0.0f;
          if (GLU) v2 = U::dot(wv2, a, d, u);
#pragma unroll
          for (int rr = 0; rr < R; ++rr)
            if (rr == r) { acc[rr][j] += v; if (GLU) acc2[rr][j] += v2; }
        }
      }
      wv = nv;
      if (GLU) wv2 = nv2;
      r = r2;
      idx = idx2;
    }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        const float s = warp_sum(acc[r][j]);
        float s2 = 0.0f;
        if (GLU) s2 = warp_sum(acc2[r][j]);
        if (lane == 0 && j < c.n && r < n_rows) {
          float* out = y + static_cast<int64_t>(c.out_row[j]) * y_stride + row0 + r;
          if (GLU) *out = silu(s) * s2;
          else *out = (p.accumulate ? *out : 0.0f) + s;
        }
      }
    }
  }
}

// Float weights: each lane takes 16 bytes of a row per step.
template <uint32_t T> struct FloatRow;
template <> struct FloatRow<kF32> {
  static constexpr int V = 4;
  __device__ static __forceinline__ void load(const uint8_t* p, float* w) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  }
  __device__ static __forceinline__ float one(const uint8_t* p) { return __ldg(reinterpret_cast<const float*>(p)); }
};
template <> struct FloatRow<kF16> {
  static constexpr int V = 8;
  __device__ static __forceinline__ void load(const uint8_t* p, float* w) {
    const uint4 v = ld_u128(p);
    const uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { w[2 * i] = h2f(a[i] & 0xFFFF); w[2 * i + 1] = h2f(a[i] >> 16); }
  }
  __device__ static __forceinline__ float one(const uint8_t* p) { return h2f(ld_u16(p)); }
};
template <> struct FloatRow<kBF16> {
  static constexpr int V = 8;
  __device__ static __forceinline__ void load(const uint8_t* p, float* w) {
    const uint4 v = ld_u128(p);
    const uint32_t a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { w[2 * i] = bf2f(a[i] & 0xFFFF); w[2 * i + 1] = bf2f(a[i] >> 16); }
  }
  __device__ static __forceinline__ float one(const uint8_t* p) { return bf2f(ld_u16(p)); }
};

// One lane's share of the dot of a float-typed row (wr, n elements) with the
// float vector a: 16-byte chunks lane, lane + 32, ..., then the tail elements.
// The caller sums the lanes (warp_sum).
template <uint32_t T>
__device__ __forceinline__ float float_row_lane_dot(const uint8_t* wr, const float* a, int n, int lane) {
  using F = FloatRow<T>;
  constexpr int EB = (T == kF32) ? 4 : 2;
  const int n_vec = n / F::V;
  float v = 0.0f;
  for (int i = lane; i < n_vec; i += 32) {
    float wv[F::V];
    F::load(wr + static_cast<size_t>(i) * 16, wv);
#pragma unroll
    for (int q = 0; q < F::V; ++q) v += wv[q] * a[i * F::V + q];
  }
  for (int q = n_vec * F::V + lane; q < n; q += 32) v += F::one(wr + static_cast<size_t>(q) * EB) * a[q];
  return v;
}

template <uint32_t T, int NC, bool MOE, bool GLU>
__global__ void __launch_bounds__(kWarps * 32) gemv_f_kernel(const GemvParams p) {
  using F = FloatRow<T>;
  constexpr int EB = (T == kF32) ? 4 : 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + warp;
  // Dense weights never change while a step runs: into L2 before the wait.
  if (!MOE && row < p.n_out)
    prefetch_l2_range(p.w + static_cast<size_t>(row) * p.row_stride, static_cast<size_t>(p.n_in) * EB, lane);
  pdl_begin();
  if (MOE && !p.direct && blockIdx.y >= static_cast<unsigned>(p.counters[0])) return;
  if (row >= p.n_out) return;
  const int n_vec = p.n_in / F::V;
  const uint8_t* w = p.w;
  const uint8_t* w2 = p.w2;
  int cursor = 0;
  Cols c;
  while (next_cols<NC, MOE>(p, blockIdx.y, cursor, c, w, w2)) {
    const uint8_t* wr = w + static_cast<size_t>(row) * p.row_stride;
    const uint8_t* wr2 = GLU ? w2 + static_cast<size_t>(row) * p.row_stride : nullptr;
    float acc[NC], acc2[NC];
#pragma unroll
    for (int j = 0; j < NC; ++j) { acc[j] = 0.0f; acc2[j] = 0.0f; }
#pragma unroll 2
    for (int i = lane; i < n_vec; i += 32) {
      float wv[F::V], wv2[F::V];
      F::load(wr + static_cast<size_t>(i) * 16, wv);
      if (GLU) F::load(wr2 + static_cast<size_t>(i) * 16, wv2);
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        if (j < c.n) {
          const float* a = p.af + static_cast<int64_t>(c.act_row[j]) * p.af_stride + i * F::V;
#pragma unroll
          for (int v4 = 0; v4 < F::V; v4 += 4) {
            const float4 av = *reinterpret_cast<const float4*>(a + v4);
            acc[j] += wv[v4] * av.x + wv[v4 + 1] * av.y + wv[v4 + 2] * av.z + wv[v4 + 3] * av.w;
            if (GLU) acc2[j] += wv2[v4] * av.x + wv2[v4 + 1] * av.y + wv2[v4 + 2] * av.z + wv2[v4 + 3] * av.w;
          }
        }
      }
    }
    // Tail elements (n_in not a multiple of the vector width).
    for (int e = n_vec * F::V + lane; e < p.n_in; e += 32) {
      const float wv = F::one(wr + static_cast<size_t>(e) * EB);
      const float wv2 = GLU ? F::one(wr2 + static_cast<size_t>(e) * EB) : 0.0f;
#pragma unroll
      for (int j = 0; j < NC; ++j) {
        if (j < c.n) {
          const float av = p.af[static_cast<int64_t>(c.act_row[j]) * p.af_stride + e];
          acc[j] += wv * av;
          if (GLU) acc2[j] += wv2 * av;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      const float s = warp_sum(acc[j]);
      float s2 = 0.0f;
      if (GLU) s2 = warp_sum(acc2[j]);
      if (lane == 0 && j < c.n) {
        float* out = p.y + static_cast<int64_t>(c.out_row[j]) * p.y_stride + row;
        if (GLU) *out = silu(s) * s2;
        else *out = (p.accumulate ? *out : 0.0f) + s;
      }
    }
  }
}

// One token's chosen experts and their weighted sum in one pass (decode's MoE
// down projection): a warp owns output row r and walks every choice j < k,
// x[r] += sum_j combine_w[j] * (W_{direct[j]} row r · act row j); choices
// with direct[j] < 0 are computed elsewhere. The weight loads of up to
// kCombineBatch choices are issued before their dots. Deterministic: the
// same order every time (no atomics).
constexpr int kCombineBatch = 8;

template <uint32_t T>
__global__ void __launch_bounds__(kWarps * 32) gemv_q_combine_kernel(const GemvParams p) {
  using U = QUnit<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + warp;
  const int units_row = (p.n_in / U::QK) * U::UNITS;
  // The routing was written at least two launches back (the up projections
  // ran in between), so it is final before this grid can start: the chosen
  // rows go into L2 while the previous kernel finishes. Only a hint: stale
  // ids (another caller's order) would cost bandwidth, never a wrong result.
  if (row < p.n_out) {  // row is the same for the whole warp
    const size_t row_bytes = static_cast<size_t>(p.n_in / U::QK) * U::BYTES;
    for (int j0 = 0; j0 < p.k; j0 += 32) {
      // One read of the ids (a lane each), then each choice's row line by line.
      const int mine = j0 + lane < p.k ? __ldcg(p.direct + j0 + lane) : -1;
      const int count = min(32, p.k - j0);
      for (int j = 0; j < count; ++j) {
        const int e = __shfl_sync(0xffffffffu, mine, j);
        if (e >= 0 && e < p.n_expert)
          prefetch_l2_range(p.w + static_cast<size_t>(e) * p.expert_stride + static_cast<size_t>(row) * p.row_stride,
                            row_bytes, lane);
      }
    }
  }
  pdl_begin();
  if (row >= p.n_out) return;
  float acc = 0.0f;
  for (int i0 = 0; i0 < units_row; i0 += 32) {
    const int idx = i0 + lane;
    const bool mine = idx < units_row;
    const int b = idx / U::UNITS, u = idx % U::UNITS;
    for (int j0 = 0; j0 < p.k; j0 += kCombineBatch) {
      typename U::W wv[kCombineBatch];
      int e[kCombineBatch];
#pragma unroll
      for (int jj = 0; jj < kCombineBatch; ++jj) {
        e[jj] = j0 + jj < p.k ? p.direct[j0 + jj] : -1;
        if (e[jj] >= 0 && mine)
          wv[jj] = U::load(p.w + static_cast<size_t>(e[jj]) * p.expert_stride + static_cast<size_t>(row) * p.row_stride +
                               static_cast<size_t>(b) * U::BYTES,
                           u);
      }
#pragma unroll
      for (int jj = 0; jj < kCombineBatch; ++jj) {
        if (e[jj] < 0 || !mine) continue;
        const int j = j0 + jj;
        const int8_t* a = p.aq + static_cast<int64_t>(j) * p.aq_stride + b * U::QK;
        const half2* d = p.ads + static_cast<int64_t>(j) * p.ads_stride + b * (U::QK / 32);
        acc += p.combine_w[j] * U::dot(wv[jj], a, d, u);
      }
    }
  }
  const float s = warp_sum(acc);
  if (lane == 0) p.y[row] += s;
}

template <uint32_t T>
__global__ void __launch_bounds__(kWarps * 32) gemv_f_combine_kernel(const GemvParams p) {
  pdl_begin();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + warp;
  if (row >= p.n_out) return;
  float acc = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    const int e = p.direct[j];
    if (e < 0) continue;
    const uint8_t* wr = p.w + static_cast<size_t>(e) * p.expert_stride + static_cast<size_t>(row) * p.row_stride;
    acc += p.combine_w[j] * float_row_lane_dot<T>(wr, p.af + static_cast<int64_t>(j) * p.af_stride, p.n_in, lane);
  }
  const float s = warp_sum(acc);
  if (lane == 0) p.y[row] += s;
}

template <uint32_t T>
cudaError_t launch_combine(const GemvParams& p, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(ceil_div(p.n_out, kWarps));
  if constexpr (T == kF32 || T == kF16 || T == kBF16) launch_pdl(gemv_f_combine_kernel<T>, dim3(grid), dim3(kWarps * 32), 0, s, p);
  else launch_pdl(gemv_q_combine_kernel<T>, dim3(grid), dim3(kWarps * 32), 0, s, p);
  return launch_status();
}

constexpr int kStageMaxBytes = 12288;  // per warp (48 KB per block, the default limit)

template <uint32_t T, int NC, int R, bool MOE, bool GLU>
void launch_q_r(GemvParams p, unsigned grid_y, cudaStream_t s) {
  const size_t per_warp = static_cast<size_t>(R) * p.row_stride * (GLU ? 2 : 1);
  p.stage = per_warp <= kStageMaxBytes ? static_cast<int>(per_warp) : 0;
  int blocks = ceil_div(p.n_out, kWarps * R);
  if (p.n_seg > 1) {
    blocks = 0;
    for (int i = 0; i < p.n_seg; ++i) {
      p.seg_first_block[i] = blocks;
      blocks += ceil_div(p.seg_n_out[i], kWarps * R);
    }
    p.seg_first_block[p.n_seg] = blocks;
  }
  dim3 grid(blocks, grid_y);
  launch_pdl(gemv_q_kernel<T, NC, R, MOE, GLU>, dim3(grid), dim3(kWarps * 32), static_cast<size_t>(p.stage) * kWarps, s, p);
}

template <uint32_t T, int NC, bool MOE, bool GLU>
cudaError_t launch_q(const GemvParams& p, unsigned grid_y, cudaStream_t s) {
  using U = QUnit<T>;
  const int units_row = (p.n_in / U::QK) * U::UNITS;
  // Several rows per warp for tall matrices (enough warps remain) and for
  // short rows (fewer than 32 units would leave lanes idle); one row per warp
  // for several matrices in one launch (segments in whole blocks).
  if (p.n_seg > 1) launch_q_r<T, NC, 1, MOE, GLU>(p, grid_y, s);
  else if (NC == 1 && (p.n_out >= 32768 || units_row < 16)) launch_q_r<T, NC, 4, MOE, GLU>(p, grid_y, s);
  else if (NC == 1 && (p.n_out >= 8192 || units_row < 32)) launch_q_r<T, NC, 2, MOE, GLU>(p, grid_y, s);
  else launch_q_r<T, NC, 1, MOE, GLU>(p, grid_y, s);
  return launch_status();
}

template <uint32_t T, int NC, bool MOE, bool GLU>
cudaError_t launch_f(const GemvParams& p, unsigned grid_y, cudaStream_t s) {
  dim3 grid(ceil_div(p.n_out, kWarps), grid_y);
  launch_pdl(gemv_f_kernel<T, NC, MOE, GLU>, dim3(grid), dim3(kWarps * 32), 0, s, p);
  return launch_status();
}

template <uint32_t T, bool MOE, bool GLU>
cudaError_t launch_type(const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  if constexpr (T == kF32 || T == kF16 || T == kBF16) {
    if (max_cols <= 1) return launch_f<T, 1, MOE, GLU>(p, grid_y, s);
    if (max_cols <= 2) return launch_f<T, 2, MOE, GLU>(p, grid_y, s);
    if (max_cols <= 4) return launch_f<T, 4, MOE, GLU>(p, grid_y, s);
    return launch_f<T, 8, MOE, GLU>(p, grid_y, s);
  } else {
    if (max_cols <= 1) return launch_q<T, 1, MOE, GLU>(p, grid_y, s);
    if (max_cols <= 2) return launch_q<T, 2, MOE, GLU>(p, grid_y, s);
    if (max_cols <= 4) return launch_q<T, 4, MOE, GLU>(p, grid_y, s);
    return launch_q<T, 8, MOE, GLU>(p, grid_y, s);
  }
}

// One translation unit per group of weight types (compile time). combine:
// gemv_*_combine_kernel (the other flags unused).
cudaError_t launch_kquant(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_legacy(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_float(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_small_blocks(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_lowbit(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_iq2(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);
cudaError_t launch_iq13(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s);

template <uint32_t T>
cudaError_t launch_variant(bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  if (combine) return launch_combine<T>(p, s);
  if (moe) return glu ? launch_type<T, true, true>(p, max_cols, grid_y, s) : launch_type<T, true, false>(p, max_cols, grid_y, s);
  return glu ? launch_type<T, false, true>(p, max_cols, grid_y, s) : launch_type<T, false, false>(p, max_cols, grid_y, s);
}

}  // namespace guild::cuda::gemv_detail
