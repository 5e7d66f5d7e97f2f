// Picks the CPU kernel table for this process: cpu-amx when the binary has it,
// the CPU has AMX-TILE + AMX-INT8 and the OS grants the tile permission; else
// cpu-avx512 when the CPU supports AVX-512 F/BW/VL/DQ + VNNI (with OS support
// for the ZMM state); else cpu-avx2 when the CPU supports AVX2 + FMA + F16C;
// else cpu-generic. GUILD_FORCE_KERNELS=cpu-generic|cpu-avx2|cpu-avx512|cpu-amx
// overrides; an unknown or unavailable choice is ignored with one warning on
// stderr.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/cpu_features.h"
#include "core/kernel_table.h"

namespace guild {

#if !defined(GUILD_HAVE_AVX2_TABLE)
const CpuKernelTable* cpu_kernels_avx2() { return nullptr; }
#endif
#if !defined(GUILD_HAVE_AVX512_TABLE)
const CpuKernelTable* cpu_kernels_avx512() { return nullptr; }
#endif
#if !defined(GUILD_HAVE_AMX_TABLE)
const CpuKernelTable* cpu_kernels_amx() { return nullptr; }
#endif

bool amx_enable() {
  static const bool granted = [] {
    if (!cpu_features().has_amx_table_isa()) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kArchReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXfeatureXtiledata = 18;     // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

namespace {

const CpuKernelTable& select_table() {
  const CpuKernelTable* avx2 = cpu_kernels_avx2();
  const CpuKernelTable* avx512 = cpu_kernels_avx512();
  const CpuKernelTable* amx = cpu_kernels_amx();
  const bool avx2_ok = avx2 != nullptr && cpu_features().has_avx2_table_isa();
  const bool avx512_ok = avx512 != nullptr && cpu_features().has_avx512_table_isa();
  const char* force = std::getenv("GUILD_FORCE_KERNELS");
  const bool want_amx = force == nullptr || *force == 0 || std::strcmp(force, "cpu-amx") == 0;
  const bool amx_ok = want_amx && amx != nullptr && amx_enable();
  const CpuKernelTable& best = amx_ok ? *amx : avx512_ok ? *avx512 : avx2_ok ? *avx2 : cpu_kernels_generic();

  if (force == nullptr || *force == 0) return best;
  if (std::strcmp(force, "cpu-amx") == 0) {
    if (amx_ok) return *amx;
    std::fprintf(stderr, "guild: GUILD_FORCE_KERNELS=cpu-amx ignored: %s; using %s\n",
                 amx == nullptr ? "this binary was built without the AMX table"
                                : "this CPU (or OS) does not provide AMX-INT8",
                 best.name);
    return best;
  }
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
               "guild: GUILD_FORCE_KERNELS=%s ignored (expected cpu-generic, cpu-avx2, cpu-avx512 or cpu-amx); using %s\n",
               force, best.name);
  return best;
}

}  // namespace

const CpuKernelTable& cpu_kernels_best() {
  static const CpuKernelTable& chosen = select_table();
  return chosen;
}

}  // namespace guild
