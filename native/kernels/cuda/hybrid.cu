// Hybrid MoE hand-off between the GPU and the CPU expert server
// (docs/CUDA.md, "Hybrid MoE"): the routed choices whose expert is not cached
// on the GPU are exported to host-mapped memory and posted in a mailbox; the
// CPU server (spinning on its own core) computes them while the GPU computes
// its cached experts; a one-thread kernel waits for the answer and the output
// is added to the residual. Everything is a kernel (no host nodes), so the
// decode graph is captured whole and a layer whose choices are all cached
// costs two tiny launches.
#include "common.cuh"

namespace guild::cuda {
namespace {

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__global__ void hybrid_export_kernel(const float* __restrict__ xn, int64_t count, const int32_t* __restrict__ ids,
                                     const float* __restrict__ w, int n_slots, const int32_t* __restrict__ slot_of,
                                     float* h_xn, int32_t* h_ids, float* h_w, int32_t* pending, int32_t* host_ids,
                                     int host_max) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // One token with host_ids (n_slots <= 32: the lanes of block 0's warp 0 are
  // its choices): the first host_max choices the CPU would compute, in choice
  // order, go to the GPU, which reads those experts from host memory; the CPU
  // sees them as -1. The whole warp votes (outside any branch).
  unsigned cpu_mask = 0;
  if (host_ids && blockIdx.x == 0 && threadIdx.x < 32)
    cpu_mask = __ballot_sync(0xffffffffu, i < n_slots && slot_of[ids[i]] < 0);
  if (i < n_slots) {
    const int32_t e = ids[i];
    bool cpu = slot_of[e] < 0;
    if (host_ids) {
      const unsigned lane = threadIdx.x & 31;
      const bool to_gpu = cpu && __popc(cpu_mask & ((1u << lane) - 1u)) < host_max;
      host_ids[i] = to_gpu ? e : -1;
      cpu = cpu && !to_gpu;
      h_ids[i] = to_gpu ? -1 : e;
    } else {
      h_ids[i] = e;
    }
    h_w[i] = w[i];
    if (cpu) atomicAdd(pending, 1);
  }
  for (int64_t j = i; j < count; j += static_cast<int64_t>(gridDim.x) * blockDim.x) h_xn[j] = xn[j];
  __threadfence_system();
}

__global__ void hybrid_post_kernel(HybridMailbox* mb, int layer, int n, const int32_t* pending, uint32_t* seq) {
  pdl_begin();
  if (*pending == 0) return;
  const uint32_t s = *seq + 1;
  *seq = s;
  mb->layer = layer;
  mb->n = n;
  __threadfence_system();
  store_release_sys(&mb->req_seq, s);
}

__global__ void hybrid_wait_kernel(const HybridMailbox* mb, const int32_t* pending, const uint32_t* seq,
                                   int32_t* error_flag, uint64_t timeout_ns) {
  pdl_begin();
  if (*pending == 0 || *error_flag) return;
  const uint32_t want = *seq;
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    if (load_acquire_sys(&mb->done_seq) == want) return;
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) {
      *error_flag = 1;
      return;
    }
    __nanosleep(200);
  }
}

__global__ void hybrid_add_kernel(float* __restrict__ x, const float* h_out, int64_t count, const int32_t* pending,
                                  const int32_t* error_flag) {
  pdl_begin();
  if (*pending == 0 || *error_flag) return;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += __ldcv(h_out + i);  // past the caches: the CPU wrote it after the last kernel read this line
}

}  // namespace

cudaError_t hybrid_export(const float* xn, int n, int d, const int32_t* ids, const float* weights, int k,
                          const int32_t* slot_of, float* h_xn, int32_t* h_ids, float* h_w, int32_t* pending,
                          int32_t* host_ids, int host_max, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!xn || !ids || !weights || !slot_of || !h_xn || !h_ids || !h_w || !pending, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(n < 1 || d < 1 || k < 1, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(host_ids && (n * k > 32 || host_max < 0), cudaErrorInvalidValue);
  cudaError_t e = cudaMemsetAsync(pending, 0, sizeof(int32_t), s);
  if (e != cudaSuccess) return e;
  const int64_t count = static_cast<int64_t>(n) * d;
  const int n_slots = n * k;
  const unsigned blocks = std::max(ceil_div(n_slots, 256), std::min<unsigned>(ceil_div(count, 256), 264));
  launch_pdl(hybrid_export_kernel, dim3(blocks), dim3(256), 0, s, xn, count, ids, weights, n_slots, slot_of, h_xn, h_ids, h_w, pending, host_ids, host_max);
  return launch_status();
}

cudaError_t hybrid_post(HybridMailbox* mb, int layer, int n, const int32_t* pending, uint32_t* seq, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!mb || !pending || !seq, cudaErrorInvalidValue);
  launch_pdl(hybrid_post_kernel, dim3(1), dim3(1), 0, s, mb, layer, n, pending, seq);
  return launch_status();
}

cudaError_t hybrid_wait(const HybridMailbox* mb, const int32_t* pending, const uint32_t* seq, int32_t* error_flag,
                        uint64_t timeout_ns, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!mb || !pending || !seq || !error_flag, cudaErrorInvalidValue);
  launch_pdl(hybrid_wait_kernel, dim3(1), dim3(1), 0, s, mb, pending, seq, error_flag, timeout_ns);
  return launch_status();
}

cudaError_t hybrid_add(float* x, const float* h_out, int64_t count, const int32_t* pending, const int32_t* error_flag,
                       cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !h_out || !pending || !error_flag || count < 0, cudaErrorInvalidValue);
  if (count == 0) return cudaSuccess;
  launch_pdl(hybrid_add_kernel, dim3(std::min<unsigned>(ceil_div(count, 256), 1024)), dim3(256), 0, s, x, h_out, count, pending, error_flag);
  return launch_status();
}

}  // namespace guild::cuda
