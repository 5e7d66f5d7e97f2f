// Codebooks and small format constants of the grid-quantized types (IQ1_S,
// IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S). The grids are defined once,
// in iq_grids.cpp (IQ1: iq1_grid.cpp), and shared by every kernel table (generic, AVX2, AVX-512)
// and by the tests. Entry k of a grid is one run of 8 (uint64_t) or 4
// (uint32_t) values: byte j, little-endian, is element j of the run.
//
// Safe for the ISA-specific translation units (see kernels_avx2.cpp): only
// extern declarations and constexpr data with internal linkage.
#pragma once
#include <stdint.h>

namespace guild::iq_grids {

extern const uint64_t kIQ2XXSGrid[256];  // magnitudes 8, 25, 43
extern const uint64_t kIQ2XSGrid[512];   // magnitudes 8, 25, 43
extern const uint64_t kIQ2SGrid[1024];   // magnitudes 8, 25, 43
extern const uint32_t kIQ3XXSGrid[256];  // magnitudes 4, 12, 20, 28, 36, 44, 52, 62
extern const uint32_t kIQ3SGrid[512];    // magnitudes 1, 3, 5, ..., 15
extern const uint64_t kIQ1SGrid[2048];   // int8 values -1, 0, +1 (IQ1_S and IQ1_M)

// The shift IQ1_S / IQ1_M add to every grid value (its sign is stored per
// run): x = scale * (grid + -kIQ1Delta). 1/8, so 8 * (grid +- delta) is an
// odd integer in -9..9 and the dot products stay integer.
inline constexpr float kIQ1Delta = 0.125f;

// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 of the 8 signs of a run; the 8th makes
// the number of minus signs even. kIQSignBytes[code] is the full sign byte
// (bit j set: element j is negative), i.e. code | parity(code) << 7.
struct SignByteTable {
  uint8_t v[128];
};
static consteval SignByteTable make_sign_bytes() {  // compile time only: never emitted
  SignByteTable t{};
  for (int c = 0; c < 128; ++c) {
    int ones = 0;
    for (int b = 0; b < 7; ++b) ones += (c >> b) & 1;
    t.v[c] = static_cast<uint8_t>(c | ((ones & 1) << 7));
  }
  return t;
}
static constexpr SignByteTable kIQSignBytes = make_sign_bytes();

}  // namespace guild::iq_grids
