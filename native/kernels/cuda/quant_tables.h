// The device copies of the IQ grids (quant_iq_grid.cuh): which types read
// them, their upload at kernels_init() and the check the launchers make.
// Host-only declarations.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace guild::cuda {

// IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S.
bool needs_iq_grids(uint32_t type);
// Fills every translation unit's grids on the current device, once per device
// (kernels_init calls it; synchronous copies, so never inside a graph capture).
cudaError_t quant_tables_init();
// True once quant_tables_init() has filled the current device's grids. A
// launcher of a grid type returns cudaErrorInitializationError before that
// (zero grids would give silently wrong products).
bool quant_tables_ready();
// The launch-time check: ok for a type that reads no grid, or once they are there.
inline cudaError_t grids_ready_for(uint32_t type) {
  return !needs_iq_grids(type) || quant_tables_ready() ? cudaSuccess : cudaErrorInitializationError;
}

// Per translation unit uploaders (GUILD_IQ_GRID_UPLOADER): each unit that
// instantiates grid-type kernels has its own copy of the grids.
cudaError_t iq_grids_upload_gemv_iq2();
cudaError_t iq_grids_upload_gemv_iq13();
cudaError_t iq_grids_upload_gemm();
cudaError_t iq_grids_upload_ops();

}  // namespace guild::cuda
