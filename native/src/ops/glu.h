// The gated unit between an FFN's gate/up and down projections.
#pragma once
#include <cstdint>

#include "core/kernel_table.h"

namespace guild {

enum class Glu : uint8_t {
  Silu,       // silu(gate) * up
  SwigluOai,  // g = min(gate, limit): g * sigmoid(alpha * g) * (clamp(up, -limit, limit) + 1)  (gpt-oss)
};

struct GluParams {
  Glu kind = Glu::Silu;
  float alpha = 1.0f;
  float limit = 0.0f;
};

// out[i] = glu(gate[i], up[i]) for n elements (out may be gate).
void glu(const CpuKernelTable& k, const GluParams& p, int64_t n, const float* gate, const float* up, float* out);

}  // namespace guild
