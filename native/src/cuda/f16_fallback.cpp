// f16_fallback.h: host dequantization to fp16 at upload.
#include "cuda/f16_fallback.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/tensor_type.h"

namespace guild::cuda {

namespace {

DequantRowFn dequantizer(uint32_t type) {
  if (type >= kTensorTypeIdLimit) return nullptr;
  return cpu_kernels_generic().types[type].dequant_row;
}

}  // namespace

bool f16_fallback_available(uint32_t type) { return dequantizer(type) != nullptr; }

bool dequant_rows_f16(uint32_t type, const uint8_t* src, size_t row_bytes, int64_t n_in, int64_t rows, uint8_t* dst,
                      size_t dst_stride, float* scratch) {
  const DequantRowFn dq = dequantizer(type);
  if (!dq || dst_stride < static_cast<size_t>(n_in) * 2) return false;
  for (int64_t r = 0; r < rows; ++r) {
    dq(src + static_cast<size_t>(r) * row_bytes, scratch, n_in);
    uint8_t* out = dst + static_cast<size_t>(r) * dst_stride;
    for (int64_t i = 0; i < n_in; ++i) {
      const uint16_t h = f32_to_fp16(scratch[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    std::memset(out + 2 * n_in, 0, dst_stride - static_cast<size_t>(n_in) * 2);
  }
  return true;
}

cudaError_t upload_rows_f16(uint32_t type, const uint8_t* src, size_t row_bytes, int64_t n_in, int64_t rows,
                            uint8_t* dst_dev, size_t dst_stride, size_t max_buffer_bytes) {
  if (!f16_fallback_available(type) || n_in <= 0 || rows < 0 || dst_stride < static_cast<size_t>(n_in) * 2)
    return cudaErrorNotSupported;
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(max_buffer_bytes / dst_stride));
  std::vector<uint8_t> host(static_cast<size_t>(std::min(chunk, std::max<int64_t>(rows, 1))) * dst_stride);
  std::vector<float> scratch(static_cast<size_t>(n_in));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    dequant_rows_f16(type, src + static_cast<size_t>(r0) * row_bytes, row_bytes, n_in, n, host.data(), dst_stride,
                     scratch.data());
    // From pageable memory: returns once the buffer is staged, so it can be refilled.
    const cudaError_t e = cudaMemcpy(dst_dev + static_cast<size_t>(r0) * dst_stride, host.data(),
                                     static_cast<size_t>(n) * dst_stride, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace guild::cuda
