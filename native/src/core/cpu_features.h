// What the running x86-64 CPU (and OS) supports, from cpuid + xgetbv, and how
// many cores this process may use. Detected once, on first use; thread-safe.
#pragma once
#include <string>

namespace guild {

struct CpuFeatures {
  // Instruction sets. AVX-class bits are only set when the OS also saves the
  // matching register state (XCR0 via xgetbv): YMM for AVX/AVX2/FMA/F16C/
  // AVX-VNNI, opmask+ZMM for AVX-512, TILECFG+TILEDATA for AMX.
  bool sse3 = false, ssse3 = false, sse41 = false, sse42 = false;
  bool avx = false, avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_xsave = false;  // OSXSAVE set and xgetbv usable

  // Cores. logical_online: online CPUs of the machine; logical_usable: CPUs in
  // this process's affinity mask; physical_usable: distinct (package, core)
  // pairs among the usable CPUs per /sys topology (falls back to
  // logical_usable when /sys is not readable).
  int logical_online = 1;
  int logical_usable = 1;
  int physical_usable = 1;

  char vendor[13] = {};  // "GenuineIntel", "AuthenticAMD", ...
  char brand[49] = {};   // processor brand string, trimmed

  // AVX2 + FMA + F16C: what the cpu-avx2 kernel table needs.
  bool has_avx2_table_isa() const { return avx2 && fma && f16c; }
  // What the cpu-avx512 table needs: the AVX2 table's ISA plus AVX-512
  // F/BW/VL/DQ and VNNI (vpdpbusd / vpdpwssd).
  bool has_avx512_table_isa() const {
    return has_avx2_table_isa() && bmi2 && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni;
  }
  // The AVX-512 table's ISA plus AMX-TILE and AMX-INT8 (tile state enabled in
  // XCR0; the process must still be granted the tile data, cpu_amx_usable()).
  bool has_amx_table_isa() const { return has_avx512_table_isa() && amx_tile && amx_int8; }
};

// Detected once (function-local static) and cached.
const CpuFeatures& cpu_features();

// Whether this process may use the AMX tile unit (cpu-avx512's batch
// products): the CPU has AMX-TILE + AMX-INT8 with the tile state enabled, the
// OS granted the tile-data permission (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM),
// asked once, on the first call), and GUILD_DISABLE_AMX is not set to a
// non-empty value other than "0". Thread-safe; the answer never changes.
bool cpu_amx_usable();

// The detected ISA extensions, space-separated: "sse3 ssse3 ... avx2 fma f16c ...".
std::string cpu_feature_flags();

// One short line: "<brand>; <L> logical / <P> physical usable (<O> online); <flags>"
// (the flags after the last "; " are exactly cpu_feature_flags()).
std::string cpu_features_description();

}  // namespace guild
