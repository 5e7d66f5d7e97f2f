// Weight quantizers: float rows -> GGUF block types, for the synthetic-model
// generator and tests. "Nearest scale" quantizers: each block's scale (and
// min) comes straight from its extreme values and every value is rounded to
// the nearest level. This is simpler than llama.cpp's searched scales (it is
// not meant to produce the best possible quantization of real weights) and it
// writes exactly the block layouts of core/quant_blocks.h, so every runtime
// that reads GGUF reads the result the same way.
#pragma once
#include <cstdint>

namespace guild {

// True for the types quantize_weight_row supports: F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K, Q4_K, Q5_K, Q6_K, and any registered below.
bool weight_quant_supported(uint32_t type_id);

// A quantizer for a type whose codebooks live with the CPU kernels (the grid
// types: cpu/generic/quantize_weight_iq.h), which this layer does not link.
// Tools and tests that link the kernels register it; n is a whole number of
// blocks. Not thread-safe against quantize_weight_row: register first.
using WeightQuantizeFn = void (*)(const float* src, int64_t n, void* dst);
void register_weight_quantizer(uint32_t type_id, WeightQuantizeFn fn);

// Quantizes n floats (a whole number of the type's blocks) into dst (one row
// of that type). False for an unsupported type or a partial block.
bool quantize_weight_row(uint32_t type_id, const float* src, int64_t n, void* dst);

}  // namespace guild
