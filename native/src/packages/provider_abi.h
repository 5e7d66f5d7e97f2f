/* Kernel package provider ABI (docs/PACKAGES.md, "Provider ABI").
 *
 * A kernel package's library is a shared object that exports exactly two C
 * symbols:
 *
 *   const guild_kernel_provider_info* guild_kernel_provider_query(void);
 *   const guild_cpu_kernel_table*     guild_kernel_provider_cpu_table(void);
 *
 * The host dlopens the library (RTLD_NOW | RTLD_LOCAL) only after checking the
 * library's sha256 against the package manifest, calls query(), refuses the
 * library unless abi_version, cpu_table_size and tensor_type_limit match its
 * own, and uses it only when score > 0. cpu_table() returns the provider's
 * CPU kernel table: the bytes of a guild::CpuKernelTable
 * (native/src/core/kernel_table.h; plain C types: const char*, enum values
 * stored as int32, function pointers) with the layout of this ABI version.
 * Both calls are cheap, never fail, and the returned pointers stay valid until
 * the library is closed. The library must not rely on the host's symbols.
 *
 * Version rule: any change of CpuKernelTable's layout or of a kernel
 * function's contract bumps GUILD_KERNEL_PROVIDER_ABI_VERSION; the size and
 * type-limit fields are a second line of defence against a stale build. */
#ifndef GUILD_PACKAGES_PROVIDER_ABI_H
#define GUILD_PACKAGES_PROVIDER_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GUILD_KERNEL_PROVIDER_ABI_VERSION 1
#define GUILD_KERNEL_PROVIDER_QUERY_SYMBOL "guild_kernel_provider_query"
#define GUILD_KERNEL_PROVIDER_CPU_TABLE_SYMBOL "guild_kernel_provider_cpu_table"

typedef struct guild_kernel_provider_info {
  uint32_t struct_size;        /* sizeof(guild_kernel_provider_info) of the provider */
  uint32_t abi_version;        /* GUILD_KERNEL_PROVIDER_ABI_VERSION the provider was built with */
  const char* name;            /* "cpu-avx2": must equal the manifest's name */
  const char* version;         /* "1.0.0": must equal the manifest's version */
  const char* description;     /* one line */
  /* How well this provider suits the running CPU, computed from the CPU's
   * feature bits when query() is first called: 0 = unsupported here (never
   * used), otherwise higher is better (cpu-generic 1, cpu-avx2 20, ...). */
  int32_t score;
  uint32_t cpu_table_size;     /* sizeof(guild::CpuKernelTable) the provider was compiled with; 0 = no CPU table */
  uint32_t tensor_type_limit;  /* guild::kTensorTypeIdLimit the provider was compiled with */
} guild_kernel_provider_info;

/* Opaque in C: a guild::CpuKernelTable (see above). */
typedef struct guild_cpu_kernel_table guild_cpu_kernel_table;

typedef const guild_kernel_provider_info* (*guild_kernel_provider_query_fn)(void);
typedef const guild_cpu_kernel_table* (*guild_kernel_provider_cpu_table_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* GUILD_PACKAGES_PROVIDER_ABI_H */
