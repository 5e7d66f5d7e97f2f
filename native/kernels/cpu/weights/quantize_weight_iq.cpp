#include "cpu/weights/quantize_weight_iq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "artifact/weight_quant.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"
#include "cpu/generic/iq_grids.h"

namespace guild {
namespace {

// IQ2_XXS magnitudes: every grid byte is one of these (iq_grids.h).
constexpr float kLevels[3] = {8.0f, 25.0f, 43.0f};
constexpr int kPatterns = 6561;  // 3^8 level patterns of a run of 8

// nearest[p]: the grid entry closest (squared distance) to level pattern p,
// p = sum_j digit_j * 3^j. Built once (6561 x 256 x 8 steps).
const std::array<uint8_t, kPatterns>& nearest_entry() {
  static const std::array<uint8_t, kPatterns> table = [] {
    std::array<uint8_t, kPatterns> t{};
    for (int p = 0; p < kPatterns; ++p) {
      float want[8];
      for (int j = 0, q = p; j < 8; ++j, q /= 3) want[j] = kLevels[q % 3];
      float best = INFINITY;
      for (int e = 0; e < 256; ++e) {
        float dist = 0;
        for (int j = 0; j < 8; ++j) {
          const float g = static_cast<float>((iq_grids::kIQ2XXSGrid[e] >> (8 * j)) & 0xFF);
          dist += (g - want[j]) * (g - want[j]);
        }
        if (dist < best) {
          best = dist;
          t[p] = static_cast<uint8_t>(e);
        }
      }
    }
    return t;
  }();
  return table;
}

int nearest_level(float a) { return a < 16.5f ? 0 : a < 34.0f ? 1 : 2; }

}  // namespace

void quantize_weight_iq2_xxs(const float* src, int64_t n, void* dst) {
  const auto& nearest = nearest_entry();
  auto* blocks = static_cast<BlockIQ2_XXS*>(dst);
  for (int64_t i = 0; i < n / 256; ++i) {
    const float* x = src + 256 * i;
    // Each 32-element sub-block's step: its largest magnitude on the top level.
    float step[8], max_step = 0;
    for (int sb = 0; sb < 8; ++sb) {
      float amax = 0;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[32 * sb + k]));
      step[sb] = amax / kLevels[2];
      max_step = std::max(max_step, step[sb]);
    }
    // step = d * (0.5 + s) * 0.25 with a 4-bit s: the largest at s = 15.
    BlockIQ2_XXS& b = blocks[i];
    b.d = f32_to_fp16(max_step / (15.5f * 0.25f));
    const float d = fp16_to_f32(b.d);
    auto* qs = reinterpret_cast<uint8_t*>(b.qs);
    for (int sb = 0; sb < 8; ++sb, qs += 8) {
      const int s = d > 0 ? std::clamp(static_cast<int>(std::lround(step[sb] / (0.25f * d) - 0.5f)), 0, 15) : 0;
      const float db = d * (0.5f + static_cast<float>(s)) * 0.25f;
      uint32_t meta = static_cast<uint32_t>(s) << 28;
      for (int r = 0; r < 4; ++r) {
        const float* v = x + 32 * sb + 8 * r;
        int pattern = 0, signs = 0, smallest = 0;
        for (int j = 7, pow3 = 2187; j >= 0; --j, pow3 /= 3) {
          pattern += nearest_level(db > 0 ? std::fabs(v[j]) / db : 0.0f) * pow3;
          if (v[j] < 0) signs |= 1 << j;
          if (std::fabs(v[j]) <= std::fabs(v[smallest])) smallest = j;
        }
        // The 8th sign is implied (an even number of minus signs): where the
        // run has an odd number, the smallest value takes the wrong sign.
        if (__builtin_popcount(static_cast<unsigned>(signs)) & 1) signs ^= 1 << smallest;
        qs[r] = nearest[static_cast<size_t>(pattern)];
        meta |= static_cast<uint32_t>(signs & 127) << (7 * r);
      }
      std::memcpy(qs + 4, &meta, 4);
    }
  }
}

void register_grid_weight_quantizers() {
  register_weight_quantizer(static_cast<uint32_t>(TensorType::IQ2_XXS), quantize_weight_iq2_xxs);
}

}  // namespace guild
