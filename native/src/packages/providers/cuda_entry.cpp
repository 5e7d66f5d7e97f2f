// The cuda kernel package's entry points (docs/PACKAGES.md, "GPU packages"):
// the provider ABI's two symbols (no CPU table: cpu_table_size 0) plus
// guild_gpu_backend_v1, the table of gpu/gpu_backend.h over CudaDecoder.
// Built only into the cuda package library (native/src/packages/CMakeLists.txt).
#include "cuda/cuda_decoder.h"
#include "core/tensor_type.h"
#include "packages/provider_abi.h"
#include "packages/providers/provider_identity.h"


namespace {

// Usable only with a device of compute capability >= 8.0 (queried once).
guild_kernel_provider_info make_info() {
  guild_kernel_provider_info info = guild::packages::provider_identity();
  std::string why;
  info.score = guild::cuda::cuda_available(&why) ? 100 : 0;
  info.cpu_table_size = 0;
  info.tensor_type_limit = guild::kTensorTypeIdLimit;
  return info;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const guild_kernel_provider_info* guild_kernel_provider_query(void) {
  static const guild_kernel_provider_info info = make_info();
  return &info;
}

__attribute__((visibility("default"))) const guild_cpu_kernel_table* guild_kernel_provider_cpu_table(void) {
  return nullptr;
}

__attribute__((visibility("default"))) const guild::gpu::BackendV1* guild_gpu_backend_v1(void) {
  return guild::cuda::backend_v1();
}

}  // extern "C"
