// CPU kernel tables: cpu-avx2 and cpu-avx512 against the cpu-generic reference, and the
// reference against exact (double) arithmetic and independent restatements
// of ggml's loops.
//
// Tolerances (u = 2^-24, the float unit roundoff):
//  * dequantizers, activation quantizers, fp16 row conversions: bit-exact
//    (avx2 == generic; generic == ggml is checked by test_quant_fixtures).
//  * vec_dot avx2/avx512 vs generic: |simd - generic| <= 1e-5 * sum_i |w_i * a_i|
//    over the dequantized values.
//  * vec_dot generic vs the double-precision dot of dequant(w) . dequant(a):
//    <= (nb + 4) * u * B for nb blocks (the recursive float summation bound
//    with three roundings per block term). B is sum_i |w_i * a_i| with the
//    scale part and the min part counted separately for the types with a min
//    (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K): both parts are formed as exact integers
//    and only combined in float, so their sizes, not the size of their
//    difference, bound the rounding. Q4_1/Q5_1 add the fp16 rounding of the
//    Q8_1 block sums s, which llama.cpp uses for the min term:
//    sum_b |m_b| * |s_b - d_b * sum q_b|. Float weights: (n/8 + 4) * u * B,
//    where F16 / BF16 weights meet activations already rounded to F16 / BF16
//    (llama.cpp's pairing): the reference dots the rounded values, whose
//    products are exact in float.
//  * dot_f32: 1e-5 * sum|a_i b_i|; axpy (FMA in avx2, mul+add in generic):
//    per element <= 2u * (|a x_i| + |y_i|).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "cpu/generic/iq_grids.h"

using namespace guild;

namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

using Rng = std::mt19937_64;

float uniform(Rng& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

const CpuKernelTable& gen() { return cpu_kernels_generic(); }

// The AVX2 table if this binary has it and this CPU can run it; else null
// (with the reason printed once per test).
const CpuKernelTable* avx2_or_skip_reason() {
  const CpuKernelTable* t = cpu_kernels_avx2();
  if (!t) {
    std::printf("  (avx2 comparisons skipped: binary built without the AVX2 table)\n");
    return nullptr;
  }
  if (!cpu_features().has_avx2_table_isa()) {
    std::printf("  (avx2 comparisons skipped: this CPU lacks AVX2+FMA+F16C)\n");
    return nullptr;
  }
  return t;
}

// Every SIMD table this binary has and this CPU can run (cpu-avx2, cpu-avx512),
// each compared with cpu-generic by the tests below; the reason for a missing
// one is printed once per test.
std::vector<const CpuKernelTable*> simd_tables() {
  std::vector<const CpuKernelTable*> out;
  if (const CpuKernelTable* t = avx2_or_skip_reason()) out.push_back(t);
  if (const CpuKernelTable* t = cpu_kernels_avx512()) {
    if (cpu_features().has_avx512_table_isa()) out.push_back(t);
    else std::printf("  (avx512 comparisons skipped: this CPU lacks AVX-512 F/BW/VL/DQ + VNNI)\n");
  } else {
    std::printf("  (avx512 comparisons skipped: binary built without the AVX-512 table)\n");
  }
  return out;
}

uint32_t tid(TensorType t) { return static_cast<uint32_t>(t); }

// ---- random weight rows ------------------------------------------------------

struct WeightType {
  TensorType type;
  const char* name;
  int block_elems;
  int block_bytes;
  int min_offset;  // byte offset of the fp16 min/dmin field, -1 if none
  void (*sane)(uint8_t* block, Rng& rng);  // overwrite scale fields with sane values
};

uint16_t rand_h(Rng& rng, float lo, float hi, bool random_sign) {
  float v = uniform(rng, lo, hi);
  if (random_sign && (rng() & 1)) v = -v;
  return f32_to_fp16(v);
}

template <typename B>
B* as(uint8_t* p) { return reinterpret_cast<B*>(p); }

const WeightType kWeightTypes[] = {
    {TensorType::F32, "f32", 1, 4, -1,
     [](uint8_t* p, Rng& r) { float v = std::normal_distribution<float>(0, 1)(r); std::memcpy(p, &v, 4); }},
    {TensorType::F16, "f16", 1, 2, -1,
     [](uint8_t* p, Rng& r) { uint16_t h = f32_to_fp16(std::normal_distribution<float>(0, 1)(r)); std::memcpy(p, &h, 2); }},
    {TensorType::BF16, "bf16", 1, 2, -1,
     [](uint8_t* p, Rng& r) { uint16_t h = f32_to_bf16(std::normal_distribution<float>(0, 1)(r)); std::memcpy(p, &h, 2); }},
    {TensorType::Q4_0, "q4_0", 32, 18, -1, [](uint8_t* p, Rng& r) { as<BlockQ4_0>(p)->d = rand_h(r, 1e-3f, 2e-2f, true); }},
    {TensorType::Q4_1, "q4_1", 32, 20, 2,
     [](uint8_t* p, Rng& r) {
       as<BlockQ4_1>(p)->d = rand_h(r, 1e-3f, 2e-2f, false);
       as<BlockQ4_1>(p)->m = rand_h(r, 0.0f, 0.2f, true);
     }},
    {TensorType::Q5_0, "q5_0", 32, 22, -1, [](uint8_t* p, Rng& r) { as<BlockQ5_0>(p)->d = rand_h(r, 1e-3f, 2e-2f, true); }},
    {TensorType::Q5_1, "q5_1", 32, 24, 2,
     [](uint8_t* p, Rng& r) {
       as<BlockQ5_1>(p)->d = rand_h(r, 1e-3f, 2e-2f, false);
       as<BlockQ5_1>(p)->m = rand_h(r, 0.0f, 0.2f, true);
     }},
    {TensorType::Q8_0, "q8_0", 32, 34, -1, [](uint8_t* p, Rng& r) { as<BlockQ8_0>(p)->d = rand_h(r, 1e-4f, 2e-3f, true); }},
    {TensorType::Q2_K, "q2_K", 256, 84, 82,
     [](uint8_t* p, Rng& r) {
       as<BlockQ2_K>(p)->d = rand_h(r, 1e-4f, 1e-3f, false);
       as<BlockQ2_K>(p)->dmin = rand_h(r, 1e-4f, 1e-3f, false);
     }},
    {TensorType::Q3_K, "q3_K", 256, 110, -1, [](uint8_t* p, Rng& r) { as<BlockQ3_K>(p)->d = rand_h(r, 1e-4f, 1e-3f, true); }},
    {TensorType::Q4_K, "q4_K", 256, 144, 2,
     [](uint8_t* p, Rng& r) {
       as<BlockQ4_K>(p)->d = rand_h(r, 1e-4f, 1e-3f, false);
       as<BlockQ4_K>(p)->dmin = rand_h(r, 1e-4f, 1e-3f, false);
     }},
    {TensorType::Q5_K, "q5_K", 256, 176, 2,
     [](uint8_t* p, Rng& r) {
       as<BlockQ5_K>(p)->d = rand_h(r, 1e-4f, 1e-3f, false);
       as<BlockQ5_K>(p)->dmin = rand_h(r, 1e-4f, 1e-3f, false);
     }},
    {TensorType::Q6_K, "q6_K", 256, 210, -1, [](uint8_t* p, Rng& r) { as<BlockQ6_K>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ4_NL, "iq4_nl", 32, 18, -1, [](uint8_t* p, Rng& r) { as<BlockIQ4_NL>(p)->d = rand_h(r, 1e-4f, 1e-3f, true); }},
    {TensorType::IQ4_XS, "iq4_xs", 256, 136, -1, [](uint8_t* p, Rng& r) { as<BlockIQ4_XS>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::MXFP4, "mxfp4", 32, 17, -1, [](uint8_t* p, Rng& r) { as<BlockMXFP4>(p)->e = static_cast<uint8_t>(110 + r() % 20); }},
    {TensorType::IQ2_XXS, "iq2_xxs", 256, 66, -1, [](uint8_t* p, Rng& r) { as<BlockIQ2_XXS>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ2_XS, "iq2_xs", 256, 74, -1, [](uint8_t* p, Rng& r) { as<BlockIQ2_XS>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ2_S, "iq2_s", 256, 82, -1, [](uint8_t* p, Rng& r) { as<BlockIQ2_S>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ3_XXS, "iq3_xxs", 256, 98, -1, [](uint8_t* p, Rng& r) { as<BlockIQ3_XXS>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ3_S, "iq3_s", 256, 110, -1, [](uint8_t* p, Rng& r) { as<BlockIQ3_S>(p)->d = rand_h(r, 1e-5f, 1e-4f, true); }},
    {TensorType::IQ1_S, "iq1_s", 256, 50, -1, [](uint8_t* p, Rng& r) { as<BlockIQ1_S>(p)->d = rand_h(r, 1e-4f, 1e-3f, true); }},
    {TensorType::IQ1_M, "iq1_m", 256, 56, -1,
     [](uint8_t* p, Rng& r) {  // the fp16 super-scale lives in the top nibbles of the 4 scale words
       const uint16_t h = rand_h(r, 1e-4f, 1e-3f, true);
       for (int k = 0; k < 4; ++k) {
         uint16_t w;
         std::memcpy(&w, as<BlockIQ1_M>(p)->scales + 2 * k, 2);
         w = static_cast<uint16_t>((w & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
         std::memcpy(as<BlockIQ1_M>(p)->scales + 2 * k, &w, 2);
       }
     }},
    {TensorType::TQ1_0, "tq1_0", 256, 54, -1, [](uint8_t* p, Rng& r) { as<BlockTQ1_0>(p)->d = rand_h(r, 1e-3f, 1e-2f, true); }},
    {TensorType::TQ2_0, "tq2_0", 256, 66, -1, [](uint8_t* p, Rng& r) { as<BlockTQ2_0>(p)->d = rand_h(r, 1e-3f, 1e-2f, true); }},
};

std::vector<uint8_t> random_bytes(size_t n, Rng& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// A row of n elements: random bytes with sane scales (sane = true) or raw
// random bytes (any fp16 pattern, including inf/NaN scales).
std::vector<uint8_t> random_row(const WeightType& t, int64_t n, Rng& rng, bool sane) {
  const int64_t nb = n / t.block_elems;
  std::vector<uint8_t> row = random_bytes(static_cast<size_t>(nb * t.block_bytes), rng);
  if (sane)
    for (int64_t b = 0; b < nb; ++b) t.sane(row.data() + b * t.block_bytes, rng);
  return row;
}

std::vector<int64_t> sizes_for(const WeightType& t) {
  if (t.block_elems == 1) return {1, 7, 8, 31, 33, 100, 256, 4101};
  if (t.block_elems == 32) return {32, 64, 96, 352, 4096};
  return {256, 512, 2816, 4096};
}

std::vector<float> random_floats(int64_t n, Rng& rng, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  // a few outliers, as real activations have
  for (int k = 0; k < 3 && n > 0; ++k) v[rng() % n] *= 8.0f;
  return v;
}

// Bitwise equality, except that any two NaNs match: raw random blocks can hold
// inf/NaN scales, and which NaN (sign, payload) an IEEE operation returns for
// NaN operands depends on operand order, which the compiler may commute.
bool same_bits(const float* a, const float* b, int64_t n, int64_t* first_diff) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x, y;
    std::memcpy(&x, a + i, 4);
    std::memcpy(&y, b + i, 4);
    if (x != y && !(std::isnan(a[i]) && std::isnan(b[i]))) {
      *first_diff = i;
      return false;
    }
  }
  return true;
}

// ---- activation rows -------------------------------------------------------------

bool is_half(TensorType t) { return t == TensorType::F16 || t == TensorType::BF16; }
int act_block_elems(TensorType t) {
  return t == TensorType::Q8_K ? 256 : (t == TensorType::F32 || is_half(t)) ? 1 : 32;
}
size_t act_row_bytes(TensorType t, int64_t n) {
  switch (t) {
    case TensorType::Q8_0: return static_cast<size_t>(n / 32) * sizeof(BlockQ8_0);
    case TensorType::Q8_1: return static_cast<size_t>(n / 32) * sizeof(BlockQ8_1);
    case TensorType::Q8_K: return static_cast<size_t>(n / 256) * sizeof(BlockQ8_K);
    case TensorType::F16: case TensorType::BF16: return static_cast<size_t>(n) * 2;
    default: return static_cast<size_t>(n) * 4;
  }
}

// Exact values an activation row stands for.
std::vector<double> act_values(TensorType t, const void* row, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
      case TensorType::Q8_0: {
        const auto& b = static_cast<const BlockQ8_0*>(row)[i / 32];
        v[i] = static_cast<double>(fp16_to_f32(b.d)) * b.qs[i % 32];
        break;
      }
      case TensorType::Q8_1: {
        const auto& b = static_cast<const BlockQ8_1*>(row)[i / 32];
        v[i] = static_cast<double>(fp16_to_f32(b.d)) * b.qs[i % 32];
        break;
      }
      case TensorType::Q8_K: {
        const auto& b = static_cast<const BlockQ8_K*>(row)[i / 256];
        v[i] = static_cast<double>(b.d) * b.qs[i % 256];
        break;
      }
      case TensorType::F16: v[i] = fp16_to_f32(static_cast<const uint16_t*>(row)[i]); break;
      case TensorType::BF16: v[i] = bf16_to_f32(static_cast<const uint16_t*>(row)[i]); break;
      default: v[i] = static_cast<const float*>(row)[i];
    }
  }
  return v;
}

}  // namespace

// ---- tables --------------------------------------------------------------------------

TEST(tables_are_complete_and_consistent) {
  const CpuKernelTable* avx2 = cpu_kernels_avx2();
  CHECK(std::string(gen().name) == "cpu-generic");
  for (const WeightType& t : kWeightTypes) {
    const TypeKernels& k = gen().types[tid(t.type)];
    CHECK_MSG(k.dequant_row && k.vec_dot, "%s missing in cpu-generic", t.name);
    CHECK_MSG(gen().quantize_act[tid(k.vec_dot_type)] != nullptr, "%s: no quantizer for its vec_dot_type", t.name);
    CHECK(tensor_type_info(t.type).block_elems == static_cast<uint32_t>(t.block_elems));
    CHECK(tensor_type_info(t.type).block_bytes == static_cast<uint32_t>(t.block_bytes));
    for (const CpuKernelTable* simd : {avx2, cpu_kernels_avx512()}) {
      if (!simd) continue;
      const TypeKernels& a = simd->types[tid(t.type)];
      CHECK_MSG(a.dequant_row && a.vec_dot, "%s missing in %s", t.name, simd->name);
      CHECK(a.vec_dot_type == k.vec_dot_type);
    }
  }
  using T = TensorType;
  // llama.cpp's CPU pairing (its type_traits_cpu vec_dot_type).
  const std::pair<T, T> pairs[] = {{T::F32, T::F32},   {T::F16, T::F16},   {T::BF16, T::BF16},  {T::Q4_0, T::Q8_0},
                                   {T::Q4_1, T::Q8_1}, {T::Q5_0, T::Q8_0}, {T::Q5_1, T::Q8_1},  {T::Q8_0, T::Q8_0},
                                   {T::Q2_K, T::Q8_K}, {T::Q3_K, T::Q8_K}, {T::Q4_K, T::Q8_K},  {T::Q5_K, T::Q8_K},
                                   {T::Q6_K, T::Q8_K}, {T::IQ4_NL, T::Q8_0}, {T::IQ4_XS, T::Q8_K}, {T::MXFP4, T::Q8_0},
                                   {T::IQ2_XXS, T::Q8_K}, {T::IQ2_XS, T::Q8_K}, {T::IQ2_S, T::Q8_K}, {T::IQ3_XXS, T::Q8_K},
                                   {T::IQ3_S, T::Q8_K}, {T::IQ1_S, T::Q8_K}, {T::IQ1_M, T::Q8_K}, {T::TQ1_0, T::Q8_K},
                                   {T::TQ2_0, T::Q8_K}};
  for (auto [w, act] : pairs) CHECK(gen().types[tid(w)].vec_dot_type == act);
  // Unsupported types stay null (id 4 is unassigned in GGUF; I8 is a plain integer type).
  CHECK(gen().types[4].dequant_row == nullptr && gen().types[4].vec_dot == nullptr);
  CHECK(gen().types[tid(T::I8)].dequant_row == nullptr);
  CHECK(gen().types[tid(T::Q8_K)].vec_dot == nullptr);
  CHECK(gen().dot_f32 && gen().axpy_f32 && gen().fp16_to_f32_row && gen().f32_to_fp16_row);
  CHECK(gen().attn_scores_f16 && gen().attn_scores_f32 && gen().attn_pv_f16 && gen().attn_pv_f32 && gen().softmax_exp &&
        gen().swiglu_f32);
  const CpuKernelTable* avx512 = cpu_kernels_avx512();
  if (avx2) CHECK(std::string(avx2->name) == "cpu-avx2");
  if (avx512) CHECK(std::string(avx512->name) == "cpu-avx512");
  for (const CpuKernelTable* simd : {avx2, avx512}) {
    if (!simd) continue;
    CHECK(simd->dot_f32 && simd->axpy_f32 && simd->fp16_to_f32_row && simd->f32_to_fp16_row);
    CHECK(simd->attn_scores_f16 && simd->attn_scores_f32 && simd->attn_pv_f16 && simd->attn_pv_f32 && simd->softmax_exp &&
          simd->swiglu_f32);
    for (T act : {T::F32, T::F16, T::BF16, T::Q8_0, T::Q8_1, T::Q8_K}) CHECK(simd->quantize_act[tid(act)] != nullptr);
    // The tiled types (test_gemm_kernels checks the tiles themselves).
    for (T w : {T::Q4_K, T::Q5_K, T::Q6_K, T::Q8_0, T::F16, T::BF16})
      CHECK_MSG(simd->types[tid(w)].gemm != nullptr, "%s: no tile for %u", simd->name, tid(w));
  }
}

TEST(best_table_matches_cpu) {
  const std::string desc = cpu_features_description();
  std::printf("  cpu: %s\n", desc.c_str());
  CHECK(!desc.empty());
  const std::string flags = cpu_feature_flags();
  CHECK(desc.size() >= flags.size() && desc.compare(desc.size() - flags.size(), flags.size(), flags) == 0);
  CHECK(desc.rfind("; ") != std::string::npos && desc.substr(desc.rfind("; ") + 2) == flags);
  CHECK((flags.find("avx2") != std::string::npos) == cpu_features().avx2);
  CHECK(!cpu_features().avx512f || cpu_features().avx2);  // sanity of the XCR0 gating
  const CpuFeatures& f = cpu_features();
  CHECK(f.logical_usable >= 1 && f.physical_usable >= 1 && f.physical_usable <= f.logical_usable);
  const char* force = std::getenv("GUILD_FORCE_KERNELS");
  const CpuKernelTable& best = cpu_kernels_best();
  std::printf("  best table: %s%s%s%s\n", best.name, force ? " (GUILD_FORCE_KERNELS=" : "", force ? force : "",
              force ? ")" : "");
  if (force && std::string(force) == "cpu-generic") {
    CHECK(&best == &gen());
  } else if (force && std::string(force) == "cpu-avx2" && cpu_kernels_avx2() && f.has_avx2_table_isa()) {
    CHECK(&best == cpu_kernels_avx2());
  } else if (cpu_kernels_avx512() && f.has_avx512_table_isa()) {
    CHECK(&best == cpu_kernels_avx512());
  } else if (cpu_kernels_avx2() && f.has_avx2_table_isa()) {
    CHECK(&best == cpu_kernels_avx2());
  } else {
    CHECK(&best == &gen());
  }
  CHECK(&cpu_kernels_best() == &best);  // chosen once
}

// ---- dequantization --------------------------------------------------------------------

TEST(dequant_known_values) {
  // Q4_0, d = 1: nibble k -> k - 8; element j < 16 low nibble of qs[j].
  BlockQ4_0 q4{};
  q4.d = 0x3C00;
  for (int j = 0; j < 16; ++j) q4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[256];
  gen().types[tid(TensorType::Q4_0)].dequant_row(&q4, out, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[j] == static_cast<float>(j - 8));
    CHECK(out[16 + j] == static_cast<float>(7 - j));
  }
  // Q5_0: qh bit j adds 16 to element j.
  BlockQ5_0 q5{};
  q5.d = 0x3C00;  // 1.0
  const uint32_t qh = 0x80000001u;
  std::memcpy(q5.qh, &qh, 4);
  gen().types[tid(TensorType::Q5_0)].dequant_row(&q5, out, 32);
  CHECK(out[0] == 0.0f && out[1] == -16.0f && out[31] == 0.0f && out[16] == -16.0f);
  // MXFP4: e = 128 -> scale 2^1 / 2 = 1; values are doubled E2M1.
  BlockMXFP4 mx{};
  mx.e = 128;
  mx.qs[0] = 0xF7;  // element 0: idx 7 -> 12; element 16: idx 15 -> -12
  gen().types[tid(TensorType::MXFP4)].dequant_row(&mx, out, 32);
  CHECK(out[0] == 12.0f && out[16] == -12.0f && out[1] == 0.0f);
  CHECK(e8m0_to_f32_half(0) == std::ldexp(1.0f, -128) && e8m0_to_f32_half(1) == std::ldexp(1.0f, -127) &&
        e8m0_to_f32_half(127) == 0.5f && e8m0_to_f32_half(254) == std::ldexp(1.0f, 126));
  // Q6_K: all quants 32 (zero) except element 0 (q = 63 -> 31) and element 200.
  BlockQ6_K q6{};
  q6.d = 0x3C00;
  for (int g = 0; g < 16; ++g) q6.scales[g] = static_cast<int8_t>(g + 1);
  // q = 32 is ql nibble 0, qh bits 2 -> fill every qh 2-bit field with 2.
  std::memset(q6.qh, 0xAA, sizeof q6.qh);
  q6.ql[0] = 0x0F;                                  // element 0: 0x0F | 2<<4 = 47 -> 15, group 0 scale 1
  q6.ql[64 + 32 + 8] = 0xF0;                        // half 1, l = 8, high nibble of ql[l+32] -> element 128+96+8
  gen().types[tid(TensorType::Q6_K)].dequant_row(&q6, out, 256);
  CHECK(out[0] == 15.0f);
  CHECK(out[128 + 96 + 8] == 15.0f * 15.0f);  // group (128+96+8)/16 = 14 -> scale 15
  CHECK(out[1] == 0.0f && out[255] == 0.0f);
}

namespace {

uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
  return h;
}

// Every byte of a grid in `allowed`, no entry twice.
template <typename E, size_t N>
bool grid_well_formed(const E (&g)[N], std::initializer_list<int> allowed) {
  std::vector<E> sorted(g, g + N);
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;
  for (E e : g)
    for (size_t j = 0; j < sizeof(E); ++j)
      if (std::find(allowed.begin(), allowed.end(), static_cast<int>((e >> (8 * j)) & 0xFF)) == allowed.end()) return false;
  return true;
}

}  // namespace

// The grids are format data: their FNV-1a hashes were computed from the
// tables in llama.cpp v0.5.0's ggml-common.h (the reference the fixtures
// were recorded with), so any changed entry fails here.
TEST(iq_grids_are_ggml_format_data) {
  using namespace iq_grids;
  CHECK(fnv1a(kIQ2XXSGrid, sizeof kIQ2XXSGrid) == 0xbb4ee025b5ac6e8eull);
  CHECK(fnv1a(kIQ2XSGrid, sizeof kIQ2XSGrid) == 0xc9b1ee61e79909bdull);
  CHECK(fnv1a(kIQ2SGrid, sizeof kIQ2SGrid) == 0x123edd38a3b62b90ull);
  CHECK(fnv1a(kIQ3XXSGrid, sizeof kIQ3XXSGrid) == 0xdfa5dc83d6a155d5ull);
  CHECK(fnv1a(kIQ3SGrid, sizeof kIQ3SGrid) == 0xfa37020c25b44829ull);
  CHECK(fnv1a(kIQ1SGrid, sizeof kIQ1SGrid) == 0x6703ed863501ae2eull);
  CHECK(grid_well_formed(kIQ2XXSGrid, {8, 25, 43}));
  CHECK(grid_well_formed(kIQ2XSGrid, {8, 25, 43}));
  CHECK(grid_well_formed(kIQ2SGrid, {8, 25, 43}));
  CHECK(grid_well_formed(kIQ3XXSGrid, {4, 12, 20, 28, 36, 44, 52, 62}));
  CHECK(grid_well_formed(kIQ3SGrid, {1, 3, 5, 7, 9, 11, 13, 15}));
  CHECK(grid_well_formed(kIQ1SGrid, {0x00, 0x01, 0xFF}));
  // Sign bytes: the 7 stored signs plus the one that makes their count even.
  for (int c = 0; c < 128; ++c) {
    CHECK((kIQSignBytes.v[c] & 127) == c);
    CHECK(__builtin_popcount(kIQSignBytes.v[c]) % 2 == 0);
  }
  CHECK(kIQ1Delta == 0.125f);
}

// Hand-built blocks of the grid and ternary types, decoded by hand from
// the layouts in docs/QUANT_TYPES.md (grid entries 0 and 1 are known:
// IQ2 0x08.., 0x08..082b; IQ3_S 0x01010101, 0x01010103; IQ1 all -1, 0xff..ff01).
TEST(dequant_iq_known_values) {
  float out[256];
  auto dq = [&](TensorType t, const void* b, const CpuKernelTable& k) { k.types[tid(t)].dequant_row(b, out, 256); };
  std::vector<const CpuKernelTable*> tables{&gen()};
  for (const CpuKernelTable* t : simd_tables()) tables.push_back(t);
  for (const CpuKernelTable* k : tables) {
    // IQ2_XXS: d = 1, sub-block 0 runs use grid 1, 0; sign codes 3 (-> byte 0x03) and 1 (-> 0x81); s = 3.
    BlockIQ2_XXS a{};
    a.d = 0x3C00;
    const uint32_t idx = 1, meta = 3u | (1u << 7) | (3u << 28);
    std::memcpy(reinterpret_cast<uint8_t*>(a.qs), &idx, 4);
    std::memcpy(reinterpret_cast<uint8_t*>(a.qs) + 4, &meta, 4);
    dq(TensorType::IQ2_XXS, &a, *k);  // db = (0.5 + 3) / 4 = 0.875
    CHECK(out[0] == -43 * 0.875f && out[1] == -7.0f && out[2] == 7.0f && out[7] == 7.0f);
    CHECK(out[8] == -7.0f && out[9] == 7.0f && out[15] == -7.0f && out[32] == 1.0f);  // sub-block 1: grid 0, s = 0
    // IQ1_S: d = 1, sub-block 0: s = 2 (x5), negative shift; run 0 grid 1, run 1 grid 0.
    BlockIQ1_S s1{};
    s1.d = 0x3C00;
    s1.qs[0] = 1;
    s1.qh[0] = static_cast<uint16_t>(0x8000 | (2 << 12));
    dq(TensorType::IQ1_S, &s1, *k);
    CHECK(out[0] == 5 * 0.875f && out[1] == 5 * -1.125f && out[8] == 5 * -1.125f);
    CHECK(out[32] == -0.875f);  // sub-block 1: s = 0, positive shift, grid 0
    // IQ1_M: super-scale 1.0 (0x3C00 in the top nibbles), sub-block 0 scales 3 / 5.
    BlockIQ1_M m1{};
    const uint16_t words[4] = {static_cast<uint16_t>(1 | (2 << 3)), 0, 0xC000, 0x3000};
    std::memcpy(m1.scales, words, 8);
    m1.qs[0] = 1;
    m1.qh[0] = 0x08;  // run 0: negative shift; run 1: positive
    dq(TensorType::IQ1_M, &m1, *k);
    CHECK(out[0] == 3 * 0.875f && out[1] == 3 * -1.125f && out[8] == 3 * -0.875f && out[16] == 5 * -0.875f);
    // IQ3_S: d = 1, sub-block 0 s = 1 (x3), sub-block 1 s = 2 (x5); run 0 grid 1, sign of element 0.
    BlockIQ3_S s3{};
    s3.d = 0x3C00;
    s3.scales[0] = 0x21;
    s3.qs[0] = 1;
    s3.signs[0] = 0x01;
    dq(TensorType::IQ3_S, &s3, *k);
    CHECK(out[0] == -9.0f && out[1] == 3.0f && out[4] == 3.0f && out[32] == 5.0f);
    // TQ2_0: element 128h + 32l + m = (qs[32h + m] >> 2l) & 3, minus 1.
    BlockTQ2_0 t2{};
    t2.d = 0x3C00;
    t2.qs[0] = 0x18;  // l = 0: 0, l = 1: 2, l = 2: 1, l = 3: 0
    t2.qs[32] = 2;
    dq(TensorType::TQ2_0, &t2, *k);
    CHECK(out[0] == -1.0f && out[32] == 1.0f && out[64] == 0.0f && out[96] == -1.0f && out[128] == 1.0f);
    // TQ1_0: byte 181 = ceil(256 * (2*81 + 0*27 + 1*9 + 0 + 0) / 243) holds trits 2, 0, 1, 0, 0.
    BlockTQ1_0 t1{};
    t1.d = 0x3C00;
    t1.qs[0] = 181;
    t1.qs[32] = 181;
    t1.qh[0] = 181;
    dq(TensorType::TQ1_0, &t1, *k);
    CHECK(out[0] == 1.0f && out[32] == -1.0f && out[64] == 0.0f && out[96] == -1.0f && out[128] == -1.0f);
    CHECK(out[160] == 1.0f && out[176] == -1.0f && out[192] == 0.0f);
    CHECK(out[240] == 1.0f && out[244] == -1.0f && out[248] == 0.0f && out[252] == -1.0f && out[1] == -1.0f);
  }
}

namespace {

// Literal restatements of ggml's pointer-walking loops for the types the
// fixtures don't cover, written independently of the library's versions.
void walk_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d), mn = fp16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int blk = 0; blk < 256; blk += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF), ml = mn * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
      q += 32;
    }
  }
}

void walk_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    // unpack the 12 scale bytes as 4 little-endian words (ggml's kmask trick)
    uint32_t aux[4];
    std::memcpy(aux, x[i].scales, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
    aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
    aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
    aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
    int8_t sc[16];
    std::memcpy(sc, aux, 16);
    const uint8_t* q = x[i].qs;
    uint8_t m = 1;
    int is = 0;
    for (int blk = 0; blk < 256; blk += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * (sc[is++] - 32);
          for (int l = 16 * part; l < 16 * part + 16; ++l)
            *y++ = dl * (((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4));
        }
        m <<= 1;
      }
      q += 32;
    }
  }
}

void walk_q41(const BlockQ4_1* x, float* y, int64_t n, bool) {
  for (int64_t i = 0; i < n / 32; ++i)
    for (int j = 0; j < 32; ++j) {
      const int q = j < 16 ? (x[i].qs[j] & 15) : (x[i].qs[j - 16] >> 4);
      y[32 * i + j] = q * fp16_to_f32(x[i].d) + fp16_to_f32(x[i].m);
    }
}

void walk_q51(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 32; ++j) {
      const int q = (j < 16 ? (x[i].qs[j] & 15) : (x[i].qs[j - 16] >> 4)) | (((qh >> j) & 1) << 4);
      y[32 * i + j] = q * fp16_to_f32(x[i].d) + fp16_to_f32(x[i].m);
    }
  }
}

void walk_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIQ4NLValues[qs[j] & 0xf];
        y[j + 16] = dl * kIQ4NLValues[qs[j] >> 4];
      }
      y += 32;
      qs += 16;
    }
  }
}

void walk_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i)
    for (int j = 0; j < 32; ++j)
      y[32 * i + j] = fp16_to_f32(x[i].d) * kIQ4NLValues[j < 16 ? (x[i].qs[j] & 15) : (x[i].qs[j - 16] >> 4)];
}

// The grid and ternary types: pointer walks over the packed fields with the
// ggml operation order (factor, then * grid, then * +-1).
float sgn(unsigned signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }
const uint8_t* bytes_of(uint64_t& v) { return reinterpret_cast<const uint8_t*>(&v); }

void walk_iq2_xxs(const BlockIQ2_XXS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint16_t* q = x[i].qs;
    for (int ib = 0; ib < 8; ++ib, q += 4) {
      uint32_t w[2];
      std::memcpy(w, q, 8);
      const float db = d * (0.5f + (w[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        uint64_t g = iq_grids::kIQ2XXSGrid[(w[0] >> (8 * l)) & 0xFF];
        const unsigned code = (w[1] >> (7 * l)) & 127, signs = code | ((__builtin_popcount(code) & 1) << 7);
        for (int j = 0; j < 8; ++j) y[j] = db * bytes_of(g)[j] * sgn(signs, j);
      }
    }
  }
}

void walk_iq2_xs(const BlockIQ2_XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      for (int l = 0; l < 4; ++l, y += 8) {
        const float db = d * (0.5f + ((x[i].scales[ib] >> (l < 2 ? 0 : 4)) & 0xF)) * 0.25f;
        const uint16_t q = x[i].qs[4 * ib + l];
        uint64_t g = iq_grids::kIQ2XSGrid[q % 512];
        const unsigned code = q / 512, signs = code | ((__builtin_popcount(code) & 1) << 7);
        for (int j = 0; j < 8; ++j) y[j] = db * bytes_of(g)[j] * sgn(signs, j);
      }
    }
  }
}

void walk_iq2_s(const BlockIQ2_S* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t *qs = x[i].qs, *signs = x[i].qs + 32;
    for (int ib = 0; ib < 8; ++ib, qs += 4, signs += 4) {
      for (int l = 0; l < 4; ++l, y += 8) {
        const float db = d * (0.5f + ((x[i].scales[ib] >> (l < 2 ? 0 : 4)) & 0xF)) * 0.25f;
        uint64_t g = iq_grids::kIQ2SGrid[qs[l] + 256 * ((x[i].qh[ib] >> (2 * l)) & 3)];
        for (int j = 0; j < 8; ++j) y[j] = db * bytes_of(g)[j] * sgn(signs[l], j);
      }
    }
  }
}

void walk_iq3_xxs(const BlockIQ3_XXS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t w;
      std::memcpy(&w, x[i].qs + 64 + 4 * ib, 4);
      const float db = d * (0.5f + (w >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8, qs += 2) {
        const unsigned code = (w >> (7 * l)) & 127, signs = code | ((__builtin_popcount(code) & 1) << 7);
        uint64_t g = iq_grids::kIQ3XXSGrid[qs[0]] | (uint64_t{iq_grids::kIQ3XXSGrid[qs[1]]} << 32);
        for (int j = 0; j < 8; ++j) y[j] = db * bytes_of(g)[j] * sgn(signs, j);
      }
    }
  }
}

void walk_iq3_s(const BlockIQ3_S* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t *qs = x[i].qs, *signs = x[i].signs;
    for (int ib = 0; ib < 8; ++ib) {
      const float db = d * (1 + 2 * ((x[i].scales[ib / 2] >> (ib % 2 ? 4 : 0)) & 0xF));
      for (int l = 0; l < 4; ++l, y += 8, qs += 2, ++signs) {
        const int h0 = (x[i].qh[ib] >> (2 * l)) & 1, h1 = (x[i].qh[ib] >> (2 * l + 1)) & 1;
        uint64_t g = iq_grids::kIQ3SGrid[qs[0] + 256 * h0] | (uint64_t{iq_grids::kIQ3SGrid[qs[1] + 256 * h1]} << 32);
        for (int j = 0; j < 8; ++j) y[j] = db * bytes_of(g)[j] * sgn(*signs, j);
      }
    }
  }
}

void walk_iq1_s(const BlockIQ1_S* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t h = x[i].qh[ib];
      const float dl = d * (2 * ((h >> 12) & 7) + 1), delta = (h >> 15) ? -0.125f : 0.125f;
      for (int l = 0; l < 4; ++l, y += 8) {
        uint64_t g = iq_grids::kIQ1SGrid[x[i].qs[4 * ib + l] + 256 * ((h >> (3 * l)) & 7)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<int8_t>(bytes_of(g)[j]) + delta);
      }
    }
  }
}

void walk_iq1_m(const BlockIQ1_M* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, x[i].scales, 8);
    const uint16_t dh = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 12) << 4) | ((sc[2] >> 12) << 8) | ((sc[3] >> 12) << 12));
    const float d = fp16_to_f32(dh);
    for (int ib = 0; ib < 8; ++ib) {
      for (int l = 0; l < 4; ++l, y += 8) {
        const float dl = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + (l < 2 ? 0 : 3))) & 7) + 1);
        const int nib = (x[i].qh[2 * ib + l / 2] >> (l % 2 ? 4 : 0)) & 0xF;
        const float delta = nib & 8 ? -0.125f : 0.125f;
        uint64_t g = iq_grids::kIQ1SGrid[x[i].qs[4 * ib + l] + 256 * (nib & 7)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<int8_t>(bytes_of(g)[j]) + delta);
      }
    }
  }
}

int trit_of(uint8_t v, int k) { return ((v * std::array<int, 5>{1, 3, 9, 27, 81}[k]) % 256 * 3) / 256; }

void walk_tq1_0(const BlockTQ1_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 32; ++m) *y++ = (float)(trit_of(x[i].qs[m], k) - 1) * d;
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 16; ++m) *y++ = (float)(trit_of(x[i].qs[32 + m], k) - 1) * d;
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < 4; ++m) *y++ = (float)(trit_of(x[i].qh[m], k) - 1) * d;
  }
}

void walk_tq2_0(const BlockTQ2_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = (float)(((x[i].qs[32 * h + m] >> (2 * l)) & 3) - 1) * d;
  }
}

void walk_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

}  // namespace

TEST(generic_dequant_matches_literal_ggml_loops) {
  Rng rng(11);
  for (int rep = 0; rep < 20; ++rep) {
    const int64_t n = 256 * (1 + rep % 4);
    std::vector<float> a(n), b(n);
    int64_t at = 0;
    auto run = [&](TensorType t, int bytes_per_256, auto walk, const char* name) {
      std::vector<uint8_t> row = random_bytes(static_cast<size_t>(n / 256 * bytes_per_256), rng);
      for (const WeightType& w : kWeightTypes)
        if (w.type == t && rep % 2 == 0)
          for (int64_t k = 0; k < n / w.block_elems; ++k) w.sane(row.data() + k * w.block_bytes, rng);
      gen().types[tid(t)].dequant_row(row.data(), a.data(), n);
      walk(row.data(), b.data(), n);
      CHECK_MSG(same_bits(a.data(), b.data(), n, &at), "%s: element %lld: %g vs %g", name, (long long)at, a[at], b[at]);
    };
    run(TensorType::Q2_K, 84, [](const uint8_t* p, float* y, int64_t n) { walk_q2_k(reinterpret_cast<const BlockQ2_K*>(p), y, n); }, "q2_K");
    run(TensorType::Q3_K, 110, [](const uint8_t* p, float* y, int64_t n) { walk_q3_k(reinterpret_cast<const BlockQ3_K*>(p), y, n); }, "q3_K");
    run(TensorType::Q4_1, 8 * 20, [](const uint8_t* p, float* y, int64_t n) { walk_q41(reinterpret_cast<const BlockQ4_1*>(p), y, n, true); }, "q4_1");
    run(TensorType::Q5_1, 8 * 24, [](const uint8_t* p, float* y, int64_t n) { walk_q51(reinterpret_cast<const BlockQ5_1*>(p), y, n); }, "q5_1");
    run(TensorType::IQ4_XS, 136, [](const uint8_t* p, float* y, int64_t n) { walk_iq4_xs(reinterpret_cast<const BlockIQ4_XS*>(p), y, n); }, "iq4_xs");
    run(TensorType::IQ4_NL, 8 * 18, [](const uint8_t* p, float* y, int64_t n) { walk_iq4_nl(reinterpret_cast<const BlockIQ4_NL*>(p), y, n); }, "iq4_nl");
    run(TensorType::F16, 512, [](const uint8_t* p, float* y, int64_t n) { walk_f16(reinterpret_cast<const uint16_t*>(p), y, n); }, "f16");
#define GUILD_WALK(T, B, bytes, fn, name) \
  run(TensorType::T, bytes, [](const uint8_t* p, float* y, int64_t n) { fn(reinterpret_cast<const B*>(p), y, n); }, name)
    GUILD_WALK(IQ2_XXS, BlockIQ2_XXS, 66, walk_iq2_xxs, "iq2_xxs");
    GUILD_WALK(IQ2_XS, BlockIQ2_XS, 74, walk_iq2_xs, "iq2_xs");
    GUILD_WALK(IQ2_S, BlockIQ2_S, 82, walk_iq2_s, "iq2_s");
    GUILD_WALK(IQ3_XXS, BlockIQ3_XXS, 98, walk_iq3_xxs, "iq3_xxs");
    GUILD_WALK(IQ3_S, BlockIQ3_S, 110, walk_iq3_s, "iq3_s");
    GUILD_WALK(IQ1_S, BlockIQ1_S, 50, walk_iq1_s, "iq1_s");
    GUILD_WALK(IQ1_M, BlockIQ1_M, 56, walk_iq1_m, "iq1_m");
    GUILD_WALK(TQ1_0, BlockTQ1_0, 54, walk_tq1_0, "tq1_0");
    GUILD_WALK(TQ2_0, BlockTQ2_0, 66, walk_tq2_0, "tq2_0");
#undef GUILD_WALK
  }
}

TEST(simd_dequant_bit_exact) {
  for (const CpuKernelTable* avx2 : simd_tables()) {
  Rng rng(1234);
  int checked = 0;
  for (const WeightType& t : kWeightTypes) {
    for (int64_t n : sizes_for(t)) {
      for (int rep = 0; rep < 8; ++rep) {
        const bool sane = rep < 6;  // last round: raw random bytes (any scale bits)
        std::vector<uint8_t> row = random_row(t, n, rng, sane);
        std::vector<float> a(n + 1, 7.0f), b(n + 1, 7.0f);
        gen().types[tid(t.type)].dequant_row(row.data(), a.data(), n);
        avx2->types[tid(t.type)].dequant_row(row.data(), b.data(), n);
        int64_t at = 0;
        CHECK_MSG(same_bits(a.data(), b.data(), n + 1, &at), "%s %s n=%lld rep=%d: element %lld: %.9g vs %.9g",
                  avx2->name, t.name, (long long)n, rep, (long long)at, a[at], b[at]);
        ++checked;
      }
    }
  }
  std::printf("  %s: %d rows compared bitwise\n", avx2->name, checked);
  }
}

// ---- activation quantizers ------------------------------------------------------------------

TEST(quantizers_reference_rounding) {
  // amax = 127 -> id = 127/127 = 1: ties round to even (llama.cpp's x86 quantizer).
  float x[256] = {};
  x[0] = 127.0f;
  x[1] = 0.5f; x[2] = 1.5f; x[3] = -0.5f; x[4] = 2.5f; x[5] = -2.5f; x[6] = 0.49999997f; x[7] = -126.5f;
  BlockQ8_0 q0[8];
  gen().quantize_act[tid(TensorType::Q8_0)](x, q0, 32);
  CHECK(fp16_to_f32(q0[0].d) == 1.0f);
  CHECK(q0[0].qs[0] == 127 && q0[0].qs[1] == 0 && q0[0].qs[2] == 2 && q0[0].qs[3] == 0 && q0[0].qs[4] == 2 &&
        q0[0].qs[5] == -2 && q0[0].qs[6] == 0 && q0[0].qs[7] == -126);
  BlockQ8_1 q1[8];
  gen().quantize_act[tid(TensorType::Q8_1)](x, q1, 32);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += q1[0].qs[j];
  CHECK(std::memcmp(q1[0].qs, q0[0].qs, 32) == 0);
  CHECK(fp16_to_f32(q1[0].s) == static_cast<float>(sum));
  // Q8_K: max element 127 -> iscale = -1: ties to even, signs flipped.
  BlockQ8_K qk;
  gen().quantize_act[tid(TensorType::Q8_K)](x, &qk, 256);
  CHECK(qk.d == -1.0f);
  CHECK(qk.qs[0] == -127 && qk.qs[1] == 0 && qk.qs[2] == -2 && qk.qs[3] == 0 && qk.qs[4] == -2 && qk.qs[5] == 2 &&
        qk.qs[7] == 126);
  CHECK(qk.bsums[0] == -127 + 0 - 2 + 0 - 2 + 2 + 0 + 126 && qk.bsums[1] == 0);
  // First element of maximal magnitude sets the sign: -3 before +3.
  float y[256] = {};
  y[10] = -3.0f;
  y[20] = 3.0f;
  gen().quantize_act[tid(TensorType::Q8_K)](y, &qk, 256);
  CHECK(qk.qs[10] == -127 && qk.qs[20] == 127 && qk.d == 1.0f / (-127.0f / -3.0f));
  y[10] = 3.0f;
  y[20] = -3.0f;
  gen().quantize_act[tid(TensorType::Q8_K)](y, &qk, 256);
  CHECK(qk.qs[10] == -127 && qk.qs[20] == 127 && qk.d == 1.0f / (-127.0f / 3.0f));
  // all zero
  std::memset(y, 0, sizeof y);
  std::memset(&qk, 0x55, sizeof qk);
  gen().quantize_act[tid(TensorType::Q8_K)](y, &qk, 256);
  CHECK(qk.d == 0.0f && qk.qs[0] == 0 && qk.qs[255] == 0 && qk.bsums[15] == 0);
}

// F16 / BF16 activation rows (for F16 / BF16 weights) are the inputs rounded
// to nearest even, as llama.cpp prepares them (F16C's cvtps2ph and
// ggml_compute_fp32_to_bf16): checked against the definition (the nearest
// representable value, ties to an even significand) and, for BF16, against
// ggml's bit formula; every table's bytes equal cpu-generic's.
TEST(half_activations_round_to_nearest_even) {
  Rng rng(31);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(fp32_from_bits(static_cast<uint32_t>(rng())));  // any bits
  for (int i = 0; i < 4000; ++i) x.push_back(std::ldexp(uniform(rng, -1, 1), static_cast<int>(rng() % 60) - 40));
  for (int i = 0; i < 1024; ++i) {  // exact ties of both formats, and their neighbours
    const uint16_t hb = static_cast<uint16_t>(rng() % 0x7BFF);  // finite, below the largest half
    const float tie16 = (fp16_to_f32(hb) + fp16_to_f32(static_cast<uint16_t>(hb + 1))) / 2;  // exact in float
    for (float v : {tie16, std::nextafter(tie16, 0.0f), std::nextafter(tie16, 1e9f)}) x.push_back((i & 1) ? -v : v);
    x.push_back(fp32_from_bits((static_cast<uint32_t>(rng()) & 0xFFFF0000u) | 0x8000u));  // bf16 tie
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e30f, std::ldexp(1.0f, -24),
                  std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -130)})
    x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> h(n), b(n);
  gen().quantize_act[tid(TensorType::F16)](x.data(), h.data(), n);
  gen().quantize_act[tid(TensorType::BF16)](x.data(), b.data(), n);
  int bad16 = 0, bad_bf = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const uint32_t u = fp32_to_bits(x[i]);
    // BF16: ggml's formula.
    const uint16_t want_bf = (u & 0x7FFFFFFFu) > 0x7F800000u ? static_cast<uint16_t>((u >> 16) | 64)
                                                           : static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1))) >> 16);
    bad_bf += b[i] != want_bf;
    // F16: NaN stays NaN; beyond the largest half (+ half an ulp) -> inf; else the nearest, ties to even.
    const float got = fp16_to_f32(h[i]);
    if (std::isnan(x[i])) { bad16 += !std::isnan(got); continue; }
    if (std::fabs(v) >= 65520.0) { bad16 += !(std::isinf(got) && std::signbit(got) == std::signbit(x[i])); continue; }
    const double lo = fp16_to_f32(static_cast<uint16_t>(h[i] & 0x7FFF) == 0 ? h[i] : h[i] - 1);
    const double hi = fp16_to_f32(static_cast<uint16_t>(h[i] + 1));
    const double err = std::fabs(v - got);
    const bool nearest = err <= std::fabs(v - lo) && (std::isinf(hi) || err <= std::fabs(v - hi));
    const bool tie = err == std::fabs(v - lo) || (!std::isinf(hi) && err == std::fabs(v - hi));
    bad16 += !nearest || (tie && (h[i] & 1) && err != 0) || (got == 0 && std::signbit(got) != std::signbit(x[i]));
  }
  CHECK_MSG(bad16 == 0, "%d of %lld F16 roundings wrong", bad16, (long long)n);
  CHECK_MSG(bad_bf == 0, "%d of %lld BF16 roundings wrong", bad_bf, (long long)n);
  for (const CpuKernelTable* simd : simd_tables()) {
    for (TensorType t : {TensorType::F16, TensorType::BF16}) {
      std::vector<uint16_t> s2(n + 1, 0x5555), ref(n + 1, 0x5555);
      gen().quantize_act[tid(t)](x.data(), ref.data(), n);
      simd->quantize_act[tid(t)](x.data(), s2.data(), n);
      CHECK_MSG(s2 == ref, "%s: %s activations differ from cpu-generic", simd->name, t == TensorType::F16 ? "F16" : "BF16");
    }
  }
}

TEST(quantizers_round_trip) {
  Rng rng(99);
  for (int rep = 0; rep < 50; ++rep) {
    const int64_t n = 256 * (1 + rep % 5);
    std::vector<float> x = random_floats(n, rng, std::ldexp(1.0f, static_cast<int>(rng() % 16) - 6));
    for (TensorType t : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K}) {
      std::vector<uint8_t> q(act_row_bytes(t, n));
      gen().quantize_act[tid(t)](x.data(), q.data(), n);
      const std::vector<double> v = act_values(t, q.data(), n);
      const int be = act_block_elems(t);
      for (int64_t b = 0; b < n / be; ++b) {
        double amax = 0;
        for (int j = 0; j < be; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[b * be + j])));
        // half a step of amax/127 (plus fp16 rounding of d for Q8_0/Q8_1)
        const double tol = amax / 127.0 * (0.5 + 127.0 * 1e-3) + 1e-30;
        for (int j = 0; j < be; ++j) {
          const int64_t i = b * be + j;
          if (std::fabs(v[i] - x[i]) > tol) {
            CHECK_MSG(false, "type %u n=%lld i=%lld: %g -> %g", tid(t), (long long)n, (long long)i, x[i], v[i]);
            return;
          }
        }
      }
    }
  }
}

namespace {

// Q8_0 rows on which ggml's generic scale id = 1 / (amax / 127) and
// 127 / amax (what llama.cpp's x86 quantizer, our reference, uses) give
// different quants: amax values where the two ids differ, with elements
// placed right at the rounding boundary of one of them.
std::vector<float> adversarial_q8_row(Rng& rng, int blocks, int* found) {
  std::vector<float> x;
  *found = 0;
  while (static_cast<int>(x.size()) < 32 * blocks) {
    const float amax = uniform(rng, 0.5f, 4.0f);
    const float d = amax / 127.0f;
    const float id_ref = 1.0f / d, id_alt = 127.0f / amax;
    if (id_ref == id_alt) continue;
    std::vector<float> blk{amax};
    for (int k = 0; k < 126 && blk.size() < 32; ++k) {
      float v = (k + 0.5f) / id_ref;
      for (int step = 0; step < 8 && blk.size() < 32; ++step, v = std::nextafter(v, 1e9f))
        if (std::round(v * id_ref) != std::round(v * id_alt) && v < amax) {
          blk.push_back((rng() & 1) ? v : -v);
          ++*found;
        }
    }
    while (blk.size() < 32) blk.push_back(uniform(rng, -amax, amax));
    x.insert(x.end(), blk.begin(), blk.end());
  }
  return x;
}

}  // namespace

TEST(q8_0_uses_llama_cpp_x86_scale) {
  Rng rng(2024);
  int found = 0;
  const std::vector<float> x = adversarial_q8_row(rng, 64, &found);
  std::printf("  %d boundary elements where 1/(amax/127) and 127/amax disagree\n", found);
  REQUIRE(found > 0);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<BlockQ8_0> q(n / 32);
  gen().quantize_act[tid(TensorType::Q8_0)](x.data(), q.data(), n);
  int bad = 0;
  for (int64_t b = 0; b < n / 32; ++b) {  // llama.cpp's x86 quantize_row_q8_0, in scalar form
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d = amax / 127, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    bad += q[b].d != f32_to_fp16(d);
    for (int j = 0; j < 32; ++j) bad += q[b].qs[j] != static_cast<int8_t>(std::nearbyint(x[32 * b + j] * id));
  }
  CHECK_MSG(bad == 0, "%d mismatches", bad);
  for (const CpuKernelTable* avx2 : simd_tables()) {
    std::vector<BlockQ8_0> qa(n / 32);
    avx2->quantize_act[tid(TensorType::Q8_0)](x.data(), qa.data(), n);
    CHECK(std::memcmp(qa.data(), q.data(), q.size() * sizeof(BlockQ8_0)) == 0);
    std::vector<BlockQ8_1> g1(n / 32), a1(n / 32);
    gen().quantize_act[tid(TensorType::Q8_1)](x.data(), g1.data(), n);
    avx2->quantize_act[tid(TensorType::Q8_1)](x.data(), a1.data(), n);
    CHECK(std::memcmp(g1.data(), a1.data(), g1.size() * sizeof(BlockQ8_1)) == 0);
  }
}

TEST(simd_quantizers_identical_bytes) {
  for (const CpuKernelTable* avx2 : simd_tables()) {
  Rng rng(4321);
  int rows = 0;
  for (int rep = 0; rep < 300; ++rep) {
    const int64_t n = 256 * (1 + rep % 6);
    std::vector<float> x = random_floats(n, rng, std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20));
    if (rep % 5 == 1) {  // exact ties: a block whose max is 127 (d = 1, Q8_K iscale = -+1), half-integers elsewhere
      for (int64_t i = 0; i < n; ++i) x[i] = (static_cast<int>(rng() % 253) - 126) + 0.5f;
      for (int64_t b = 0; b < n; b += 32) x[b + rng() % 32] = (rng() & 1) ? 127.0f : -127.0f;
    }
    if (rep % 7 == 2) std::fill(x.begin(), x.begin() + 256, 0.0f);  // zero blocks
    if (rep % 11 == 3) {                                              // +-amax ties for Q8_K's sign pick
      const float m = x[0] > 0 ? x[0] : -x[0];
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(-m * 0.99f, std::min(m * 0.99f, x[i]));
      x[5] = -m * 2;
      x[9] = m * 2;
    }
    if (rep % 13 == 4)
      for (int64_t i = 0; i < n; i += 3) x[i] = std::ldexp(x[i], -130);  // subnormals
    for (TensorType t : {TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K, TensorType::F32, TensorType::F16,
                         TensorType::BF16}) {
      std::vector<uint8_t> a(act_row_bytes(t, n), 0xAB), b(act_row_bytes(t, n), 0xCD);
      gen().quantize_act[tid(t)](x.data(), a.data(), n);
      avx2->quantize_act[tid(t)](x.data(), b.data(), n);
      if (a != b) {
        size_t at = 0;
        while (a[at] == b[at]) ++at;
        CHECK_MSG(false, "%s act type %u rep %d: byte %zu differs (%d vs %d)", avx2->name, tid(t), rep, at, a[at], b[at]);
      }
      ++rows;
    }
  }
  std::printf("  %s: %d rows compared bytewise\n", avx2->name, rows);
  }
}

// ---- dot products ---------------------------------------------------------------------

namespace {

struct DotCase {
  double exact = 0;   // double dot of dequantized weights and activation values
  double base = 0;    // B: sum of |scale part| + |min part| of the terms
  double terms = 0;   // sum |w_i * a_i|
  double s_round = 0; // Q8_1 min-term rounding allowance
};

DotCase exact_dot(const WeightType& t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& act, int64_t n) {
  const TensorType at = gen().types[tid(t.type)].vec_dot_type;
  std::vector<float> wf(n), ws(n);
  gen().types[tid(t.type)].dequant_row(w.data(), wf.data(), n);
  ws = wf;
  if (t.min_offset >= 0) {  // scale part alone: same row with the min fields zeroed
    std::vector<uint8_t> w0 = w;
    for (int64_t b = 0; b < n / t.block_elems; ++b) std::memset(w0.data() + b * t.block_bytes + t.min_offset, 0, 2);
    gen().types[tid(t.type)].dequant_row(w0.data(), ws.data(), n);
  }
  const std::vector<double> av = act_values(at, act.data(), n);
  DotCase r;
  for (int64_t i = 0; i < n; ++i) {
    r.exact += static_cast<double>(wf[i]) * av[i];
    r.terms += std::fabs(static_cast<double>(wf[i]) * av[i]);
    r.base += std::fabs(static_cast<double>(ws[i]) * av[i]) + std::fabs((static_cast<double>(wf[i]) - ws[i]) * av[i]);
  }
  if (at == TensorType::Q8_1) {
    const auto* y = reinterpret_cast<const BlockQ8_1*>(act.data());
    for (int64_t b = 0; b < n / 32; ++b) {
      uint16_t mh;
      std::memcpy(&mh, w.data() + b * t.block_bytes + t.min_offset, 2);
      double qsum = 0;
      for (int j = 0; j < 32; ++j) qsum += y[b].qs[j];
      const double s_exact = static_cast<double>(fp16_to_f32(y[b].d)) * qsum;
      r.s_round += std::fabs(fp16_to_f32(mh)) * std::fabs(fp16_to_f32(y[b].s) - s_exact);
    }
  }
  return r;
}

}  // namespace

TEST(vec_dot_generic_vs_exact_and_simd) {
  const std::vector<const CpuKernelTable*> simd = simd_tables();
  Rng rng(777);
  std::string report;
  for (const WeightType& t : kWeightTypes) {
    double worst_gen = 0, worst_avx2 = 0;  // error / B; |simd - generic| / sum|w*a| over the SIMD tables
    const TypeKernels& gk = gen().types[tid(t.type)];
    for (int64_t n : sizes_for(t)) {
      for (int rep = 0; rep < 16; ++rep) {
        std::vector<uint8_t> w = random_row(t, n, rng, true);
        std::vector<float> x = random_floats(n, rng, rep % 2 ? 1.0f : 0.02f);
        const TensorType at = gk.vec_dot_type;
        if (act_block_elems(at) > 1 && n % act_block_elems(at) != 0) continue;
        std::vector<uint8_t> act(act_row_bytes(at, n));
        gen().quantize_act[tid(at)](x.data(), act.data(), n);

        const DotCase ref = exact_dot(t, w, act, n);
        const float g = gk.vec_dot(n, w.data(), act.data());
        const int64_t nb = t.block_elems == 1 ? n / 8 : n / t.block_elems;
        const double tol_gen = (static_cast<double>(nb) + 4.0) * kU * ref.base + ref.s_round + 1e-30;
        const double err_gen = std::fabs(g - ref.exact);
        worst_gen = std::max(worst_gen, (err_gen - ref.s_round) / (ref.base + 1e-30));
        CHECK_MSG(err_gen <= tol_gen, "%s n=%lld rep=%d generic %.9g exact %.9g err %.3g tol %.3g", t.name,
                  (long long)n, rep, g, ref.exact, err_gen, tol_gen);
        for (const CpuKernelTable* avx2 : simd) {
          const float v = avx2->types[tid(t.type)].vec_dot(n, w.data(), act.data());
          const double err = std::fabs(static_cast<double>(v) - g);
          worst_avx2 = std::max(worst_avx2, err / (ref.terms + 1e-30));
          CHECK_MSG(err <= 1e-5 * ref.terms + 1e-30, "%s n=%lld rep=%d %s %.9g generic %.9g rel %.3g", t.name,
                    (long long)n, rep, avx2->name, v, g, err / ref.terms);
        }
      }
    }
    char line[128];
    std::snprintf(line, sizeof line, "  %-7s |generic-exact|/B <= %.2e   |simd-generic|/sum|w*a| <= %.2e\n", t.name, worst_gen,
                  worst_avx2);
    report += line;
  }
  std::printf("%s", report.c_str());
}

// ---- float helpers -----------------------------------------------------------------------

TEST(float_helpers) {
  for (const CpuKernelTable* avx2 : simd_tables()) {
  Rng rng(5);
  for (int64_t n : {0, 1, 5, 8, 9, 31, 32, 33, 257, 4099}) {
    std::vector<float> a = random_floats(n, rng, 1.0f), b = random_floats(n, rng, 3.0f);
    double exact = 0, base = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      base += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    const float g = gen().dot_f32(n, a.data(), b.data());
    CHECK(std::fabs(g - exact) <= (n / 8.0 + 4) * kU * base + 1e-30);
    if (avx2) CHECK(std::fabs(avx2->dot_f32(n, a.data(), b.data()) - g) <= 1e-5 * base + 1e-30);

    std::vector<float> y1 = b, y2 = b;
    gen().axpy_f32(n, 0.37f, a.data(), y1.data());
    for (int64_t i = 0; i < n; ++i)
      CHECK(std::fabs(y1[i] - (b[i] + 0.37 * a[i])) <= 2 * kU * (std::fabs(0.37 * a[i]) + std::fabs(b[i])));
    if (avx2) {
      avx2->axpy_f32(n, 0.37f, a.data(), y2.data());
      for (int64_t i = 0; i < n; ++i)
        CHECK(std::fabs(y2[i] - y1[i]) <= 2 * kU * (std::fabs(0.37 * a[i]) + std::fabs(b[i])));
    }
  }
  // fp16 -> f32: every half pattern (incl. subnormals, inf, NaN payloads).
  std::vector<uint16_t> all(65536 + 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f1(all.size()), f2(all.size());
  gen().fp16_to_f32_row(all.data(), f1.data(), static_cast<int64_t>(all.size()));
  int wrong = 0;
  for (size_t i = 0; i < 65536; ++i) {  // against sign * mantissa * 2^exponent
    const int e = static_cast<int>((i >> 10) & 31), m = static_cast<int>(i & 1023);
    const double sign = (i & 0x8000) ? -1.0 : 1.0;
    if (e == 31) {
      wrong += m == 0 ? !(std::isinf(f1[i]) && (f1[i] < 0) == (sign < 0)) : !std::isnan(f1[i]);
    } else {
      const double want = sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
      wrong += static_cast<double>(f1[i]) != want || std::signbit(f1[i]) != (sign < 0);
    }
  }
  CHECK_MSG(wrong == 0, "%d halves decoded wrongly", wrong);
  CHECK(f1[0x3C00] == 1.0f && f1[0xC000] == -2.0f && f1[0x0001] == std::ldexp(1.0f, -24) && std::isinf(f1[0x7C00]));
  int64_t at = 0;
  if (avx2) {
    avx2->fp16_to_f32_row(all.data(), f2.data(), static_cast<int64_t>(all.size()));
    CHECK_MSG(same_bits(f1.data(), f2.data(), static_cast<int64_t>(all.size()), &at), "half 0x%04x: %08x", (unsigned)at,
              fp32_to_bits(f2[at]));
  }
  // f32 -> fp16: random values over the whole range, ties, specials.
  std::vector<float> src;
  for (int i = 0; i < 20000; ++i) src.push_back(fp32_from_bits(static_cast<uint32_t>(rng())));
  for (int i = 0; i < 20000; ++i) src.push_back(std::ldexp(uniform(rng, -1, 1), static_cast<int>(rng() % 50) - 30));
  for (int i = 0; i < 2048; ++i) src.push_back(fp16_to_f32(static_cast<uint16_t>(i)) + std::ldexp(1.0f, -25));  // ties
  for (float s : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e30f, -1e30f, std::ldexp(1.0f, -25), std::ldexp(1.0f, -26)})
    src.push_back(s);
  src.push_back(fp32_from_bits(0x7F800000u));
  src.push_back(fp32_from_bits(0x7FC00001u));
  src.push_back(fp32_from_bits(0xFF800001u));
  std::vector<uint16_t> h1(src.size()), h2(src.size());
  gen().f32_to_fp16_row(src.data(), h1.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i)
    if (!std::isnan(src[i]) && std::fabs(src[i]) < 65504.0f)
      CHECK(std::fabs(fp16_to_f32(h1[i]) - src[i]) <= std::max(std::fabs(src[i]) * 4.9e-4f, std::ldexp(1.0f, -25)));
  if (avx2) {
    avx2->f32_to_fp16_row(src.data(), h2.data(), static_cast<int64_t>(src.size()));
    size_t bad = 0;
    for (size_t i = 0; i < src.size(); ++i) bad += h1[i] != h2[i];
    CHECK_MSG(bad == 0, "%zu of %zu halves differ", bad, src.size());
  }
  }
}
