// Tensor element types as GGUF numbers them, and their block geometry.
// The numeric values are GGUF's on-disk type ids (ggml_type); never renumber.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace guild {

enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
  IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

inline constexpr uint32_t kTensorTypeIdLimit = 40;  // ids are < this

struct TensorTypeInfo {
  std::string_view name;     // lower-case ggml name, e.g. "q4_K"
  uint32_t block_elems = 0;  // elements per block (1 for plain types)
  uint32_t block_bytes = 0;  // bytes per block; 0 = id unknown to Guild
};

// Geometry of a type id read from a file; block_bytes == 0 for an unknown id.
const TensorTypeInfo& tensor_type_info(uint32_t type_id);
inline const TensorTypeInfo& tensor_type_info(TensorType t) {
  return tensor_type_info(static_cast<uint32_t>(t));
}
std::string_view tensor_type_name(uint32_t type_id);  // "type#N" style for unknown ids

// Bytes of one row of n elements; false if n is not a whole number of blocks
// or the type is unknown.
bool tensor_row_bytes(uint32_t type_id, uint64_t n_elems, uint64_t* out_bytes);

}  // namespace guild
