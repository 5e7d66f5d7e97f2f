// Matrix-vector kernel instances for Q4_0, Q5_0, Q8_0 (see gemv_impl.cuh).
#include "gemv_impl.cuh"

namespace guild::cuda::gemv_detail {

cudaError_t launch_legacy(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kQ4_0: return launch_variant<kQ4_0>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ5_0: return launch_variant<kQ5_0>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ8_0: return launch_variant<kQ8_0>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
