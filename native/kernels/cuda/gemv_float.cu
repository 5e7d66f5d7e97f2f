// Matrix-vector kernel instances for F32, F16, BF16 (see gemv_impl.cuh).
#include "gemv_impl.cuh"

namespace guild::cuda::gemv_detail {

cudaError_t launch_float(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kF32: return launch_variant<kF32>(moe, glu, combine, p, max_cols, grid_y, s);
    case kF16: return launch_variant<kF16>(moe, glu, combine, p, max_cols, grid_y, s);
    case kBF16: return launch_variant<kBF16>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
