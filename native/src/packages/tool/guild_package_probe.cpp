// guild-package-probe LIBRARY: the install-time provider-ABI check of a
// kernel package library, run as a short-lived child process so that the
// library's code (ELF constructors, query()) never runs in the app or the CLI
// before the user enabled the package (docs/PACKAGES.md, "Install checks";
// the parent side is packages/probe.cpp).
//
// It dlopens LIBRARY (RTLD_NOW | RTLD_LOCAL), reads what query() and
// cpu_table() say (packages/provider_check.h), closes the library (its
// destructors run here too) and writes one JSON object to stdout:
//   {"schema": "guild.package-probe/1", "facts": {...}}   it is a provider
//   {"schema": "guild.package-probe/1", "error": "..."}   it is not
// and exits 0. Anything else (a crash, another exit, no answer, a hang) is
// the library's doing, and the parent reports it.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/json.h"
#include "packages/probe.h"
#include "packages/provider_check.h"

namespace {

// The longest string reported (a name, a dlerror text): the answer must fit the parent's cap.
constexpr size_t kMaxString = 512;

// Closes every inherited descriptor above stderr: the library sees none of the parent's files.
void close_inherited_fds() {
#if defined(SYS_close_range)
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void answer(int fd, const char* key, guild::json::Value value) {
  guild::json::Value v = guild::json::Value::object();
  v.set("schema", guild::packages::kProbeSchema);
  v.set(key, std::move(value));
  const bool ok = write_all(fd, guild::json::serialize(v) + "\n");
  ::close(fd);
  std::exit(ok ? 0 : 3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] != '/') {
    std::fprintf(stderr, "usage: guild-package-probe /absolute/path/to/library.so\n");
    return 2;
  }
  close_inherited_fds();
  // No core file from a crashing library; gone with the parent; bounded CPU time.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const rlimit cpu{30, 30};
  ::setrlimit(RLIMIT_CPU, &cpu);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 4;  // the parent is already gone
  // The answer goes to a private copy of stdout; what the library prints to
  // stdout goes where stderr goes (nowhere).
  const int out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || ::dup2(2, 1) < 0) return 5;

  ::dlerror();
  void* handle = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    std::string why = e ? e : "unknown dlopen error";
    // dlerror starts with the path the parent already knows.
    if (why.rfind(std::string(argv[1]) + ": ", 0) == 0) why = why.substr(std::string(argv[1]).size() + 2);
    answer(out, "error", "cannot be opened as a shared library: " + why.substr(0, kMaxString));
  }
  guild::packages::ProviderFacts facts;
  const std::string problem = guild::packages::read_provider_facts(handle, &facts, nullptr, kMaxString);
  ::dlclose(handle);
  if (!problem.empty()) answer(out, "error", problem);
  answer(out, "facts", facts.to_json());
}
