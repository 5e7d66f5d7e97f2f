// The entry point of a built-in kernel package library (cpu-generic, cpu-avx2,
// cpu-avx512): the two symbols of the provider ABI (packages/provider_abi.h)
// over one of the kernel tables in native/kernels/cpu. Compiled once per
// package with GUILD_PROVIDER_KIND / _NAME / _VERSION set by
// native/src/packages/CMakeLists.txt; everything else in the library is hidden
// (-fvisibility=hidden plus a version script that exports only these two).
#include "core/cpu_features.h"
#include "core/kernel_table.h"
#include "packages/provider_abi.h"
#include "packages/providers/provider_identity.h"

#define GUILD_PROVIDER_GENERIC 0
#define GUILD_PROVIDER_AVX2 1
#define GUILD_PROVIDER_AVX512 2

#if !defined(GUILD_PROVIDER_KIND) || !defined(GUILD_PROVIDER_NAME) || !defined(GUILD_PROVIDER_VERSION)
#error "GUILD_PROVIDER_KIND, GUILD_PROVIDER_NAME and GUILD_PROVIDER_VERSION must be defined"
#endif

namespace {

const guild::CpuKernelTable* table() {
#if GUILD_PROVIDER_KIND == GUILD_PROVIDER_GENERIC
  return &guild::cpu_kernels_generic();
#elif GUILD_PROVIDER_KIND == GUILD_PROVIDER_AVX2
  return guild::cpu_kernels_avx2();
#elif GUILD_PROVIDER_KIND == GUILD_PROVIDER_AVX512
  return guild::cpu_kernels_avx512();
#else
#error "unknown GUILD_PROVIDER_KIND"
#endif
}

// Score from the CPU's feature bits (docs/PACKAGES.md, "Priority"): 0 when the
// table's ISA is missing; more capable ISAs score higher.
int32_t score() {
  const guild::CpuFeatures& f = guild::cpu_features();
#if GUILD_PROVIDER_KIND == GUILD_PROVIDER_GENERIC
  (void)f;
  return 1;
#elif GUILD_PROVIDER_KIND == GUILD_PROVIDER_AVX2
  if (!f.has_avx2_table_isa()) return 0;
  return 20 + (f.bmi2 ? 1 : 0);
#else
  if (!f.has_avx512_table_isa()) return 0;
  return 40 + (f.avx512bf16 ? 1 : 0);
#endif
}

guild_kernel_provider_info make_info() {
  guild_kernel_provider_info info = guild::packages::provider_identity();
  info.score = table() != nullptr ? score() : 0;
  info.cpu_table_size = sizeof(guild::CpuKernelTable);
  info.tensor_type_limit = guild::kTensorTypeIdLimit;
  return info;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const guild_kernel_provider_info* guild_kernel_provider_query(void) {
  static const guild_kernel_provider_info info = make_info();
  return &info;
}

extern "C" __attribute__((visibility("default"))) const guild_cpu_kernel_table* guild_kernel_provider_cpu_table(void) {
  return reinterpret_cast<const guild_cpu_kernel_table*>(table());
}
