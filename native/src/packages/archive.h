// The .gkpkg archive: one kernel package (manifest + library) in one file
// (docs/PACKAGES.md, ".gkpkg archive"). Little-endian layout:
//   0   8   magic "GUILDPKG"
//   8   4   format version (1)
//   12  4   manifest length M (1 .. 1 MiB)
//   16  8   library length L (1 .. 2 GiB)
//   24  M   manifest (.gkmetadata JSON, UTF-8)
//   24+M L  library bytes
//   end 32  SHA-256 of bytes [0, 24+M+L)
#pragma once
#include <optional>
#include <string>

#include "packages/manifest.h"

namespace guild::packages {

inline constexpr char kArchiveMagic[8] = {'G', 'U', 'I', 'L', 'D', 'P', 'K', 'G'};
inline constexpr uint32_t kArchiveFormatVersion = 1;

struct PackageArchive {
  std::string manifest_text;
  Manifest manifest;
  std::string library;  // the library's bytes
};

// Reads and checks an archive: layout, trailer digest, manifest, and the
// library's sha256 against the manifest. nullopt and *error on any problem.
std::optional<PackageArchive> read_archive(const std::string& file, std::string* error);

// Packs a package directory (one *.gkmetadata plus its library; the library's
// sha256 must match the manifest) into out_file (written atomically).
bool pack_package_dir(const std::string& package_dir, const std::string& out_file, std::string* error);

// Writes bytes to path atomically (temporary file in the same directory,
// fsync, rename).
bool write_file_atomic(const std::string& path, const std::string& bytes, std::string* error);

}  // namespace guild::packages
