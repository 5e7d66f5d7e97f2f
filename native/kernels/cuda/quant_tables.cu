// quant_tables.h: the per-device bookkeeping of the IQ grid uploads.
#include "quant_tables.h"

#include <atomic>

#include "core/tensor_type.h"

namespace guild::cuda {
namespace {

// One bit per device id (a process with more devices than this gets an error
// from quant_tables_init for the others, and their grid types never launch).
constexpr int kMaxDevices = 256;
std::atomic<uint64_t> g_ready[kMaxDevices / 64];

bool current_device(int* dev) { return cudaGetDevice(dev) == cudaSuccess && *dev >= 0 && *dev < kMaxDevices; }

}  // namespace

bool needs_iq_grids(uint32_t type) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::IQ1_S: case TensorType::IQ1_M: case TensorType::IQ2_XXS: case TensorType::IQ2_XS:
    case TensorType::IQ2_S: case TensorType::IQ3_XXS: case TensorType::IQ3_S:
      return true;
    default:
      return false;
  }
}

bool quant_tables_ready() {
  int dev = 0;
  if (!current_device(&dev)) return false;
  return (g_ready[dev / 64].load(std::memory_order_acquire) >> (dev % 64)) & 1u;
}

cudaError_t quant_tables_init() {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  if (quant_tables_ready()) return cudaSuccess;
  // Two threads initialising the same device both copy the same bytes: harmless.
  for (cudaError_t (*upload)() : {iq_grids_upload_gemv_iq2, iq_grids_upload_gemv_iq13, iq_grids_upload_gemm,
                                   iq_grids_upload_ops})
    if ((e = upload()) != cudaSuccess) return e;
  // A copy from pageable memory may still be in flight when it returns: done
  // before any stream of this device may read the grids.
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;
  g_ready[dev / 64].fetch_or(uint64_t{1} << (dev % 64), std::memory_order_release);
  return cudaSuccess;
}

}  // namespace guild::cuda
