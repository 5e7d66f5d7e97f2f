// Test helpers for hostile model files: an edited copy of a fixture (its
// metadata and tensors copied through GgufWriter, with keys replaced, tensors
// swapped, or another general.alignment), a file rewritten in place the way
// `cp` does it, and running a check in a child process (for code paths that
// would kill the test process on failure: SIGBUS).
#pragma once
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <thread>

#include "artifact/gguf.h"
#include "artifact/gguf_writer.h"
#include "check.h"

namespace model_file_edit {

struct Edit {
  // Called after the source's metadata is copied: add_* replaces a key.
  std::function<void(guild::gguf::GgufWriter&)> meta;
  // Called per source tensor; return true when it wrote (or dropped) it.
  std::function<bool(guild::gguf::GgufWriter&, const guild::gguf::TensorInfo&)> tensor;
  uint32_t alignment = 0;  // 0: the source's general.alignment (or none)
};

inline std::string fixture(const std::string& name) { return check::fixtures_dir() + "/models/" + name; }

inline std::string tmp_path(const std::string& name) {
  const std::string dir = check::tmp_dir() + "/model_limits";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// Writes an edited copy of `src` (a path) to tmp_path(out); returns its path,
// or "" (and prints why) on failure.
inline std::string edited_copy(const std::string& src, const std::string& out, const Edit& e) {
  using namespace guild::gguf;
  std::string err;
  auto f = GgufFile::open(src, &err);
  if (!f) {
    std::printf("  cannot open %s: %s\n", src.c_str(), err.c_str());
    return "";
  }
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.add(key, GgufValue::from_meta(value));
  if (e.meta) e.meta(w);
  if (e.alignment != 0 && !w.set_alignment(e.alignment, &err)) {
    std::printf("  %s\n", err.c_str());
    return "";
  }
  for (const TensorInfo& t : f->tensors()) {
    if (e.tensor && e.tensor(w, t)) continue;
    if (!w.add_tensor_ref(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims),
                          std::span<const uint8_t>(t.data, static_cast<size_t>(t.nbytes)), &err)) {
      std::printf("  %s\n", err.c_str());
      return "";
    }
  }
  const std::string path = tmp_path(out);
  if (!w.write(path, &err)) {
    std::printf("  cannot write %s: %s\n", path.c_str(), err.c_str());
    return "";
  }
  return path;
}

// A new file with these bytes (replacing any).
inline bool write_file(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// Replaces the bytes of `path` in place, as `cp other path` does: open with
// O_TRUNC (the mapping's pages go away), then write `bytes`. The inode stays.
inline bool rewrite_in_place(const std::string& path, const std::string& bytes) {
  // File times are kept at the kernel's coarse clock: let it tick so the
  // modification time surely differs from the original write's.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done == bytes.size();
}

// Runs fn in a forked child. The child's report (what fn returns; "" = ok)
// comes back through a pipe; a child killed by a signal reports that.
inline std::string in_child(const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    const std::string report = fn();
    const std::string line = report.empty() ? "ok" : report;
    (void)!::write(fds[1], line.data(), line.size());
    ::close(fds[1]);
    std::fflush(stdout);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return "child killed by signal " + std::to_string(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child exited with status " + std::to_string(WEXITSTATUS(status));
  return got == "ok" ? "" : got;
}

}  // namespace model_file_edit
