// The CPU kernel table: one row of function pointers per tensor type, bound
// once at load (seed §4: no lookup or virtual dispatch in token/layer loops).
// Plain C types only, so the same table can later cross a shared-library
// boundary as a kernel package's provider table (docs/PACKAGES.md).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace guild {

// Dequantize n elements (a whole number of blocks) of one row to float.
using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);
// Quantize n floats (a whole number of blocks) into an activation type.
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// dot(weight row of type T, activation row already in T's vec_dot_type), n elements.
using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* act_row);

struct TypeKernels {
  DequantRowFn dequant_row = nullptr;  // null: type not supported
  // Activation type that vec_dot expects (e.g. Q8_0 for Q4_0/Q8_0, Q8_K for
  // K-quants, F32 for F32/F16/BF16 weights). Matches llama.cpp's choice so
  // quantized logits agree with the reference.
  TensorType vec_dot_type = TensorType::F32;
  VecDotFn vec_dot = nullptr;
};

struct CpuKernelTable {
  const char* name = "";  // "cpu-generic", "cpu-avx2", ...
  TypeKernels types[kTensorTypeIdLimit];
  // Activation quantizers, indexed by the activation type id (F32 = copy).
  QuantizeRowFn quantize_act[kTensorTypeIdLimit] = {};

  // Float helpers used by the runners' elementwise ops (vectorized per table).
  float (*dot_f32)(int64_t n, const float* a, const float* b) = nullptr;
  void (*axpy_f32)(int64_t n, float a, const float* x, float* y) = nullptr;  // y += a*x
  void (*fp16_to_f32_row)(const uint16_t* src, float* dst, int64_t n) = nullptr;
  void (*f32_to_fp16_row)(const float* src, uint16_t* dst, int64_t n) = nullptr;
};

// Tables built into this binary (until kernel packages load them at run time).
const CpuKernelTable& cpu_kernels_generic();
// Null when this binary was built without the AVX2 table.
const CpuKernelTable* cpu_kernels_avx2();
// The best table the running CPU supports (AVX2+FMA+F16C where present);
// GUILD_FORCE_KERNELS=cpu-generic|cpu-avx2 overrides.
const CpuKernelTable& cpu_kernels_best();

}  // namespace guild
