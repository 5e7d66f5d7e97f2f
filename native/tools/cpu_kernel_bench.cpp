// CPU vec_dot throughput per weight type and kernel table, one thread:
//   cpu-kernel-bench [--types q4_K,iq2_xxs,...] [--row 2048] [--rows 256] [--ms 300]
// Rows are L2-resident (rows x row bytes of weights), so this measures the
// kernel's arithmetic, not memory bandwidth. Prints Gelem/s and ns per 256
// elements per (table, type); each number is the best of 5 timed passes.
// Weight bytes are random with every block's scale set to a small finite
// half (the integer pipeline's cost does not depend on the values).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernel_table.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"
#include "tool_args.h"

using namespace guild;

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Random bytes, then every 2-byte word that reads as a non-finite or huge
// half replaced by 0x2000 (~0.0078): the block scales stay finite whatever
// offset they sit at.
void fill_weights(std::vector<uint8_t>& bytes, std::mt19937& rng) {
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    const unsigned exp = (bytes[i + 1] >> 2) & 0x1F;
    if (exp >= 0x18) bytes[i + 1] = 0x20;
  }
}

struct Result {
  double gelem_s = 0;
};

Result bench(const TypeKernels& k, const CpuKernelTable& t, uint32_t type, int64_t row, int rows, double ms) {
  uint64_t row_bytes = 0;
  if (!tensor_row_bytes(type, static_cast<uint64_t>(row), &row_bytes)) return {};
  std::mt19937 rng(42 + type);
  std::vector<uint8_t> w(static_cast<size_t>(row_bytes) * rows + 64);
  fill_weights(w, rng);
  if (type == static_cast<uint32_t>(TensorType::MXFP4)) {
    // The block's first byte is an E8M0 exponent: keep it near 2^0 (a random
    // one gives denormal, infinite or NaN scales and times the FPU's slow path).
    for (size_t b = 0; b + sizeof(BlockMXFP4) <= w.size(); b += sizeof(BlockMXFP4)) w[b] = static_cast<uint8_t>(118 + rng() % 16);
  }
  // The activation row in the type vec_dot expects, from random floats.
  const uint32_t at = static_cast<uint32_t>(k.vec_dot_type);
  const QuantizeRowFn quantize = t.quantize_act[at];
  uint64_t act_bytes = 0;
  if (!quantize || !tensor_row_bytes(at, static_cast<uint64_t>(row), &act_bytes)) return {};
  std::vector<float> x(static_cast<size_t>(row));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> a(static_cast<size_t>(act_bytes) + 64);
  quantize(x.data(), a.data(), row);
  volatile float sink = 0;
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    int64_t dots = 0;
    const double t0 = seconds_now();
    double t1 = t0;
    while ((t1 - t0) * 1000.0 < ms / 5) {
      for (int r = 0; r < rows; ++r) sink = sink + k.vec_dot(row, w.data() + static_cast<size_t>(r) * row_bytes, a.data());
      dots += rows;
      t1 = seconds_now();
    }
    best = std::max(best, static_cast<double>(dots) * row / (t1 - t0) / 1e9);
  }
  return {best};
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "usage: cpu-kernel-bench [--types a,b] [--row N (multiple of 256)] [--rows N] [--ms N]\n";
  tools::Args args;
  if (!args.parse(argc, argv, {"types", "row", "rows", "ms"}, {}, kUsage)) return 2;
  const std::string types_arg = args.get("types", "");
  const int64_t row = args.get_int("row", 2048);
  const int rows = static_cast<int>(args.get_int("rows", 256));
  const double ms = args.get_float("ms", 300);
  if (row <= 0 || row % 256 != 0 || rows <= 0 || rows > 1 << 16 || !(ms > 0)) tools::die(kUsage);
  std::vector<const CpuKernelTable*> tables = {&cpu_kernels_generic()};
  if (const CpuKernelTable* t = cpu_kernels_avx2()) tables.push_back(t);
  if (const CpuKernelTable* t = cpu_kernels_avx512()) tables.push_back(t);
  std::printf("%-12s %-10s %10s %12s\n", "table", "type", "Gelem/s", "ns per 256");
  for (const CpuKernelTable* t : tables) {
    for (uint32_t type = 0; type < kTensorTypeIdLimit; ++type) {
      const TypeKernels& k = t->types[type];
      if (!k.vec_dot) continue;
      const std::string name(tensor_type_name(type));
      if (!types_arg.empty() && ("," + types_arg + ",").find("," + name + ",") == std::string::npos) continue;
      const Result r = bench(k, *t, type, row, rows, ms);
      if (r.gelem_s <= 0) continue;
      std::printf("%-12s %-10s %10.2f %12.2f\n", t->name, name.c_str(), r.gelem_s, 256.0 / r.gelem_s);
    }
  }
  return 0;
}
