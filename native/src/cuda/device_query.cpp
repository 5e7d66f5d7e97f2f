// Device queries: whether a usable CUDA device exists, what each device is
// (name, compute capability, SMs, memory), which pairs reach each other
// peer-to-peer, and free memory. They need no decoder: the runtime asks them
// (through the backend table) before it plans a load.
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda/cuda_decoder.h"
#include "cuda/cuda_error.h"

namespace guild::cuda {

bool cuda_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("no usable CUDA driver/device", e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  for (int d = 0; d < n; ++d) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) == cudaSuccess && major >= 8) return true;
  }
  if (why) *why = "no CUDA device with compute capability >= 8.0";
  return false;
}

bool device_info(int device, DeviceInfo* out, std::string* why) {
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaGetDeviceProperties", e);
    return false;
  }
  out->name = prop.name;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
  out->sm_count = prop.multiProcessorCount;
  out->total_bytes = prop.totalGlobalMem;
  return device_memory(device, &out->free_bytes, &out->total_bytes, why);
}

bool device_topology(DeviceTopology* out, std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaGetDeviceCount", e);
    cudaGetLastError();
    return false;
  }
  out->devices.assign(n, DeviceInfo{});
  out->peer.assign(n, std::vector<bool>(n, false));
  for (int i = 0; i < n; ++i)
    if (!device_info(i, &out->devices[i], why)) return false;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int can = 0;
      if (i != j && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess) out->peer[i][j] = can != 0;
      cudaGetLastError();
    }
  return true;
}

bool device_memory(int device, size_t* free_bytes, size_t* total_bytes, std::string* why) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, total_bytes);
  cudaSetDevice(prev);
  if (e != cudaSuccess) {
    if (why) *why = cuda_msg("cudaMemGetInfo", e);
    return false;
  }
  return true;
}

}  // namespace guild::cuda
