// Matrix-matrix products for prefill, y[token][row] = dot(W row, x token):
//  * quantized / F16 / BF16 weights: a block computes 128 weight rows x BN
//    tokens. Per K step of 64, each thread dequantizes 32-element runs of the
//    weight tile straight from the GGUF blocks into shared memory as fp16
//    (no full-precision copy of the weights exists anywhere), the fp16
//    activation tile arrives by cp.async, and warps multiply with
//    mma.sync.m16n8k16 (fp16 in, fp32 accumulate); two shared-memory stages.
//  * F32 weights (routers, float masters): an fp32 SIMT tile kernel, so
//    expert selection sees float-exact router logits.
// Grouped experts (MOE): blockIdx.y walks the device-side tile list
// (expert, 32-slot tile); the activation rows are gathered by slot.
#include "common.cuh"

namespace guild::cuda {
namespace {

constexpr int kBM = 128;   // weight rows per block
constexpr int kBK = 64;    // K per stage
constexpr int kLds = kBK + 8;  // smem row stride in halves (144 bytes: ldmatrix conflict-free)

struct GemmParams {
  const uint8_t* w;
  size_t row_stride, expert_stride;
  int n_in, n_out;
  const __half* x; int64_t x_stride;  // fp16 activations
  const float* xf; int64_t xf_stride; // fp32 activations (F32 path)
  int n_tokens;
  float* y; int64_t y_stride;
  bool accumulate;
  // grouped experts
  const int32_t* offsets; const int32_t* slots; const int32_t* counters; const int32_t* tiles;
  int act_div;
};

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

// Token rows of this block: dense rows n0.., or the slots of one expert tile.
struct TokenRows {
  int count;     // valid rows in this tile
  int base;      // dense: first token; MoE: index into slots
};

template <uint32_t T, int BN, bool MOE>
__global__ void __launch_bounds__(128 * (BN / 32)) gemm_mma_kernel(const GemmParams p) {
  pdl_begin();
  constexpr int NWARPS = 4 * (BN / 32);
  constexpr int NT = NWARPS * 32;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __half* As = reinterpret_cast<__half*>(smem_raw);     // [2][kBM][kLds]
  __half* Bs = As + 2 * kBM * kLds;                     // [2][BN][kLds]
  __shared__ int s_rows[BN];                            // activation row per tile column (-1: none)
  __shared__ int s_out[BN];                             // output row per tile column

  const int m0 = blockIdx.x * kBM;
  const uint8_t* w = p.w;
  int n_valid;
  if (MOE) {
    if (blockIdx.y >= static_cast<unsigned>(p.counters[1])) return;
    const int entry = p.tiles[blockIdx.y];
    const int e = entry >> 16, t = entry & 0xFFFF;
    const int begin = p.offsets[e] + t * BN;
    n_valid = min(BN, p.offsets[e + 1] - begin);
    w += static_cast<size_t>(e) * p.expert_stride;
    for (int i = threadIdx.x; i < BN; i += NT) {
      const int slot = i < n_valid ? p.slots[begin + i] : -1;
      s_rows[i] = slot >= 0 ? slot / p.act_div : -1;
      s_out[i] = slot;
    }
  } else {
    const int n0 = blockIdx.y * BN;
    n_valid = min(BN, p.n_tokens - n0);
    for (int i = threadIdx.x; i < BN; i += NT) {
      s_rows[i] = i < n_valid ? n0 + i : -1;
      s_out[i] = n0 + i;
    }
  }
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp & 3, wn = warp >> 2;  // warp tile: rows wm*32.., tokens wn*32..
  const int n_runs = p.n_in / 32;
  const int n_k = (p.n_in + kBK - 1) / kBK;

  auto load_stage = [&](int stage, int kt) {
    // Weights: kBM rows x 2 runs of 32, one run per (thread, iteration).
    __half* a = As + stage * kBM * kLds;
    for (int u = threadIdx.x; u < kBM * 2; u += NT) {
      const int r = u >> 1, j = u & 1;
      const int run = kt * 2 + j;
      uint4* dst = reinterpret_cast<uint4*>(a + r * kLds + 32 * j);
      const int row = min(m0 + r, p.n_out - 1);
      if constexpr (T == kQ4_K) {
        uint32_t h[16];
        if (run < n_runs) {
          q4k_run32_h2(w + static_cast<size_t>(row) * p.row_stride, run, h);
        } else {
#pragma unroll
          for (int i = 0; i < 16; ++i) h[i] = 0u;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) dst[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
      } else {
        float v[32];
        if (run < n_runs) {
          Deq<T>::run32(w + static_cast<size_t>(row) * p.row_stride, run, v);
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
    // Activations: BN rows x 64 halves = 8 chunks of 16 bytes per row.
    __half* b = Bs + stage * BN * kLds;
    for (int u = threadIdx.x; u < BN * 8; u += NT) {
      const int r = u >> 3, c = u & 7;
      const int col = kt * kBK + 8 * c;
      const int src_row = s_rows[r];
      const bool ok = src_row >= 0 && col < p.n_in;
      const __half* src = ok ? p.x + static_cast<int64_t>(src_row) * p.x_stride + col : p.x;
      cp_async16(b + r * kLds + 8 * c, src, ok);
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  load_stage(0, 0);
  cp_async_commit();
  for (int kt = 0; kt < n_k; ++kt) {
    if (kt + 1 < n_k) load_stage((kt + 1) & 1, kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const __half* a = As + (kt & 1) * kBM * kLds;
    const __half* b = Bs + (kt & 1) * BN * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrix_x4(af[mi], a + (wm * 32 + mi * 16 + (lane & 15)) * kLds + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t r[4];
        const int q = lane >> 3;
        ldmatrix_x4(r, b + (wn * 32 + np * 16 + (q >> 1) * 8 + (lane & 7)) * kLds + kk * 16 + (q & 1) * 8);
        bf[2 * np][0] = r[0]; bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2]; bf[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
    }
    __syncthreads();
  }

  // Epilogue: c0,c1 at (row lane/4, cols 2*(lane%4)+{0,1}); c2,c3 at row + 8.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = m0 + wm * 32 + mi * 16 + (lane >> 2) + (q >> 1) * 8;
        const int n = wn * 32 + ni * 8 + 2 * (lane & 3) + (q & 1);
        if (m < p.n_out && n < n_valid) {
          float* out = p.y + static_cast<int64_t>(s_out[n]) * p.y_stride + m;
          *out = (p.accumulate ? *out : 0.0f) + acc[mi][ni][q];
        }
      }
    }
  }
}

// F32 weights: 64 rows x 32 tokens per block, 128 threads of 4 x 4 outputs, K steps of 16.
template <bool MOE>
__global__ void __launch_bounds__(128) gemm_f32_kernel(const GemmParams p) {
  pdl_begin();
  constexpr int BM = 64, BN = 32, BK = 16;
  __shared__ float Ws[BK][BM + 4];
  __shared__ float Xs[BK][BN + 4];
  __shared__ int s_rows[BN], s_out[BN];
  const int m0 = blockIdx.x * BM;
  const uint8_t* w = p.w;
  int n_valid;
  if (MOE) {
    if (blockIdx.y >= static_cast<unsigned>(p.counters[1])) return;
    const int entry = p.tiles[blockIdx.y];
    const int e = entry >> 16, t = entry & 0xFFFF;
    const int begin = p.offsets[e] + t * BN;
    n_valid = min(BN, p.offsets[e + 1] - begin);
    w += static_cast<size_t>(e) * p.expert_stride;
    if (threadIdx.x < BN) {
      const int slot = threadIdx.x < n_valid ? p.slots[begin + threadIdx.x] : -1;
      s_rows[threadIdx.x] = slot >= 0 ? slot / p.act_div : -1;
      s_out[threadIdx.x] = slot;
    }
  } else {
    const int n0 = blockIdx.y * BN;
    n_valid = min(BN, p.n_tokens - n0);
    if (threadIdx.x < BN) {
      s_rows[threadIdx.x] = static_cast<int>(threadIdx.x) < n_valid ? n0 + static_cast<int>(threadIdx.x) : -1;
      s_out[threadIdx.x] = n0 + static_cast<int>(threadIdx.x);
    }
  }
  __syncthreads();
  const int tm = threadIdx.x & 15, tn = threadIdx.x >> 4;  // 16 x 8 threads, 4 x 4 each
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.n_in; k0 += BK) {
    for (int u = threadIdx.x; u < BM * BK; u += 128) {
      const int r = u / BK, k = u % BK;
      const int row = m0 + r;
      float v = 0.0f;
      if (row < p.n_out && k0 + k < p.n_in)
        v = reinterpret_cast<const float*>(w + static_cast<size_t>(row) * p.row_stride)[k0 + k];
      Ws[k][r] = v;
    }
    for (int u = threadIdx.x; u < BN * BK; u += 128) {
      const int r = u / BK, k = u % BK;
      const int src = s_rows[r];
      Xs[k][r] = (src >= 0 && k0 + k < p.n_in) ? p.xf[static_cast<int64_t>(src) * p.xf_stride + k0 + k] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) { a[i] = Ws[k][tm + 16 * i]; b[i] = Xs[k][tn + 8 * i]; }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + tm + 16 * i, n = tn + 8 * j;
      if (m < p.n_out && n < n_valid) {
        float* out = p.y + static_cast<int64_t>(s_out[n]) * p.y_stride + m;
        *out = (p.accumulate ? *out : 0.0f) + acc[i][j];
      }
    }
  }
}

template <int BN>
constexpr size_t mma_smem_bytes() { return static_cast<size_t>(2) * (kBM + BN) * kLds * sizeof(__half); }

template <uint32_t T, int BN, bool MOE>
cudaError_t set_mma_attr() {
  return cudaFuncSetAttribute(gemm_mma_kernel<T, BN, MOE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(mma_smem_bytes<BN>()));
}

template <uint32_t T, int BN, bool MOE>
cudaError_t launch_mma(const GemmParams& p, unsigned grid_y, cudaStream_t s) {
  static const cudaError_t attr = set_mma_attr<T, BN, MOE>();
  if (attr != cudaSuccess) return attr;
  dim3 grid(ceil_div(p.n_out, kBM), grid_y);
  launch_pdl(gemm_mma_kernel<T, BN, MOE>, dim3(grid), dim3(128 * (BN / 32)), mma_smem_bytes<BN>(), s, p);
  return launch_status();
}

bool gemm_matrix_ok(const DevMatrix& w) {
  if (!w.data || !matrix_type_supported(w.type) || w.n_in <= 0 || w.n_out <= 0) return false;
  if (w.row_stride % 16 != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.n_out > INT32_MAX || w.n_in > INT32_MAX) return false;
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

template <bool MOE>
cudaError_t launch_gemm(const DevMatrix& w, const GemmParams& p, unsigned grid_y_dense, unsigned grid_y_moe,
                        cudaStream_t s) {
  if (w.type == kF32) {
    dim3 grid(ceil_div(p.n_out, 64), MOE ? grid_y_moe : ceil_div(p.n_tokens, 32));
    launch_pdl(gemm_f32_kernel<MOE>, dim3(grid), dim3(128), 0, s, p);
    return launch_status();
  }
  cudaError_t err = cudaErrorNotSupported;
  dispatch_type(w.type, [&]<uint32_t T>() {
    if constexpr (T != kF32) {
      if (MOE) err = launch_mma<T, kMoeTileTokens, true>(p, grid_y_moe, s);
      else if (p.n_tokens <= 32) err = launch_mma<T, 32, false>(p, grid_y_dense, s);
      else err = launch_mma<T, 64, false>(p, ceil_div(p.n_tokens, 64), s);
    }
  });
  return err;
}

GemmParams gemm_base(const DevMatrix& w, float* y, int64_t y_stride) {
  GemmParams p{};
  p.w = static_cast<const uint8_t*>(w.data);
  p.row_stride = w.row_stride;
  p.expert_stride = w.expert_stride;
  p.n_in = static_cast<int>(w.n_in);
  p.n_out = static_cast<int>(w.n_out);
  p.y = y;
  p.y_stride = y_stride;
  p.act_div = 1;
  return p;
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

cudaError_t moe_gemm(const DevMatrix& w, const ActView& act, const MoeGroups& g, int act_div, float* y,
                     int64_t y_stride, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gemm_matrix_ok(w) || !y || act_div < 1, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!g.offsets || !g.slots || !g.counters || !g.tiles || g.max_tiles < 1 || g.max_tiles > 65535,
                       cudaErrorInvalidValue);
  GemmParams p = gemm_base(w, y, y_stride);
  GUILD_CUDA_RETURN_IF(!gemm_act(w, act, p), cudaErrorInvalidValue);
  p.offsets = g.offsets;
  p.slots = g.slots;
  p.counters = g.counters;
  p.tiles = g.tiles;
  p.act_div = act_div;
  return launch_gemm<true>(w, p, 0, static_cast<unsigned>(g.max_tiles), s);
}

cudaError_t gemm_kernels_init() {
  cudaError_t err = cudaSuccess;
  for (uint32_t t : {kF16, kBF16, kQ4_0, kQ5_0, kQ8_0, kQ4_K, kQ5_K, kQ6_K}) {
    dispatch_type(t, [&]<uint32_t T>() {
      if constexpr (T != kF32) {
        cudaError_t e1 = set_mma_attr<T, 32, true>();
        cudaError_t e2 = set_mma_attr<T, 32, false>();
        cudaError_t e3 = set_mma_attr<T, 64, false>();
        if (err == cudaSuccess) err = e1 != cudaSuccess ? e1 : (e2 != cudaSuccess ? e2 : e3);
      }
    });
  }
  return err;
}

}  // namespace guild::cuda
