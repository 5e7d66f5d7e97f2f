// backend_v1(): the cuda kernel package's table (gpu::BackendV1, what the
// runtime sees of this library) over the device queries and CudaDecoder, with
// the page-locked host allocator for expert stacks the GPU may read in place.
// The package's entry point (packages/providers/cuda_entry.cpp) returns it.
#include <string>

#include <cuda_runtime_api.h>

#include "cuda/cuda_decoder.h"
#include "cuda/cuda_error.h"

namespace guild::cuda {

const gpu::BackendV1* backend_v1() {
  static const gpu::BackendV1 table = [] {
    gpu::BackendV1 t;
    t.available = &cuda_available;
    t.device_info = &device_info;
    t.topology = &device_topology;
    t.device_memory = &device_memory;
    t.estimate = &CudaDecoder::estimate;
    t.create = [](const ModelHparams& hp, const ModelWeights& w, const gpu::DecoderOptions& o,
                  std::string* error) -> gpu::Decoder* { return CudaDecoder::create(hp, w, o, error).release(); };
    t.expert_cache_bytes = &CudaDecoder::expert_cache_bytes;
    t.host_alloc = [](size_t bytes, std::string* why) -> void* {
      void* p = nullptr;
      // Mapped: kernels may read it in place (decode's GPU share of the CPU's experts).
      const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
      if (e == cudaSuccess) return p;
      if (why) *why = cuda_msg("cudaHostAlloc", e);
      cudaGetLastError();
      return nullptr;
    };
    t.host_free = [](void* p) {
      if (p) cudaFreeHost(p);
    };
    return t;
  }();
  return &table;
}

}  // namespace guild::cuda
