#include "packages/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "packages/archive.h"
#include "packages/elf_check.h"
#include "packages/loader.h"
#include "packages/probe.h"
#include "packages/runtime_location.h"
#include "runtime/leases.h"

namespace guild::packages {
namespace fs = std::filesystem;
namespace {

constexpr const char* kStateSchema = "guild.packages-state/1";
constexpr uint64_t kMaxStateBytes = 64ull << 20;
constexpr uint64_t kMaxLeaseRecordBytes = 64 << 10;
// What a state file that cannot be read means, and the way out.
constexpr const char* kStateUndecided =
    "which packages are enabled cannot be decided: fix it, or set it aside with `guild packages reset-state`";

// Advisory lock on <dir>/.lock for the lifetime of the object.
class DirLock {
 public:
  DirLock(const std::string& dir, bool exclusive) {
    fd_ = ::open((fs::path(dir) / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) { error_ = dir + "/.lock: cannot open: " + std::strerror(errno); return; }
    while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno == EINTR) continue;
      error_ = dir + "/.lock: cannot lock: " + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~DirLock() {
    if (fd_ >= 0) { ::flock(fd_, LOCK_UN); ::close(fd_); }
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

bool all_digits(const std::string& s, size_t max_len) {
  return !s.empty() && s.size() <= max_len && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string state_path(const std::string& dir) { return (fs::path(dir) / "state.json").string(); }

bool process_alive(long long pid) {
  if (pid <= 0 || pid > INT32_MAX) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Reads a regular file of at most max bytes; false and *why (no path) otherwise.
// ENOENT is reported through *missing when given.
bool read_small_file(const std::string& path, uint64_t max, std::string* out, std::string* why, bool* missing = nullptr) {
  if (missing) *missing = false;
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    if (errno == ENOENT && missing) *missing = true;
    *why = std::string("cannot be read (") + std::strerror(errno) + ")";
    return false;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) { *why = std::string("cannot be read (") + std::strerror(errno) + ")"; return false; }
  if (!S_ISREG(st.st_mode)) { *why = "is not a regular file"; return false; }
  if (static_cast<uint64_t>(st.st_size) > max) { *why = "is larger than " + std::to_string(max >> 10) + " KiB"; return false; }
  out->assign(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(f.fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { *why = std::string("cannot be read (") + std::strerror(errno) + ")"; return false; }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return true;
}

json::ParseOptions strict_json() {
  json::ParseOptions o;
  o.reject_duplicate_keys = true;
  o.max_depth = 16;
  return o;
}

// The state file of dir: Ok with the defaults when there is none; Io when it
// cannot be read; Corrupt when it does not parse as a state file. Never
// "defaults" for a file that exists.
PackageStatus load_state_file(const std::string& dir, PackageState* state, std::string* error) {
  *state = {};
  const std::string path = state_path(dir);
  std::string bytes, why;
  bool missing = false;
  if (!read_small_file(path, kMaxStateBytes, &bytes, &why, &missing)) {
    if (missing) return PackageStatus::Ok;
    *error = path + " " + why + "; " + kStateUndecided;
    return PackageStatus::Io;
  }
  std::string perr;
  auto doc = json::parse(bytes, &perr, strict_json());
  if (!doc) {
    *error = path + " is corrupt (" + (bytes.empty() ? std::string("empty") : perr) + "); " + kStateUndecided;
    return PackageStatus::Corrupt;
  }
  auto parsed = PackageState::from_json(*doc, &perr);
  if (!parsed) {
    *error = path + " is not a package state file (" + perr + "); " + kStateUndecided;
    return PackageStatus::Corrupt;
  }
  *state = std::move(*parsed);
  return PackageStatus::Ok;
}

bool save_state_file(const std::string& dir, const PackageState& s, std::string* error) {
  return write_file_atomic(state_path(dir), json::serialize(s.to_json(), true) + "\n", error);
}

bool ensure_dir(const std::string& dir, std::string* error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) { *error = dir + ": cannot create: " + ec.message(); return false; }
  return true;
}

// A unique suffix for this process's work names: "<pid>-<n>".
std::string work_suffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

// Work directories of a state change: ".<kind>-<pid>-<n>-<name>" (kind:
// staging, old, removing). The pid says whether its owner is still at work.
std::string work_dir_name(const char* kind, const std::string& name) {
  return "." + std::string(kind) + "-" + work_suffix() + "-" + name;
}

// The owner pid and package name of a work directory name (this format, or
// the earlier ".<kind>-<name>-<pid>"); false for any other name.
bool parse_work_dir_name(const std::string& fname, std::string* kind, long long* pid, std::string* name) {
  for (const char* k : {"staging", "old", "removing"}) {
    const std::string prefix = "." + std::string(k) + "-";
    if (fname.rfind(prefix, 0) != 0) continue;
    *kind = k;
    const std::string rest = fname.substr(prefix.size());
    // ".<kind>-<pid>-<n>-<name>"
    size_t a = rest.find('-');
    size_t b = a == std::string::npos ? a : rest.find('-', a + 1);
    auto digits = [](const std::string& s) { return all_digits(s, 11); };
    if (b != std::string::npos && digits(rest.substr(0, a)) && digits(rest.substr(a + 1, b - a - 1))) {
      *pid = std::stoll(rest.substr(0, a));
      *name = rest.substr(b + 1);
      return valid_package_name(*name);
    }
    // ".<kind>-<name>-<pid>"
    const size_t last = rest.rfind('-');
    if (last == std::string::npos || !digits(rest.substr(last + 1))) return false;
    *pid = std::stoll(rest.substr(last + 1));
    *name = rest.substr(0, last);
    return valid_package_name(*name);
  }
  return false;
}

// The owner pid of a write_file_atomic temporary ("<file>.tmp.<pid>[.<n>]"), or -1.
long long temp_file_owner(const std::string& fname) {
  const size_t at = fname.rfind(".tmp.");
  if (at == std::string::npos) return -1;
  const std::string rest = fname.substr(at + 5);
  const std::string pid = rest.substr(0, rest.find('.'));
  if (!all_digits(pid, 11)) return -1;
  return std::stoll(pid);
}

// What processes that died in the middle of a state change left behind
// (their staging, old and removing directories, temporary files), removed
// under the exclusive lock. A replaced package's old copy whose replacement
// never arrived is put back.
void remove_stale_work(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string fname = e.path().filename().string();
    std::string kind, name;
    long long pid = -1;
    std::error_code e2;
    if (parse_work_dir_name(fname, &kind, &pid, &name)) {
      // Still at work (this process's other threads included).
      if (pid == ::getpid() || process_alive(pid)) continue;
      const fs::path final_dir = fs::path(dir) / name;
      if (kind == "old" && !fs::exists(final_dir, e2)) {
        fs::rename(e.path(), final_dir, e2);
        if (!e2) continue;
      }
      fs::remove_all(e.path(), e2);
      continue;
    }
    const long long owner = temp_file_owner(fname);
    if (owner > 0 && owner != ::getpid() && !process_alive(owner) && e.is_regular_file(e2)) fs::remove(e.path(), e2);
  }
}

// Removes a work directory when it goes out of scope, unless released.
class WorkDir {
 public:
  explicit WorkDir(fs::path p) : path_(std::move(p)) {}
  ~WorkDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

// One live process's record in <dir>/.leases.
struct LeaseRecord {
  std::string package;  // "" = unreadable: it holds every package
  std::string holder;   // "model x.gguf (process 1234)"
};

// The lease record file names: "<pid>-<n>.json"; pid 0 for any other name.
long long lease_record_pid(const std::string& fname) {
  const size_t dash = fname.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 11 || fname.size() < dash + 7 ||
      fname.compare(fname.size() - 5, 5, ".json") != 0)
    return 0;
  const std::string pid = fname.substr(0, dash), n = fname.substr(dash + 1, fname.size() - 5 - dash - 1);
  return all_digits(pid, 11) && all_digits(n, 19) ? std::stoll(pid) : 0;
}

// The records of other live processes; stale ones (dead processes) are
// removed. False and *error when the records cannot be read at all.
bool scan_lease_records(const std::string& dir, std::vector<LeaseRecord>* out, std::string* error) {
  out->clear();
  if (const std::string why = leases_dir_problem(dir, false); !why.empty()) { *error = why; return false; }
  const fs::path leases = fs::path(dir) / ".leases";
  std::error_code ec;
  if (!fs::exists(leases, ec)) return true;  // nobody has recorded a use yet
  auto unlistable = [&](const std::error_code& e) {
    *error = leases.string() + " cannot be listed (" + e.message() + "); package leases cannot be checked";
    return false;
  };
  fs::directory_iterator it(leases, ec);
  if (ec) return unlistable(ec);
  const long long self = ::getpid();
  for (; it != fs::directory_iterator(); ) {
    const fs::path path = it->path();
    it.increment(ec);
    if (ec) return unlistable(ec);
    const std::string fname = path.filename().string();
    std::error_code e2;
    const long long pid = lease_record_pid(fname);
    if (pid == 0) {
      // A record being written (write_file_atomic's temporary) or left by a dead writer.
      const long long owner = temp_file_owner(fname);
      if (owner > 0 && owner != self && !process_alive(owner)) fs::remove(path, e2);
      continue;
    }
    if (pid == self) continue;  // this process: LeaseRegistry answers
    if (!process_alive(pid)) { fs::remove(path, e2); continue; }
    std::string bytes, why;
    LeaseRecord r;
    r.holder = "an unreadable lease record " + path.string() + " (process " + std::to_string(pid) + ")";
    if (read_small_file(path.string(), kMaxLeaseRecordBytes, &bytes, &why)) {
      auto doc = json::parse(bytes, nullptr, strict_json());
      if (doc && doc->is_object() && doc->size() == 3 && (*doc)["pid"].is_int() && (*doc)["pid"].as_int() == pid &&
          (*doc)["package"].is_string() && valid_package_name((*doc)["package"].as_string()) && (*doc)["holder"].is_string()) {
        r.package = (*doc)["package"].as_string();
        r.holder = (*doc)["holder"].as_string() + " (process " + std::to_string(pid) + ")";
      }
    }
    out->push_back(std::move(r));
  }
  return true;
}

// This process's holders of `name`, then the other processes' records for it.
std::vector<std::string> holders_of(const std::string& name, const std::vector<LeaseRecord>& records) {
  std::vector<std::string> out;
  for (const LeaseHolder& h : LeaseRegistry::instance().holders(name)) out.push_back(h.holder);
  for (const LeaseRecord& r : records)
    if (r.package.empty() || r.package == name) out.push_back(r.holder);
  return out;
}

// state_known: false when the state file could not be read (nothing is then enabled).
PackageEntry read_entry(const fs::path& pkg_dir, PackageSource source, const PackageState& state, bool state_known,
                        const std::vector<LeaseRecord>& records) {
  PackageEntry e;
  e.name = pkg_dir.filename().string();
  e.path = pkg_dir.string();
  e.source = source;
  auto it = state.enabled.find(e.name);
  e.enabled = state_known && (it == state.enabled.end() || it->second);
  e.leased_by = holders_of(e.name, records);
  const fs::path manifest_path = pkg_dir / (e.name + kManifestSuffix);
  std::string err;
  auto m = read_manifest_file(manifest_path.string(), &err);
  if (!m) { e.error = err; e.incompatible_reason = "invalid package: " + err; return e; }
  e.manifest = std::move(*m);
  if (e.manifest.name != e.name) {
    e.error = manifest_path.string() + ": manifest names '" + e.manifest.name + "' but the directory is '" + e.name + "'";
    e.incompatible_reason = "invalid package: " + e.error;
    return e;
  }
  std::error_code ec;
  if (!fs::is_regular_file(pkg_dir / e.manifest.library, ec)) {
    e.error = (pkg_dir / e.manifest.library).string() + ": library missing";
    e.incompatible_reason = "invalid package: " + e.error;
    return e;
  }
  e.valid = true;
  e.incompatible_reason = requirement_problem(e.manifest);
  e.compatible = e.incompatible_reason.empty();
  return e;
}

// The package directories of one layer (names not starting with '.').
std::vector<fs::path> package_dirs(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    const std::string fname = d.path().filename().string();
    std::error_code ec2;
    if (fname.empty() || fname[0] == '.' || !d.is_directory(ec2)) continue;
    out.push_back(d.path());
  }
  return out;
}

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec);
}

// "state.json.set-aside-20250101T120000Z" (with "-2", "-3", … when taken).
std::string set_aside_name(const std::string& dir) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const std::string base = state_path(dir) + ".set-aside-" + stamp;
  std::string candidate = base;
  std::error_code ec;
  for (int n = 2; fs::symlink_status(candidate, ec).type() != fs::file_type::not_found; ++n) candidate = base + "-" + std::to_string(n);
  return candidate;
}

}  // namespace

const char* package_source_name(PackageSource s) { return s == PackageSource::Bundled ? "bundled" : "user"; }

std::string bundled_packages_dir() {
  if (const char* env = std::getenv("GUILD_BUNDLED_PACKAGES_DIR")) return env;  // "" turns the layer off
  std::error_code ec;
  if (const fs::path bin = runtime_binary_path(); !bin.empty()) {
    for (const fs::path& candidate : {bin.parent_path() / "packages", bin.parent_path().parent_path() / "packages"})
      if (fs::is_directory(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
#if defined(GUILD_BUILD_TREE_PACKAGES_DIR)
  // A binary run from (or linked in) the build tree that wrote the packages:
  // tests and tools under build/native/..., which sit elsewhere.
  if (fs::is_directory(GUILD_BUILD_TREE_PACKAGES_DIR, ec)) return GUILD_BUILD_TREE_PACKAGES_DIR;
#endif
  return "";
}

const char* package_status_name(PackageStatus s) {
  switch (s) {
    case PackageStatus::Ok: return "ok";
    case PackageStatus::NotFound: return "not_found";
    case PackageStatus::InvalidArgument: return "invalid_argument";
    case PackageStatus::Busy: return "busy";
    case PackageStatus::Io: return "io";
    case PackageStatus::Corrupt: return "corrupt";
    case PackageStatus::Incompatible: return "incompatible";
  }
  return "unknown";
}

json::Value PackageState::to_json() const {
  json::Value v = json::Value::object();
  v.set("schema", kStateSchema);
  json::Value pk = json::Value::object();
  for (const auto& [name, on] : enabled) {
    json::Value p = json::Value::object();
    p.set("enabled", on);
    pk.set(name, std::move(p));
  }
  v.set("packages", std::move(pk));
  json::Value pins_v = json::Value::object();
  for (const auto& [model, m] : pins) {
    json::Value mv = json::Value::object();
    for (const auto& [name, ver] : m) mv.set(name, ver);
    pins_v.set(model, std::move(mv));
  }
  v.set("pins", std::move(pins_v));
  return v;
}

std::optional<PackageState> PackageState::from_json(const json::Value& v, std::string* error) {
  auto bad = [&](const std::string& msg) -> std::optional<PackageState> {
    *error = msg;
    return std::nullopt;
  };
  auto shown = [](const std::string& s) { return s.size() > 64 ? s.substr(0, 64) + "..." : s; };
  if (!v.is_object()) return bad("not a JSON object");
  for (const auto& [key, value] : v.as_object())
    if (key != "schema" && key != "packages" && key != "pins") return bad("unknown field '" + shown(key) + "'");
  if (v["schema"].as_string() != kStateSchema) return bad(std::string("schema: expected \"") + kStateSchema + "\"");
  PackageState s;
  if (const json::Value* packages = v.find("packages")) {
    if (!packages->is_object()) return bad("packages: not an object");
    for (const auto& [name, p] : packages->as_object()) {
      if (!valid_package_name(name)) return bad("packages: '" + shown(name) + "' is not a package name");
      if (!p.is_object() || p.size() != 1 || !p["enabled"].is_bool()) return bad("packages." + name + ": expected {\"enabled\": true|false}");
      s.enabled[name] = p["enabled"].as_bool();
    }
  }
  if (const json::Value* pins = v.find("pins")) {
    if (!pins->is_object()) return bad("pins: not an object");
    for (const auto& [model, m] : pins->as_object()) {
      if (model.empty() || !m.is_object()) return bad("pins." + shown(model) + ": not an object");
      for (const auto& [name, ver] : m.as_object()) {
        if (!valid_package_name(name)) return bad("pins." + shown(model) + ": '" + shown(name) + "' is not a package name");
        if (!ver.is_string() || ver.as_string().empty()) return bad("pins." + shown(model) + "." + name + ": not a version string");
        s.pins[model][name] = ver.as_string();
      }
    }
  }
  return s;
}

std::string leases_dir_problem(const std::string& dir, bool for_writing) {
  const fs::path leases = fs::path(dir) / ".leases";
  const std::string tail = for_writing ? "; remove it so that a lease can be recorded" : "; package leases cannot be checked: remove it";
  struct stat st {};
  if (::lstat(leases.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";  // nobody recorded a use yet; a writer makes it
    return leases.string() + " cannot be examined (" + std::strerror(errno) + ")" +
           (for_writing ? "; a lease cannot be recorded" : "; package leases cannot be checked");
  }
  if (S_ISLNK(st.st_mode)) return leases.string() + " is a symbolic link, not a directory" + tail;
  if (!S_ISDIR(st.st_mode)) {
    const char* kind = S_ISREG(st.st_mode) ? "a regular file" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
    return leases.string() + " is " + kind + ", not a directory" + tail;
  }
  if (::access(leases.c_str(), R_OK | X_OK) != 0)
    return leases.string() + " cannot be read (" + std::strerror(errno) + "); package leases cannot be checked";
  if (for_writing && ::access(leases.c_str(), W_OK | X_OK) != 0)
    return leases.string() + " is not writable (" + std::strerror(errno) + "); a lease cannot be recorded";
  return "";
}

bool package_holders(const std::string& dir, const std::string& name, std::vector<std::string>* holders, std::string* error) {
  std::vector<LeaseRecord> records;
  if (!scan_lease_records(dir, &records, error)) return false;
  *holders = holders_of(name, records);
  return true;
}

PackageStatus lease_conflict(const std::string& dir, const std::string& name, const char* action, std::string* error) {
  std::vector<std::string> holders;
  std::string why;
  if (!package_holders(dir, name, &holders, &why)) {
    *error = "cannot " + std::string(action) + " " + name + ": " + why;  // why: "…/.leases is …; package leases cannot be checked…"
    return PackageStatus::Io;
  }
  if (holders.empty()) return PackageStatus::Ok;
  std::string who;
  for (const auto& h : holders) who += (who.empty() ? "" : ", ") + h;
  *error = "cannot " + std::string(action) + " " + name + ": it is in use by " + who + "; unload them first";
  return PackageStatus::Busy;
}

PackageStore::PackageStore(std::string dir) : PackageStore(std::move(dir), bundled_packages_dir()) {}

PackageStore::PackageStore(std::string dir, std::string bundled_dir) : dir_(std::move(dir)), bundled_dir_(std::move(bundled_dir)) {
  if (same_directory(dir_, bundled_dir_)) bundled_dir_.clear();
}

bool PackageStore::is_bundled_only(const std::string& name) const {
  std::error_code ec;
  return !bundled_dir_.empty() && !fs::is_directory(fs::path(dir_) / name, ec) &&
         fs::is_directory(fs::path(bundled_dir_) / name, ec);
}

std::string PackageStore::default_dir() {
  if (const char* env = std::getenv("GUILD_PACKAGES_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return (fs::path(xdg) / "guild" / "packages").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".local" / "share" / "guild" / "packages").string();
}

PackageStatus PackageStore::read_state(PackageState* state, std::string* error) const {
  *state = {};
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return PackageStatus::Ok;
  DirLock lock(dir_, false);  // a read-only directory is still read
  return load_state_file(dir_, state, error);
}

std::vector<PackageEntry> PackageStore::list(PackageState* state_out, StoreProblems* problems) const {
  StoreProblems local;
  if (!problems) problems = &local;
  *problems = {};
  std::vector<PackageEntry> out;
  PackageState state;
  std::vector<LeaseRecord> records;
  std::error_code ec;
  bool state_known = true;
  const bool user_dir = fs::is_directory(dir_, ec);
  std::optional<DirLock> lock;
  if (user_dir) {
    lock.emplace(dir_, false);  // a read-only directory is still listed
    std::string err;
    problems->state_status = load_state_file(dir_, &state, &err);
    if (problems->state_status != PackageStatus::Ok) {
      problems->state_error = err;
      state_known = false;
    }
    err.clear();
    if (!scan_lease_records(dir_, &records, &err)) problems->leases_error = err;
    for (const fs::path& d : package_dirs(dir_)) out.push_back(read_entry(d, PackageSource::User, state, state_known, records));
  }
  for (const fs::path& d : package_dirs(bundled_dir_)) {
    const std::string name = d.filename().string();
    auto user = std::find_if(out.begin(), out.end(), [&](const PackageEntry& e) { return e.name == name; });
    if (user != out.end()) {
      user->shadows = d.string();
      continue;
    }
    out.push_back(read_entry(d, PackageSource::Bundled, state, state_known, records));
  }
  std::sort(out.begin(), out.end(), [](const PackageEntry& a, const PackageEntry& b) { return a.name < b.name; });
  if (state_out) *state_out = state;
  return out;
}

json::Value PackageStore::list_json() const {
  PackageState state;
  StoreProblems problems;
  const auto entries = list(&state, &problems);
  json::Value root = json::Value::object();
  root.set("schema", "guild.packages-list/1");
  root.set("dir", dir_);
  std::error_code ec;
  root.set("exists", fs::is_directory(dir_, ec));
  root.set("bundled_dir", bundled_dir_.empty() ? json::Value() : json::Value(bundled_dir_));
  if (problems.state_error.empty()) {
    root.set("state_error", json::Value());
  } else {
    json::Value se = json::Value::object();
    se.set("status", package_status_name(problems.state_status));
    se.set("message", problems.state_error);
    root.set("state_error", std::move(se));
  }
  root.set("leases_error", problems.leases_error.empty() ? json::Value() : json::Value(problems.leases_error));
  json::Value arr = json::Value::array();
  for (const PackageEntry& e : entries) {
    json::Value v = json::Value::object();
    v.set("name", e.name);
    v.set("path", e.path);
    v.set("source", package_source_name(e.source));
    v.set("shadows", e.shadows.empty() ? json::Value() : json::Value(e.shadows));
    v.set("valid", e.valid);
    v.set("version", e.valid ? json::Value(e.manifest.version) : json::Value());
    v.set("description", e.valid ? json::Value(e.manifest.description) : json::Value());
    v.set("enabled", e.enabled);
    v.set("compatible", e.compatible);
    v.set("reason", e.compatible ? json::Value() : json::Value(e.incompatible_reason));
    json::Value leased = json::Value::array();
    for (const auto& h : e.leased_by) leased.push_back(h);
    v.set("pinned_by", std::move(leased));
    json::Value pins = json::Value::array();
    for (const auto& [model, m] : state.pins) {
      auto it = m.find(e.name);
      if (it == m.end()) continue;
      json::Value p = json::Value::object();
      p.set("model", model);
      p.set("version", it->second);
      pins.push_back(std::move(p));
    }
    v.set("model_pins", std::move(pins));
    if (e.valid) v.set("manifest", e.manifest.to_json());
    arr.push_back(std::move(v));
  }
  root.set("packages", std::move(arr));
  return root;
}

PackageStatus PackageStore::set_enabled(const std::string& name, bool enabled, std::string* error) {
  if (!valid_package_name(name)) { *error = "'" + name + "' is not a valid package name"; return PackageStatus::InvalidArgument; }
  std::error_code ec;
  // A bundled package is enabled or disabled through the user's state file,
  // so the user's directory is made when it does not exist yet.
  const bool bundled = !bundled_dir_.empty() && fs::is_directory(fs::path(bundled_dir_) / name, ec);
  if (!bundled && !fs::is_directory(fs::path(dir_) / name, ec)) {
    *error = "no package " + name + " in " + dir_ + (bundled_dir_.empty() ? "" : " or the bundled packages (" + bundled_dir_ + ")");
    return PackageStatus::NotFound;
  }
  if (!ensure_dir(dir_, error)) return PackageStatus::Io;
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  remove_stale_work(dir_);
  if (!bundled && !fs::is_directory(fs::path(dir_) / name, ec)) { *error = "no package " + name + " in " + dir_; return PackageStatus::NotFound; }
  PackageState state;
  if (const PackageStatus st = load_state_file(dir_, &state, error); st != PackageStatus::Ok) return st;
  if (!enabled) {
    if (const PackageStatus st = lease_conflict(dir_, name, "disable", error); st != PackageStatus::Ok) return st;
  }
  state.enabled[name] = enabled;
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  return PackageStatus::Ok;
}

PackageStatus PackageStore::enable(const std::string& name, std::string* error) { return set_enabled(name, true, error); }
PackageStatus PackageStore::disable(const std::string& name, std::string* error) { return set_enabled(name, false, error); }

PackageStatus PackageStore::install(const std::string& archive_file, std::string* error, std::string* installed_name) {
  // 1. Files only: the archive's layout and digests, the strict manifest, the
  // requirements, the library's ELF header and exported symbols.
  std::string err;
  auto archive = read_archive(archive_file, &err);
  if (!archive) { *error = err; return err.find("cannot open") != std::string::npos ? PackageStatus::Io : PackageStatus::Corrupt; }
  const Manifest& m = archive->manifest;
  const std::string refused = archive_file + ": package " + m.name + " " + m.version + " cannot be installed: ";
  if (const std::string why = requirement_problem(m); !why.empty()) { *error = refused + why; return PackageStatus::Incompatible; }
  if (const std::string why = elf_library_problem(archive->library); !why.empty()) {
    *error = refused + m.library + ": " + why;
    return PackageStatus::Incompatible;
  }
  std::string looked;
  const std::string probe = package_probe_path(&looked);
  if (probe.empty()) {
    // Never checked in-process instead: that is what the probe is for.
    *error = refused + "the package checker " + kProbeExecutableName + " is missing (looked for " + looked +
             "); reinstall or rebuild Guild";
    return PackageStatus::Io;
  }
  if (!ensure_dir(dir_, error)) return PackageStatus::Io;
  {
    // Before any work: a state file that cannot be read would refuse the install at the end anyway.
    PackageState state;
    if (const PackageStatus st = read_state(&state, error); st != PackageStatus::Ok) return st;
  }

  // 2. The provider ABI, from the library's own answer, in a child process
  // (outside the lock: a slow check must not hold up the app's other
  // package operations). The staging directory goes on every path.
  WorkDir staging(fs::path(dir_) / work_dir_name("staging", m.name));
  std::error_code ec;
  if (!fs::create_directory(staging.path(), ec) || ec) {
    *error = staging.path().string() + ": cannot create: " + (ec ? ec.message() : "it exists");
    staging.release();  // not ours
    return PackageStatus::Io;
  }
  const fs::path staged_library = fs::absolute(staging.path() / m.library, ec);
  if (!write_file_atomic(staged_library.string(), archive->library, error) ||
      !write_file_atomic((staging.path() / (m.name + kManifestSuffix)).string(), archive->manifest_text, error))
    return PackageStatus::Io;
  ProviderFacts facts;
  if (!probe_library(probe, staged_library.string(), kProbeTimeoutMs, &facts, &err)) {
    // The user knows the library by its name, not by our staging path.
    for (size_t at; (at = err.find(staged_library.string())) != std::string::npos;) err.replace(at, staged_library.string().size(), m.library);
    *error = refused + m.library + ": " + err;
    return PackageStatus::Incompatible;
  }
  if (const std::string why = provider_facts_problem(facts, m); !why.empty()) {
    *error = refused + m.library + ": " + why;
    return PackageStatus::Incompatible;
  }

  // 3. Swap it in under the lock, unless what it replaces is in use.
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  remove_stale_work(dir_);
  PackageState state;
  if (const PackageStatus st = load_state_file(dir_, &state, error); st != PackageStatus::Ok) return st;
  const fs::path final_dir = fs::path(dir_) / m.name;
  if (fs::exists(final_dir, ec)) {
    if (const PackageStatus st = lease_conflict(dir_, m.name, "replace", error); st != PackageStatus::Ok) return st;
  }
  WorkDir old(fs::path(dir_) / work_dir_name("old", m.name));
  if (fs::exists(final_dir, ec)) {
    fs::rename(final_dir, old.path(), ec);
    if (ec) { *error = final_dir.string() + ": cannot replace: " + ec.message(); return PackageStatus::Io; }
  }
  fs::rename(staging.path(), final_dir, ec);
  if (ec) {
    std::error_code e2;
    if (fs::exists(old.path(), e2)) {
      fs::rename(old.path(), final_dir, e2);
      if (!e2) old.release();
    }
    *error = final_dir.string() + ": cannot install: " + ec.message();
    return PackageStatus::Io;
  }
  staging.release();  // it is the package now; `old` goes with its WorkDir
  state.enabled[m.name] = true;
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  if (installed_name) *installed_name = m.name;
  return PackageStatus::Ok;
}

PackageStatus PackageStore::uninstall(const std::string& name, std::string* error) {
  if (!valid_package_name(name)) { *error = "'" + name + "' is not a valid package name"; return PackageStatus::InvalidArgument; }
  std::error_code ec;
  if (is_bundled_only(name)) {
    *error = name + " is bundled with this runtime (" + bundled_dir_ + ") and cannot be uninstalled; disable it instead";
    return PackageStatus::InvalidArgument;
  }
  if (!fs::is_directory(fs::path(dir_) / name, ec)) { *error = "no package " + name + " in " + dir_; return PackageStatus::NotFound; }
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  remove_stale_work(dir_);
  PackageState state;
  if (const PackageStatus st = load_state_file(dir_, &state, error); st != PackageStatus::Ok) return st;
  if (const PackageStatus st = lease_conflict(dir_, name, "uninstall", error); st != PackageStatus::Ok) return st;
  WorkDir trash(fs::path(dir_) / work_dir_name("removing", name));
  fs::rename(fs::path(dir_) / name, trash.path(), ec);
  if (ec) {
    trash.release();
    *error = (fs::path(dir_) / name).string() + ": cannot remove: " + ec.message();
    return PackageStatus::Io;
  }
  state.enabled.erase(name);
  for (auto& [model, m] : state.pins) m.erase(name);
  std::erase_if(state.pins, [](const auto& kv) { return kv.second.empty(); });
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  return PackageStatus::Ok;
}

PackageStatus PackageStore::pin(const std::string& model, const std::string& name, const std::string& version, std::string* error) {
  if (model.empty() || !valid_package_name(name)) { *error = "pin needs a model name and a valid package name"; return PackageStatus::InvalidArgument; }
  if (!ensure_dir(dir_, error)) return PackageStatus::Io;
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  remove_stale_work(dir_);
  PackageState state;
  if (const PackageStatus st = load_state_file(dir_, &state, error); st != PackageStatus::Ok) return st;
  if (version.empty()) {
    state.pins[model].erase(name);
    if (state.pins[model].empty()) state.pins.erase(model);
  } else {
    state.pins[model][name] = version;
  }
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  return PackageStatus::Ok;
}

PackageStatus PackageStore::reset_state(std::string* moved_to, std::string* error) {
  moved_to->clear();
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return PackageStatus::Ok;  // no state to reset
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  remove_stale_work(dir_);
  const std::string path = state_path(dir_);
  if (fs::symlink_status(path, ec).type() == fs::file_type::not_found) return PackageStatus::Ok;
  const std::string aside = set_aside_name(dir_);
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    *error = path + ": cannot set aside: " + std::strerror(errno);
    return PackageStatus::Io;
  }
  if (Fd d{::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)}; d.fd >= 0) ::fsync(d.fd);
  *moved_to = aside;
  return PackageStatus::Ok;
}

}  // namespace guild::packages
