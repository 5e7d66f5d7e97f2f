#include "packages/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "packages/sha256.h"

namespace guild::packages {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kMaxManifest = 1u << 20;
constexpr uint64_t kMaxLibrary = 2ull << 30;
constexpr size_t kHeader = 24;

void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const std::string& s, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[off + i])) << (8 * i);
  return v;
}

// A regular file of at most max_bytes (a FIFO or a device would block or never end).
bool read_whole(const std::string& path, std::string* out, std::string* error, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) { *error = path + ": cannot open: " + std::strerror(errno); return false; }
  struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) { *error = path + ": cannot stat: " + std::strerror(errno); return false; }
  if (!S_ISREG(st.st_mode)) { *error = path + ": cannot open: not a regular file"; return false; }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    *error = path + ": too large (" + std::to_string(st.st_size) + " bytes, at most " + std::to_string(max_bytes) + ")";
    return false;
  }
  out->clear();
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { *error = path + ": read error: " + std::strerror(errno); return false; }
    if (n == 0) break;  // shrank while read: the size check below tells
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return true;
}

}  // namespace

bool write_file_atomic(const std::string& path, const std::string& bytes, std::string* error) {
  // A name no other writer uses, even another thread of this process.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    // Left by a dead process that had this pid (this process's own names never repeat).
    ::unlink(tmp.c_str());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) { *error = tmp + ": cannot create: " + std::strerror(errno); return false; }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = tmp + ": write failed: " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    *error = tmp + ": cannot flush: " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  // The old file stays whole until this rename replaces it in one step.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": cannot replace: " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  // The rename itself lasts only once the directory is on disk too.
  const std::string parent = fs::path(path).parent_path().string();
  const int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

std::optional<PackageArchive> read_archive(const std::string& file, std::string* error) {
  std::string err;
  std::string bytes;
  auto bad = [&](const std::string& msg) -> std::optional<PackageArchive> {
    *error = file + ": " + msg;
    return std::nullopt;
  };
  if (!read_whole(file, &bytes, &err, kHeader + kMaxManifest + kMaxLibrary + 32)) { *error = err; return std::nullopt; }
  if (bytes.size() < kHeader + 32 || std::memcmp(bytes.data(), kArchiveMagic, 8) != 0)
    return bad("not a .gkpkg archive (bad magic or too short)");
  const uint64_t version = get_le(bytes, 8, 4);
  if (version != kArchiveFormatVersion)
    return bad("archive format version " + std::to_string(version) + " is not supported (expected " +
               std::to_string(kArchiveFormatVersion) + ")");
  const uint64_t mlen = get_le(bytes, 12, 4), llen = get_le(bytes, 16, 8);
  if (mlen == 0 || mlen > kMaxManifest || llen == 0 || llen > kMaxLibrary)
    return bad("corrupt archive: implausible section lengths");
  if (bytes.size() != kHeader + mlen + llen + 32)
    return bad("corrupt archive: size " + std::to_string(bytes.size()) + " does not match its header (" +
               std::to_string(kHeader + mlen + llen + 32) + "); truncated?");
  const std::string want = to_hex(reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size() - 32, 32);
  const std::string got = sha256_hex(bytes.data(), bytes.size() - 32);
  if (want != got) return bad("corrupt archive: checksum mismatch (trailer " + want.substr(0, 12) + "…, content " + got.substr(0, 12) + "…)");
  PackageArchive a;
  a.manifest_text = bytes.substr(kHeader, mlen);
  auto m = parse_manifest(a.manifest_text, &err);
  if (!m) return bad("invalid manifest: " + err);
  a.manifest = std::move(*m);
  a.library = bytes.substr(kHeader + mlen, llen);
  const std::string lib_sha = sha256_hex(a.library.data(), a.library.size());
  if (lib_sha != a.manifest.sha256)
    return bad("checksum mismatch: library " + a.manifest.library + " has sha256 " + lib_sha + ", the manifest says " + a.manifest.sha256);
  return a;
}

bool pack_package_dir(const std::string& package_dir, const std::string& out_file, std::string* error) {
  std::error_code ec;
  std::string manifest_path;
  for (const auto& e : fs::directory_iterator(package_dir, ec)) {
    if (e.path().extension() == kManifestSuffix) {
      if (!manifest_path.empty()) { *error = package_dir + ": more than one " + kManifestSuffix + " file"; return false; }
      manifest_path = e.path().string();
    }
  }
  if (ec) { *error = package_dir + ": " + ec.message(); return false; }
  if (manifest_path.empty()) { *error = package_dir + ": no " + std::string(kManifestSuffix) + " manifest"; return false; }
  std::string manifest_text, library, err;
  if (!read_whole(manifest_path, &manifest_text, error, kMaxManifest)) return false;
  auto m = parse_manifest(manifest_text, &err);
  if (!m) { *error = manifest_path + ": " + err; return false; }
  const std::string lib_path = (fs::path(package_dir) / m->library).string();
  if (!read_whole(lib_path, &library, error, kMaxLibrary)) return false;
  const std::string lib_sha = sha256_hex(library.data(), library.size());
  if (lib_sha != m->sha256) {
    *error = lib_path + ": sha256 " + lib_sha + " does not match the manifest's " + m->sha256;
    return false;
  }
  std::string out(kArchiveMagic, 8);
  put_le(out, kArchiveFormatVersion, 4);
  put_le(out, manifest_text.size(), 4);
  put_le(out, library.size(), 8);
  out += manifest_text;
  out += library;
  uint8_t digest[32];
  Sha256 h;
  h.update(out.data(), out.size());
  h.finish(digest);
  out.append(reinterpret_cast<const char*>(digest), 32);
  return write_file_atomic(out_file, out, error);
}

}  // namespace guild::packages
