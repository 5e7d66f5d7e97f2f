// Every weight type of the matrix kernels in one place: the per-type unit and
// dequantizer headers, and dispatch_type (a functor templated on the type id).
// Included by the translation units that instantiate kernels for any type
// (gemm.cu, ops.cu); the matrix-vector kernels are split by type group
// (gemv_*.cu) and include only their group's header.
#pragma once
#include "common.cuh"
#include "quant_iq_grid.cuh"
#include "quant_kquant_low.cuh"
#include "quant_legacy_min.cuh"
#include "quant_nonlinear4.cuh"
#include "quant_ternary.cuh"

namespace guild::cuda {

// Calls f.template operator()<T>() for the type id; false for unsupported types.
template <typename F>
__host__ bool dispatch_type(uint32_t type, F&& f) {
  switch (type) {
    case kF32: f.template operator()<kF32>(); return true;
    case kF16: f.template operator()<kF16>(); return true;
    case kBF16: f.template operator()<kBF16>(); return true;
    case kQ4_0: f.template operator()<kQ4_0>(); return true;
    case kQ4_1: f.template operator()<kQ4_1>(); return true;
    case kQ5_0: f.template operator()<kQ5_0>(); return true;
    case kQ5_1: f.template operator()<kQ5_1>(); return true;
    case kQ8_0: f.template operator()<kQ8_0>(); return true;
    case kIQ4_NL: f.template operator()<kIQ4_NL>(); return true;
    case kMXFP4: f.template operator()<kMXFP4>(); return true;
    case kQ2_K: f.template operator()<kQ2_K>(); return true;
    case kQ3_K: f.template operator()<kQ3_K>(); return true;
    case kQ4_K: f.template operator()<kQ4_K>(); return true;
    case kQ5_K: f.template operator()<kQ5_K>(); return true;
    case kQ6_K: f.template operator()<kQ6_K>(); return true;
    case kIQ4_XS: f.template operator()<kIQ4_XS>(); return true;
    case kIQ2_XXS: f.template operator()<kIQ2_XXS>(); return true;
    case kIQ2_XS: f.template operator()<kIQ2_XS>(); return true;
    case kIQ2_S: f.template operator()<kIQ2_S>(); return true;
    case kIQ3_XXS: f.template operator()<kIQ3_XXS>(); return true;
    case kIQ3_S: f.template operator()<kIQ3_S>(); return true;
    case kIQ1_S: f.template operator()<kIQ1_S>(); return true;
    case kIQ1_M: f.template operator()<kIQ1_M>(); return true;
    case kTQ1_0: f.template operator()<kTQ1_0>(); return true;
    case kTQ2_0: f.template operator()<kTQ2_0>(); return true;
    default: return false;
  }
}

}  // namespace guild::cuda
