// Matrix-vector kernel instances for Q4_K, Q5_K, Q6_K (see gemv_impl.cuh).
#include "gemv_impl.cuh"

namespace guild::cuda::gemv_detail {

cudaError_t launch_kquant(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kQ4_K: return launch_variant<kQ4_K>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ5_K: return launch_variant<kQ5_K>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ6_K: return launch_variant<kQ6_K>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
