// The F16 upload fallback (docs/CUDA.md, "Weight types"): a weight tensor
// whose type has no CUDA kernel is dequantized on the host at upload, by the
// cpu-generic kernel table's dequant_row (the CPU's reference values), rounded
// to fp16 and run as an F16 matrix: correct, slower and larger than a kernel
// for its own type, but a model the CPU runs never fails to load for a type.
// Internal to guild_cuda.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace guild::cuda {

// True when the CPU has a dequantizer for the type (the fallback can upload it).
bool f16_fallback_available(uint32_t type);

// rows rows of n_in elements of `type` (row_bytes bytes apart at src) as fp16
// rows dst_stride bytes apart (>= 2 * n_in; the padding is zeroed). scratch:
// n_in floats. False for a type without a CPU dequantizer.
bool dequant_rows_f16(uint32_t type, const uint8_t* src, size_t row_bytes, int64_t n_in, int64_t rows, uint8_t* dst,
                      size_t dst_stride, float* scratch);

// The same into device memory (dst_dev, rows dst_stride bytes apart), through
// a host buffer of at most max_buffer_bytes (at least one row): synchronous
// copies, chunk by chunk. cudaErrorNotSupported for a type without a CPU dequantizer.
cudaError_t upload_rows_f16(uint32_t type, const uint8_t* src, size_t row_bytes, int64_t n_in, int64_t rows,
                            uint8_t* dst_dev, size_t dst_stride, size_t max_buffer_bytes = size_t{32} << 20);

}  // namespace guild::cuda
