// RMS normalisation, computed as llama.cpp does: the mean of squares summed in
// double, then y = x / sqrt(mean + eps), then multiplied by the weight.
#pragma once
#include <cstdint>

namespace guild {

// y[i] = x[i] * rsqrt(mean(x²) + eps) * w[i]; w may be null (no weight). y may alias x.
void rms_norm(const float* x, const float* w, float eps, int64_t n, float* y);

// Applies rms_norm to each of n_rows rows (row stride = n).
void rms_norm_rows(const float* x, const float* w, float eps, int64_t n, int64_t n_rows, float* y);

}  // namespace guild
