#include "core/cpu_features.h"

#include <sched.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define GUILD_X86 1
#endif

namespace guild {
namespace {

#if GUILD_X86
struct Regs { uint32_t a = 0, b = 0, c = 0, d = 0; };

Regs cpuid(uint32_t leaf, uint32_t sub) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

// xgetbv(0) without needing -mxsave on this translation unit.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

inline bool bit(uint32_t v, int n) { return (v >> n) & 1u; }

void detect_isa(CpuFeatures& f) {
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf == 0) return;
  Regs v = cpuid(0, 0);
  std::memcpy(f.vendor + 0, &v.b, 4);
  std::memcpy(f.vendor + 4, &v.d, 4);
  std::memcpy(f.vendor + 8, &v.c, 4);
  f.vendor[12] = 0;

  const Regs l1 = cpuid(1, 0);
  f.sse3 = bit(l1.c, 0);
  f.ssse3 = bit(l1.c, 9);
  f.sse41 = bit(l1.c, 19);
  f.sse42 = bit(l1.c, 20);
  const bool cpu_fma = bit(l1.c, 12);
  const bool cpu_avx = bit(l1.c, 28);
  const bool cpu_f16c = bit(l1.c, 29);
  f.os_xsave = bit(l1.c, 27);  // OSXSAVE: the OS enabled xgetbv

  uint64_t xcr0 = 0;
  if (f.os_xsave) xcr0 = read_xcr0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool zmm_ok = ymm_ok && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_ok = (xcr0 & 0x60000) == 0x60000;      // XTILECFG + XTILEDATA

  f.avx = cpu_avx && ymm_ok;
  f.fma = cpu_fma && ymm_ok;
  f.f16c = cpu_f16c && ymm_ok;

  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.bmi2 = bit(l7.b, 8);
    f.avx2 = bit(l7.b, 5) && ymm_ok;
    f.avx512f = bit(l7.b, 16) && zmm_ok;
    f.avx512dq = bit(l7.b, 17) && zmm_ok;
    f.avx512bw = bit(l7.b, 30) && zmm_ok;
    f.avx512vl = bit(l7.b, 31) && zmm_ok;
    f.avx512vnni = bit(l7.c, 11) && zmm_ok;
    f.amx_bf16 = bit(l7.d, 22) && amx_ok;
    f.amx_tile = bit(l7.d, 24) && amx_ok;
    f.amx_int8 = bit(l7.d, 25) && amx_ok;
    if (l7.a >= 1) {
      const Regs l71 = cpuid(7, 1);
      f.avx_vnni = bit(l71.a, 4) && ymm_ok;
      f.avx512bf16 = bit(l71.a, 5) && zmm_ok;
    }
  }

  const uint32_t max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i + 0, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    const char* p = brand;
    while (*p == ' ') ++p;
    std::snprintf(f.brand, sizeof f.brand, "%s", p);
    for (int n = static_cast<int>(std::strlen(f.brand)); n > 0 && f.brand[n - 1] == ' '; --n)
      f.brand[n - 1] = 0;
  }
}
#else
void detect_isa(CpuFeatures&) {}
#endif

bool read_int_file(const char* path, int* out) {
  FILE* fp = std::fopen(path, "r");
  if (!fp) return false;
  const bool ok = std::fscanf(fp, "%d", out) == 1;
  std::fclose(fp);
  return ok;
}

void detect_cores(CpuFeatures& f) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  f.logical_online = online > 0 ? static_cast<int>(online) : 1;

  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    f.logical_usable = f.logical_online;
    f.physical_usable = f.logical_online;
    return;
  }
  f.logical_usable = CPU_COUNT(&set);
  if (f.logical_usable < 1) f.logical_usable = 1;

  std::set<std::pair<int, int>> cores;
  bool topology_ok = true;
  for (int cpu = 0; cpu < CPU_SETSIZE && topology_ok; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    char path[128];
    int core = -1, pkg = -1;
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
    topology_ok = read_int_file(path, &core);
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    if (topology_ok) topology_ok = read_int_file(path, &pkg);
    if (topology_ok) cores.insert({pkg, core});
  }
  f.physical_usable = topology_ok && !cores.empty() ? static_cast<int>(cores.size()) : f.logical_usable;
}

CpuFeatures detect() {
  CpuFeatures f;
  detect_isa(f);
  detect_cores(f);
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_feature_flags() {
  const CpuFeatures& f = cpu_features();
  const std::pair<bool, const char*> flags[] = {
      {f.sse3, "sse3"},         {f.ssse3, "ssse3"},         {f.sse41, "sse4.1"},
      {f.sse42, "sse4.2"},      {f.avx, "avx"},             {f.avx2, "avx2"},
      {f.fma, "fma"},           {f.f16c, "f16c"},           {f.bmi2, "bmi2"},
      {f.avx512f, "avx512f"},   {f.avx512bw, "avx512bw"},   {f.avx512dq, "avx512dq"},
      {f.avx512vl, "avx512vl"}, {f.avx512vnni, "avx512vnni"}, {f.avx512bf16, "avx512bf16"},
      {f.avx_vnni, "avx_vnni"}, {f.amx_tile, "amx_tile"},   {f.amx_int8, "amx_int8"},
      {f.amx_bf16, "amx_bf16"},
  };
  std::string s;
  for (const auto& [on, name] : flags) {
    if (!on) continue;
    if (!s.empty()) s += ' ';
    s += name;
  }
  return s;
}

std::string cpu_features_description() {
  const CpuFeatures& f = cpu_features();
  std::string s = f.brand[0] ? f.brand : (f.vendor[0] ? f.vendor : "unknown cpu");
  char buf[96];
  std::snprintf(buf, sizeof buf, "; %d logical / %d physical usable (%d online); ", f.logical_usable,
                f.physical_usable, f.logical_online);
  s += buf;
  const std::string flags = cpu_feature_flags();
  s += flags.empty() ? "no SIMD extensions" : flags;
  return s;
}

bool cpu_amx_usable() {
  static const bool usable = [] {
    const char* off = std::getenv("GUILD_DISABLE_AMX");
    if (off != nullptr && *off != 0 && std::strcmp(off, "0") != 0) return false;
    if (!cpu_features().has_amx_table_isa()) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kArchReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXfeatureXtiledata = 18;     // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return usable;
}

}  // namespace guild
