#include "artifact/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>

namespace guild::gguf {
namespace {

// Everything the handler reads is a lock-free atomic in static storage: it
// may run on any thread at any moment, including while a slot is changing.
struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0 = free
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

// More than any realistic number of open model shards; beyond it a mapping
// is simply not guarded.
constexpr int kSlots = 4096;
Slot g_slots[kSlots];
std::atomic<int> g_used{0};  // slots [0, g_used) may be taken: the handler scans only those
std::mutex g_claim;          // serialises claiming (never taken by the handler)

std::once_flag g_install_once;
struct sigaction g_previous {};
uintptr_t g_page_size = 4096;

// Hands a fault that is not ours to whoever handled SIGBUS before us, or to
// the default action (the process dies, as it would have without us).
void chain(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action. A hardware fault re-executes the faulting instruction
  // after we return and then dies by SIGBUS; a signal sent by kill() would
  // not come back, so raise it again.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const uintptr_t addr = info ? reinterpret_cast<uintptr_t>(info->si_addr) : 0;
  const int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; addr != 0 && i < used; ++i) {
    Slot& s = g_slots[i];
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= s.end.load(std::memory_order_acquire)) continue;
    // A zero page over the one that is gone. The raw system call: nothing
    // between us and the kernel (allocators, interceptors) runs in the handler.
    const uintptr_t page = addr & ~(g_page_size - 1);
    const long r = syscall(SYS_mmap, page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r == static_cast<long>(page)) {
      s.faulted.store(true, std::memory_order_release);
      errno = saved_errno;
      return;
    }
    break;  // could not patch it: not survivable
  }
  errno = saved_errno;
  chain(sig, info, context);
}

void install_handler() {
  const long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0) g_page_size = static_cast<uintptr_t>(ps);
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

int guard_mapping(const void* base, size_t bytes) {
  if (base == nullptr || bytes == 0) return -1;
  std::call_once(g_install_once, install_handler);
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> lock(g_claim);
  const int used = g_used.load(std::memory_order_relaxed);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.begin.load(std::memory_order_relaxed) != 0) continue;
    s.faulted.store(false, std::memory_order_relaxed);
    s.end.store(b + bytes, std::memory_order_relaxed);
    s.begin.store(b, std::memory_order_release);  // published last: the handler sees a complete slot
    if (i >= used) g_used.store(i + 1, std::memory_order_release);
    return i;
  }
  return -1;
}

void unguard_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_claim);  // no claim of this slot in between
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].end.store(0, std::memory_order_release);
}

bool mapping_faulted(int slot) {
  return slot >= 0 && slot < kSlots && g_slots[slot].faulted.load(std::memory_order_acquire);
}

}  // namespace guild::gguf
