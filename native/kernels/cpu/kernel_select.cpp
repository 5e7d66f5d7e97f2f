// Picks the CPU kernel table for this process: cpu-avx2 when the binary has
// it and the CPU supports AVX2 + FMA + F16C (with OS support), else
// cpu-generic. GUILD_FORCE_KERNELS=cpu-generic|cpu-avx2 overrides; an
// unknown or unavailable choice is ignored with one warning on stderr.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/cpu_features.h"
#include "core/kernel_table.h"

namespace guild {

#if !defined(GUILD_HAVE_AVX2_TABLE)
const CpuKernelTable* cpu_kernels_avx2() { return nullptr; }
#endif

namespace {

const CpuKernelTable& select_table() {
  const CpuKernelTable* avx2 = cpu_kernels_avx2();
  const bool avx2_ok = avx2 != nullptr && cpu_features().has_avx2_table_isa();
  const CpuKernelTable& best = avx2_ok ? *avx2 : cpu_kernels_generic();

  const char* force = std::getenv("GUILD_FORCE_KERNELS");
  if (force == nullptr || *force == 0) return best;
  if (std::strcmp(force, "cpu-generic") == 0) return cpu_kernels_generic();
  if (std::strcmp(force, "cpu-avx2") == 0) {
    if (avx2_ok) return *avx2;
    std::fprintf(stderr, "guild: GUILD_FORCE_KERNELS=cpu-avx2 ignored: %s; using %s\n",
                 avx2 == nullptr ? "this binary was built without the AVX2 table"
                                 : "this CPU lacks AVX2+FMA+F16C",
                 best.name);
    return best;
  }
  std::fprintf(stderr,
               "guild: GUILD_FORCE_KERNELS=%s ignored (expected cpu-generic or cpu-avx2); using %s\n",
               force, best.name);
  return best;
}

}  // namespace

const CpuKernelTable& cpu_kernels_best() {
  static const CpuKernelTable& chosen = select_table();
  return chosen;
}

}  // namespace guild
