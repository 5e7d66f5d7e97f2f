// An anonymous in-memory file (memfd) holding one fuzz input, with a path
// (/proc/self/fd/N) for the APIs that only open files by name (the GGUF
// reader, the model loader, the .gkpkg reader). A fresh inode per input: a
// GgufFile of an earlier input may still map its own, and rewriting that one
// in place would change the bytes under it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace guild::fuzz {

class MemoryFile {
 public:
  // Aborts when the kernel gives no memfd: a harness that cannot present its
  // input would otherwise report nothing while testing nothing.
  MemoryFile(const uint8_t* data, size_t size);
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace guild::fuzz
