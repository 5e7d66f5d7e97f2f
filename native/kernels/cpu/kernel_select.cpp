// Picks a CPU kernel table among the ones linked into this binary, for the
// kernel tests and tools that link the tables directly (guild_kernels):
// cpu-avx512 when the binary has it and the CPU supports AVX-512
// F/BW/VL/DQ + VNNI (with OS support for the ZMM state; its batch products use
// AMX-INT8 where cpu_amx_usable()), else cpu-avx2 when the CPU supports
// AVX2 + FMA + F16C, else cpu-generic. GUILD_FORCE_KERNELS=cpu-generic|
// cpu-avx2|cpu-avx512 overrides; an unknown or unavailable choice is ignored
// with one warning on stderr. The runtime links none of this: a model load
// takes its table from the kernel packages (packages/loader.h, whose
// provider scores follow the same order, and GUILD_FORCE_KERNELS picks among
// the loaded packages).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/cpu_features.h"
#include "core/kernel_table.h"

namespace guild {

#if !defined(GUILD_HAVE_AVX2_TABLE)
const CpuKernelTable* cpu_kernels_avx2() { return nullptr; }
#endif
#if !defined(GUILD_HAVE_AVX512_TABLE)
const CpuKernelTable* cpu_kernels_avx512() { return nullptr; }
#endif
namespace {

const CpuKernelTable& select_table() {
  const CpuKernelTable* avx2 = cpu_kernels_avx2();
  const CpuKernelTable* avx512 = cpu_kernels_avx512();
  const bool avx2_ok = avx2 != nullptr && cpu_features().has_avx2_table_isa();
  const bool avx512_ok = avx512 != nullptr && cpu_features().has_avx512_table_isa();
  const char* force = std::getenv("GUILD_FORCE_KERNELS");
  const CpuKernelTable& best = avx512_ok ? *avx512 : avx2_ok ? *avx2 : cpu_kernels_generic();

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
  if (std::strcmp(force, "cpu-avx512") == 0) {
    if (avx512_ok) return *avx512;
    std::fprintf(stderr, "guild: GUILD_FORCE_KERNELS=cpu-avx512 ignored: %s; using %s\n",
                 avx512 == nullptr ? "this binary was built without the AVX-512 table"
                                   : "this CPU lacks AVX-512 F/BW/VL/DQ + VNNI",
                 best.name);
    return best;
  }
  std::fprintf(stderr,
               "guild: GUILD_FORCE_KERNELS=%s ignored (expected cpu-generic, cpu-avx2 or cpu-avx512); using %s\n",
               force, best.name);
  return best;
}

}  // namespace

const CpuKernelTable& cpu_kernels_best() {
  static const CpuKernelTable& chosen = select_table();
  return chosen;
}

}  // namespace guild
