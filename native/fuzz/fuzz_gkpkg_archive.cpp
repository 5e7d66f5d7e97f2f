// Fuzz target: the .gkpkg archive reader (packages/archive.h). The input is
// an archive; the harness rewrites its 32-byte trailer with the SHA-256 of
// the bytes before it, so that mutations get past the checksum (which random
// bytes never match) to the layout, manifest and library checks. A real
// archive is therefore a seed as it is. An accepted archive must be
// self-consistent: its manifest text is the bytes the header points at and
// parses to the manifest returned, and the library is the rest.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "verbose.h"
#include "memory_file.h"
#include "packages/archive.h"
#include "packages/sha256.h"

using namespace guild;

namespace {

constexpr size_t kHeader = 24, kTrailer = 32;

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= kHeader + kTrailer) {
    packages::Sha256 h;
    h.update(bytes.data(), size - kTrailer);
    h.finish(bytes.data() + size - kTrailer);
  }
  fuzz::MemoryFile file(bytes.data(), bytes.size());
  std::string err;
  const std::optional<packages::PackageArchive> a = packages::read_archive(file.path(), &err);
  if (!a) {
    FUZZ_LOG("%s", err.c_str());
    FUZZ_CHECK(!err.empty(), "an archive refused without a reason");
    return 0;
  }
  const uint64_t mlen = le(bytes.data() + 12, 4), llen = le(bytes.data() + 16, 8);
  FUZZ_CHECK(kHeader + mlen + llen + kTrailer == size, "accepted an archive whose sections do not fill it");
  FUZZ_CHECK(a->manifest_text.size() == mlen &&
                 std::memcmp(a->manifest_text.data(), bytes.data() + kHeader, mlen) == 0,
             "manifest text is not the header's section");
  FUZZ_CHECK(a->library.size() == llen && std::memcmp(a->library.data(), bytes.data() + kHeader + mlen, llen) == 0,
             "library is not the header's section");
  std::string perr;
  const auto m = packages::parse_manifest(a->manifest_text, &perr);
  FUZZ_CHECK(m.has_value() && m->name == a->manifest.name && m->sha256 == a->manifest.sha256,
             "the returned manifest is not the archive's");
  FUZZ_CHECK(packages::sha256_hex(a->library.data(), a->library.size()) == a->manifest.sha256,
             "accepted a library whose sha256 differs from the manifest's");
  FUZZ_LOG("archive of %s: %s", a->manifest.name.c_str(), packages::requirement_problem(a->manifest).c_str());
  return 0;
}
