// Tiny kernel package libraries for the install-check tests (test_packages_*,
// the TypeScript package tests): each misbehaves in one way a hostile or
// broken package could. Built once per behaviour (CMakeLists.txt); the
// package name is GUILD_PROVIDER_NAME ("test-ok", "test-query-segv", ...).
//
// Every library's ELF constructor leaves a trace of the process it ran in,
// so a test can tell that it never ran in the installing process: it sets
// GUILD_TEST_PROVIDER_RAN in that process's environment and, when
// $GUILD_TEST_PROVIDER_MARKS names a directory, creates <dir>/<name>.<pid>.
//
//   ok             a valid provider (a CPU table with only the float helpers)
//                  whose constructor also prints to stdout
//   ctor-exit      the constructor calls exit(7)
//   ctor-loop      the constructor never returns
//   query-segv     query() dereferences a bad pointer (SIGSEGV)
//   query-garbage  query() returns an info struct of nonsense
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/kernel_table.h"
#include "packages/provider_abi.h"

#ifndef GUILD_PROVIDER_NAME
#error "GUILD_PROVIDER_NAME must be defined"
#endif

namespace {

void leave_trace() {
  ::setenv("GUILD_TEST_PROVIDER_RAN", GUILD_PROVIDER_NAME, 1);
  const char* dir = std::getenv("GUILD_TEST_PROVIDER_MARKS");
  if (!dir || !*dir) return;
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s.%ld", dir, GUILD_PROVIDER_NAME, static_cast<long>(::getpid()));
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

__attribute__((constructor)) void on_load() {
  leave_trace();
#if defined(GUILD_TEST_PROVIDER_OK)
  std::printf("test-ok: constructor output that must not reach the installer\n");
  std::fflush(stdout);
#elif defined(GUILD_TEST_PROVIDER_CTOR_EXIT)
  std::exit(7);
#elif defined(GUILD_TEST_PROVIDER_CTOR_LOOP)
  for (;;) ::sleep(1);
#endif
}

float dot_f32(int64_t n, const float* a, const float* b) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy_f32(int64_t n, float a, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
void fp16_to_f32_row(const uint16_t*, float* dst, int64_t n) { std::memset(dst, 0, static_cast<size_t>(n) * sizeof(float)); }
void f32_to_fp16_row(const float*, uint16_t* dst, int64_t n) { std::memset(dst, 0, static_cast<size_t>(n) * sizeof(uint16_t)); }

guild::CpuKernelTable make_table() {
  guild::CpuKernelTable t;
  t.name = GUILD_PROVIDER_NAME;
  t.dot_f32 = dot_f32;
  t.axpy_f32 = axpy_f32;
  t.fp16_to_f32_row = fp16_to_f32_row;
  t.f32_to_fp16_row = f32_to_fp16_row;
  return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const guild_kernel_provider_info* guild_kernel_provider_query(void) {
#if defined(GUILD_TEST_PROVIDER_QUERY_SEGV)
  // A store through a bad pointer the compiler cannot see through (volatile).
  volatile uintptr_t bad = 16;
  *reinterpret_cast<volatile int*>(bad) = 1;
#endif
#if defined(GUILD_TEST_PROVIDER_QUERY_GARBAGE)
  static const unsigned char noise[] = {0xff, 0xfe, 0x00};
  static guild_kernel_provider_info garbage{};
  garbage.struct_size = sizeof(guild_kernel_provider_info) + 4096;
  garbage.abi_version = 0xdeadbeef;
  garbage.name = reinterpret_cast<const char*>(noise);
  garbage.version = nullptr;
  garbage.score = -12345;
  garbage.cpu_table_size = 3;
  garbage.tensor_type_limit = 0xffffffff;
  return &garbage;
#else
  static guild_kernel_provider_info info{};
  info.struct_size = sizeof(guild_kernel_provider_info);
  info.abi_version = GUILD_KERNEL_PROVIDER_ABI_VERSION;
  info.name = GUILD_PROVIDER_NAME;
  info.version = "1.0.0";
  info.description = "a test provider";
  info.score = 1;
  info.cpu_table_size = sizeof(guild::CpuKernelTable);
  info.tensor_type_limit = guild::kTensorTypeIdLimit;
  return &info;
#endif
}

extern "C" __attribute__((visibility("default"))) const guild_cpu_kernel_table* guild_kernel_provider_cpu_table(void) {
  static const guild::CpuKernelTable table = make_table();
  return reinterpret_cast<const guild_cpu_kernel_table*>(&table);
}
