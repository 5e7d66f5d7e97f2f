// Weight quantizers for the grid types, which need the codebooks of
// cpu/generic/iq_grids.h (the artifact layer's weight_quant.h has the others).
// Nearest-level, not llama.cpp's searched quantization: meant for synthetic
// models (benchmarks, tests), not for quantizing real weights well.
#pragma once
#include <cstdint>

namespace guild {

// IQ2_XXS: n floats (whole 256-element blocks) into n / 256 blocks of 66 bytes.
void quantize_weight_iq2_xxs(const float* src, int64_t n, void* dst);

// Registers the quantizers above with weight_quant.h (tools and tests).
void register_grid_weight_quantizers();

}  // namespace guild
