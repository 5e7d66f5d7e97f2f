#include "packages/probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/json.h"
#include "packages/runtime_location.h"

extern char** environ;

namespace guild::packages {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    default: return nullptr;
  }
}

std::string seconds_text(int ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms / 1000) + "." + std::to_string((ms % 1000) / 100) + " s";
}

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  bool attr_ok = false, actions_ok = false;
  ~SpawnSetup() {
    if (attr_ok) posix_spawnattr_destroy(&attr);
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
  }
};

struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

// Kills the child's process group (the probe and anything the library
// started) and the child itself.
void kill_all(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

// Waits (without reaping) until the child has exited or the deadline passed.
bool wait_exited(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    siginfo_t info{};
    const int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return true;  // ECHILD: nothing left to wait for (reap() says what happened)
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// At most 512 bytes, control characters (a newline from dlerror) as spaces.
std::string one_line(const std::string& s) {
  std::string out = s.substr(0, 512);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out;
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // namespace

std::string package_probe_path(std::string* looked) {
  std::string where;
  if (const char* env = std::getenv("GUILD_PACKAGE_PROBE")) {
    if (looked) *looked = *env ? std::string(env) + " ($GUILD_PACKAGE_PROBE)" : "nowhere ($GUILD_PACKAGE_PROBE is empty)";
    return *env && is_executable_file(env) ? std::string(env) : std::string();
  }
  if (const fs::path bin = runtime_binary_path(); !bin.empty()) {
    const fs::path next_to = bin.parent_path() / kProbeExecutableName;
    where = next_to.string();
    if (is_executable_file(next_to)) return next_to.string();
  }
#if defined(GUILD_BUILD_TREE_PROBE)
  // A binary of (or linked in) the build tree that built the probe: tests and tools.
  where += (where.empty() ? "" : ", ") + std::string(GUILD_BUILD_TREE_PROBE);
  if (is_executable_file(GUILD_BUILD_TREE_PROBE)) return GUILD_BUILD_TREE_PROBE;
#endif
  if (looked) *looked = where.empty() ? "nowhere (the runtime's location is unknown)" : where;
  return "";
}

bool probe_library(const std::string& probe, const std::string& library_path, int timeout_ms, ProviderFacts* facts,
                   std::string* error) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *error = std::string("cannot start the package check: pipe: ") + std::strerror(errno);
    return false;
  }
  Fd read_end{pipe_fds[0]}, write_end{pipe_fds[1]};

  SpawnSetup s;
  s.actions_ok = posix_spawn_file_actions_init(&s.actions) == 0;
  s.attr_ok = posix_spawnattr_init(&s.attr) == 0;
  if (!s.actions_ok || !s.attr_ok) { *error = "cannot start the package check: out of memory"; return false; }
  // stdin and stderr: /dev/null (the library's chatter goes nowhere); stdout: the answer.
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&s.actions, write_end.fd, 1);
  posix_spawn_file_actions_addopen(&s.actions, 2, "/dev/null", O_WRONLY, 0);
  // Its own process group (so a hang is killed with whatever it started), no
  // signal blocked or ignored as the calling thread's might be.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig = 1; sig < 32; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaddset(&defaults, sig);
  posix_spawnattr_setpgroup(&s.attr, 0);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setsigdefault(&s.attr, &defaults);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string arg0 = probe, arg1 = library_path;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, probe.c_str(), &s.actions, &s.attr, argv, environ);
  ::close(write_end.fd);
  write_end.fd = -1;
  if (rc != 0) {
    *error = "cannot start the package probe " + probe + ": " + std::strerror(rc);
    return false;
  }

  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string out;
  bool timed_out = false, too_long = false;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) { timed_out = true; break; }
    pollfd p{read_end.fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (n == 0) continue;  // the loop's deadline check decides
    const ssize_t got = ::read(read_end.fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) break;  // EOF: the probe (and everything holding the pipe) is done writing
    out.append(buf, static_cast<size_t>(got));
    if (out.size() > kProbeMaxOutput) { too_long = true; break; }
  }
  if (!timed_out && !too_long && !wait_exited(pid, deadline)) timed_out = true;
  // Whatever is left of its process group goes (before the child is reaped,
  // so the group's id cannot have been reused).
  kill_all(pid);
  const int status = reap(pid);

  const std::string timeout = seconds_text(timeout_ms);
  if (timed_out) { *error = "the package library did not answer within " + timeout + " while being checked (stopped)"; return false; }
  if (too_long) { *error = "the package check wrote more than " + std::to_string(kProbeMaxOutput / 1024) + " KiB; not a Guild kernel provider"; return false; }
  if (status < 0) { *error = "the package check's process was lost"; return false; }
  if (WIFSIGNALED(status)) {
    const char* name = signal_name(WTERMSIG(status));
    *error = "the package library crashed while being checked (" +
             (name ? std::string(name) : "signal " + std::to_string(WTERMSIG(status))) + ")";
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "the package library ended the check with exit status " + std::to_string(WEXITSTATUS(status));
    return false;
  }
  if (out.empty()) { *error = "the package library ended the check without an answer"; return false; }

  json::ParseOptions strict;
  strict.reject_duplicate_keys = true;
  strict.max_depth = 8;
  std::string perr;
  auto doc = json::parse(out, &perr, strict);
  if (!doc || !doc->is_object() || (*doc)["schema"].as_string() != kProbeSchema) {
    *error = "the package check gave an unreadable answer" + (perr.empty() ? std::string() : " (" + perr + ")");
    return false;
  }
  const json::Value* answer_error = doc->find("error");
  const json::Value* answer_facts = doc->find("facts");
  if (doc->size() != 2 || (answer_error == nullptr) == (answer_facts == nullptr)) {
    *error = "the package check gave an unreadable answer (expected schema plus error or facts)";
    return false;
  }
  if (answer_error) {
    *error = answer_error->is_string() ? one_line(answer_error->as_string()) : std::string();
    if (error->empty()) *error = "the package check failed without saying why";
    return false;
  }
  std::string ferr;
  auto f = ProviderFacts::from_json(*answer_facts, &ferr);
  if (!f) { *error = "the package check gave an unreadable answer (" + ferr + ")"; return false; }
  *facts = std::move(*f);
  return true;
}

}  // namespace guild::packages
