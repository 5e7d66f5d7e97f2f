// Matrix-vector kernel instances for IQ2_XXS, IQ2_XS, IQ2_S (see
// gemv_impl.cuh), with this unit's copy of the grids (quant_iq_grid.cuh).
#include "gemv_impl.cuh"
#include "quant_iq_grid.cuh"
#include "quant_tables.h"

namespace guild::cuda {
GUILD_IQ_GRID_UPLOADER(iq_grids_upload_gemv_iq2)
}  // namespace guild::cuda

namespace guild::cuda::gemv_detail {

cudaError_t launch_iq2(uint32_t type, bool moe, bool glu, bool combine, const GemvParams& p, int max_cols, unsigned grid_y, cudaStream_t s) {
  switch (type) {
    case kIQ2_XXS: return launch_variant<kIQ2_XXS>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ2_XS: return launch_variant<kIQ2_XS>(moe, glu, combine, p, max_cols, grid_y, s);
    case kIQ2_S: return launch_variant<kIQ2_S>(moe, glu, combine, p, max_cols, grid_y, s);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace guild::cuda::gemv_detail
