#include "core/tensor_type.h"

#include <array>
#include <string>

namespace guild {
namespace {

constexpr std::array<TensorTypeInfo, kTensorTypeIdLimit> make_table() {
  std::array<TensorTypeInfo, kTensorTypeIdLimit> t{};
  auto set = [&t](TensorType id, std::string_view name, uint32_t elems, uint32_t bytes) {
    t[static_cast<uint32_t>(id)] = TensorTypeInfo{name, elems, bytes};
  };
  // Byte sizes follow GGUF's block layouts (see docs/GGUF.md); the block structs
  // in core/quant_blocks.h static_assert the same numbers.
  set(TensorType::F32, "f32", 1, 4);
  set(TensorType::F16, "f16", 1, 2);
  set(TensorType::BF16, "bf16", 1, 2);
  set(TensorType::F64, "f64", 1, 8);
  set(TensorType::I8, "i8", 1, 1);
  set(TensorType::I16, "i16", 1, 2);
  set(TensorType::I32, "i32", 1, 4);
  set(TensorType::I64, "i64", 1, 8);
  set(TensorType::Q4_0, "q4_0", 32, 18);
  set(TensorType::Q4_1, "q4_1", 32, 20);
  set(TensorType::Q5_0, "q5_0", 32, 22);
  set(TensorType::Q5_1, "q5_1", 32, 24);
  set(TensorType::Q8_0, "q8_0", 32, 34);
  set(TensorType::Q8_1, "q8_1", 32, 36);
  set(TensorType::Q2_K, "q2_K", 256, 84);
  set(TensorType::Q3_K, "q3_K", 256, 110);
  set(TensorType::Q4_K, "q4_K", 256, 144);
  set(TensorType::Q5_K, "q5_K", 256, 176);
  set(TensorType::Q6_K, "q6_K", 256, 210);
  set(TensorType::Q8_K, "q8_K", 256, 292);
  set(TensorType::IQ2_XXS, "iq2_xxs", 256, 66);
  set(TensorType::IQ2_XS, "iq2_xs", 256, 74);
  set(TensorType::IQ3_XXS, "iq3_xxs", 256, 98);
  set(TensorType::IQ1_S, "iq1_s", 256, 50);
  set(TensorType::IQ4_NL, "iq4_nl", 32, 18);
  set(TensorType::IQ3_S, "iq3_s", 256, 110);
  set(TensorType::IQ2_S, "iq2_s", 256, 82);
  set(TensorType::IQ4_XS, "iq4_xs", 256, 136);
  set(TensorType::IQ1_M, "iq1_m", 256, 56);
  set(TensorType::TQ1_0, "tq1_0", 256, 54);
  set(TensorType::TQ2_0, "tq2_0", 256, 66);
  set(TensorType::MXFP4, "mxfp4", 32, 17);
  return t;
}

constexpr auto kTable = make_table();
const TensorTypeInfo kUnknown{};

}  // namespace

const TensorTypeInfo& tensor_type_info(uint32_t type_id) {
  if (type_id >= kTensorTypeIdLimit || kTable[type_id].block_bytes == 0) return kUnknown;
  return kTable[type_id];
}

std::string_view tensor_type_name(uint32_t type_id) {
  const auto& info = tensor_type_info(type_id);
  if (info.block_bytes != 0) return info.name;
  return "unknown";
}

bool tensor_row_bytes(uint32_t type_id, uint64_t n_elems, uint64_t* out_bytes) {
  const auto& info = tensor_type_info(type_id);
  if (info.block_bytes == 0 || n_elems % info.block_elems != 0) return false;
  *out_bytes = (n_elems / info.block_elems) * info.block_bytes;
  return true;
}

}  // namespace guild
