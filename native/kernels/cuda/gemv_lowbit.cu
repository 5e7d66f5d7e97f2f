// Matrix-vector kernel instances for Q2_K, Q3_K, IQ4_XS, TQ1_0, TQ2_0
// (256-element blocks without grids; see gemv_impl.cuh).
#include "gemv_impl.cuh"
#include "quant_kquant_low.cuh"
#include "quant_nonlinear4.cuh"
#include "quant_ternary.cuh"

namespace guild::cuda::gemv_detail {

cudaError_t launch_lowbit(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kQ2_K: return launch_variant<kQ2_K>(moe, glu, combine, p, max_cols, grid_y, s);
    case kQ3_K: return launch_variant<kQ3_K>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ4_XS: return launch_variant<kIQ4_XS>(moe, glu, combine, p, max_cols, grid_y, s);
    case kTQ1_0: return launch_variant<kTQ1_0>(moe, glu, combine, p, max_cols, grid_y, s);
    case kTQ2_0: return launch_variant<kTQ2_0>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
