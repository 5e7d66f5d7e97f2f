// Matrix-vector kernel instances for IQ1_S, IQ1_M, IQ3_XXS, IQ3_S (see
// gemv_impl.cuh), with this unit's copy of the grids (quant_iq_grid.cuh).
#include "gemv_impl.cuh"
#include "quant_iq_grid.cuh"
#include "quant_tables.h"

namespace guild::cuda {
GUILD_IQ_GRID_UPLOADER(iq_grids_upload_gemv_iq13)
}  // namespace guild::cuda

namespace guild::cuda::gemv_detail {

cudaError_t launch_iq13(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kIQ1_S: return launch_variant<kIQ1_S>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ1_M: return launch_variant<kIQ1_M>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ3_XXS: return launch_variant<kIQ3_XXS>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ3_S: return launch_variant<kIQ3_S>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
