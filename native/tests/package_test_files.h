// Files for the package tests: a fresh directory per test, raw writes, and a
// .gkpkg archive built by hand (docs/PACKAGES.md layout) so that tests can
// craft bad ones the packer would refuse to write.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "check.h"
#include "packages/sha256.h"

namespace package_test_files {

// <tmp>/<prefix>-<tag>-<pid>, emptied.
inline std::string fresh_dir(const std::string& prefix, const std::string& tag) {
  const std::string d = check::tmp_dir() + "/" + prefix + "-" + tag + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// magic, version 1, manifest and library sizes, the two parts, SHA-256 of all before it.
inline std::string make_archive(const std::string& manifest, const std::string& library) {
  std::string out("GUILDPKG", 8);
  auto le = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  le(1, 4);
  le(manifest.size(), 4);
  le(library.size(), 8);
  out += manifest;
  out += library;
  guild::packages::Sha256 h;
  h.update(out.data(), out.size());
  uint8_t d[32];
  h.finish(d);
  out.append(reinterpret_cast<const char*>(d), 32);
  return out;
}

}  // namespace package_test_files
