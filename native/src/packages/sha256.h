// SHA-256 (FIPS 180-4), written for kernel packages: a package's manifest
// names the sha256 of its library, checked before the library is opened.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace guild::packages {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  // Finishes the digest; the object must be reset() before reuse.
  void finish(uint8_t out[32]);
  void reset();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string to_hex(const uint8_t* bytes, size_t n);
// Lower-case hex digest of a byte range.
std::string sha256_hex(const void* data, size_t n);
// Lower-case hex digest of a file's bytes; "" and *error when it cannot be read.
std::string sha256_file_hex(const std::string& path, std::string* error);

}  // namespace guild::packages
