#include "ops/glu.h"

#include <algorithm>
#include <cmath>

namespace guild {

void glu(const CpuKernelTable& k, const GluParams& p, int64_t n, const float* gate, const float* up, float* out) {
  if (p.kind == Glu::Silu) {
    k.swiglu_f32(n, gate, up, out);
    return;
  }
  // swiglu-oai, in llama.cpp's order of operations (gate clamped above only).
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], p.limit);
    const float u = std::max(std::min(up[i], p.limit), -p.limit);
    out[i] = g / (1.0f + std::exp(-p.alpha * g)) * (u + 1.0f);
  }
}

}  // namespace guild
