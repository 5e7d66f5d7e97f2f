// Matrix-vector kernel instances for Q4_1, Q5_1, IQ4_NL, MXFP4 (32-element
// blocks; see gemv_impl.cuh).
#include "gemv_impl.cuh"
#include "quant_legacy_min.cuh"
#include "quant_nonlinear4.cuh"

namespace guild::cuda::gemv_detail {

cudaError_t launch_small_blocks(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kQ4_1: return launch_variant<kQ4_1>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ5_1: return launch_variant<kQ5_1>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ4_NL: return launch_variant<kIQ4_NL>(moe, glu, combine, p, max_cols, grid_y, s);
    case kMXFP4: return launch_variant<kMXFP4>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
