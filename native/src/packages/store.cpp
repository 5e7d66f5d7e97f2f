#include "packages/store.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "packages/archive.h"
#include "packages/loader.h"
#include "runtime/leases.h"

namespace guild::packages {
namespace fs = std::filesystem;
namespace {

constexpr const char* kStateSchema = "guild.packages-state/1";

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

std::string state_path(const std::string& dir) { return (fs::path(dir) / "state.json").string(); }

PackageState load_state_file(const std::string& dir) {
  std::ifstream in(state_path(dir), std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  auto doc = json::parse(ss.str());
  if (!doc || !doc->is_object()) return {};  // a damaged state file reads as defaults (all enabled)
  return PackageState::from_json(*doc);
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

std::string check_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// user_dir: where the state and the cross-process leases live, whichever
// layer the package comes from.
PackageEntry read_entry(const fs::path& pkg_dir, PackageSource source, const std::string& user_dir, const PackageState& state) {
  PackageEntry e;
  e.name = pkg_dir.filename().string();
  e.path = pkg_dir.string();
  e.source = source;
  auto it = state.enabled.find(e.name);
  e.enabled = it == state.enabled.end() || it->second;
  e.leased_by = package_holders(user_dir, e.name);
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

// The file of the binary this code is linked into (the addon, libguild or an
// executable), or "" when it cannot be told.
fs::path runtime_binary_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&bundled_packages_dir), &info) != 0 && info.dli_fname && *info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(info.dli_fname, ec), ec);
    if (!ec && fs::is_regular_file(p, ec)) return p;
  }
  // dladdr names the main program by argv[0], which may not resolve: ask the kernel.
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
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

PackageState PackageState::from_json(const json::Value& v) {
  PackageState s;
  for (const auto& [name, p] : v["packages"].as_object())
    if (p.is_object() && p["enabled"].is_bool()) s.enabled[name] = p["enabled"].as_bool();
  for (const auto& [model, m] : v["pins"].as_object())
    for (const auto& [name, ver] : m.as_object())
      if (ver.is_string()) s.pins[model][name] = ver.as_string();
  return s;
}

std::vector<std::string> package_holders(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  for (const LeaseHolder& h : LeaseRegistry::instance().holders(name)) out.push_back(h.holder);
  std::error_code ec;
  const fs::path leases = fs::path(dir) / ".leases";
  if (!fs::is_directory(leases, ec)) return out;
  const long long self = ::getpid();
  for (const auto& e : fs::directory_iterator(leases, ec)) {
    auto doc = json::parse(check_read(e.path().string()));
    if (!doc || !(*doc)["pid"].is_int()) continue;
    const long long pid = (*doc)["pid"].as_int();
    if (pid == self) continue;  // this process: LeaseRegistry already answered
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      std::error_code e2;
      fs::remove(e.path(), e2);  // its process is gone
      continue;
    }
    if ((*doc)["package"].as_string() == name)
      out.push_back((*doc)["holder"].as_string() + " (process " + std::to_string(pid) + ")");
  }
  return out;
}

std::string lease_conflict(const std::string& dir, const std::string& name, const char* action) {
  const auto holders = package_holders(dir, name);
  if (holders.empty()) return "";
  std::string who;
  for (const auto& h : holders) who += (who.empty() ? "" : ", ") + h;
  return "cannot " + std::string(action) + " " + name + ": it is in use by " + who + "; unload them first";
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

PackageState PackageStore::read_state() const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return {};
  DirLock lock(dir_, false);
  return load_state_file(dir_);
}

std::vector<PackageEntry> PackageStore::list(PackageState* state_out) const {
  std::vector<PackageEntry> out;
  PackageState state;
  std::error_code ec;
  if (fs::is_directory(dir_, ec)) {
    DirLock lock(dir_, false);
    state = load_state_file(dir_);
    for (const fs::path& d : package_dirs(dir_)) out.push_back(read_entry(d, PackageSource::User, dir_, state));
  }
  for (const fs::path& d : package_dirs(bundled_dir_)) {
    const std::string name = d.filename().string();
    auto user = std::find_if(out.begin(), out.end(), [&](const PackageEntry& e) { return e.name == name; });
    if (user != out.end()) {
      user->shadows = d.string();
      continue;
    }
    out.push_back(read_entry(d, PackageSource::Bundled, dir_, state));
  }
  std::sort(out.begin(), out.end(), [](const PackageEntry& a, const PackageEntry& b) { return a.name < b.name; });
  if (state_out) *state_out = state;
  return out;
}

json::Value PackageStore::list_json() const {
  PackageState state;
  const auto entries = list(&state);
  json::Value root = json::Value::object();
  root.set("schema", "guild.packages-list/1");
  root.set("dir", dir_);
  std::error_code ec;
  root.set("exists", fs::is_directory(dir_, ec));
  root.set("bundled_dir", bundled_dir_.empty() ? json::Value() : json::Value(bundled_dir_));
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
  if (!bundled && !fs::is_directory(fs::path(dir_) / name, ec)) { *error = "no package " + name + " in " + dir_; return PackageStatus::NotFound; }
  if (!enabled) {
    const std::string conflict = lease_conflict(dir_, name, "disable");
    if (!conflict.empty()) { *error = conflict; return PackageStatus::Busy; }
  }
  PackageState state = load_state_file(dir_);
  state.enabled[name] = enabled;
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  return PackageStatus::Ok;
}

PackageStatus PackageStore::enable(const std::string& name, std::string* error) { return set_enabled(name, true, error); }
PackageStatus PackageStore::disable(const std::string& name, std::string* error) { return set_enabled(name, false, error); }

PackageStatus PackageStore::install(const std::string& archive_file, std::string* error, std::string* installed_name) {
  std::string err;
  auto archive = read_archive(archive_file, &err);
  if (!archive) { *error = err; return err.find("cannot open") != std::string::npos ? PackageStatus::Io : PackageStatus::Corrupt; }
  const Manifest& m = archive->manifest;
  if (const std::string why = requirement_problem(m); !why.empty()) {
    *error = archive_file + ": package " + m.name + " " + m.version + " cannot be installed: " + why;
    return PackageStatus::Incompatible;
  }
  if (!ensure_dir(dir_, error)) return PackageStatus::Io;
  DirLock lock(dir_, true);
  if (!lock.ok()) { *error = lock.error(); return PackageStatus::Io; }
  const fs::path final_dir = fs::path(dir_) / m.name;
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    const std::string conflict = lease_conflict(dir_, m.name, "replace");
    if (!conflict.empty()) { *error = conflict; return PackageStatus::Busy; }
  }
  const fs::path staging = fs::path(dir_) / (".staging-" + m.name + "-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  if (!fs::create_directories(staging, ec) || ec) { *error = staging.string() + ": cannot create: " + ec.message(); return PackageStatus::Io; }
  auto cleanup = [&] { std::error_code e2; fs::remove_all(staging, e2); };
  if (!write_file_atomic((staging / m.library).string(), archive->library, error) ||
      !write_file_atomic((staging / (m.name + kManifestSuffix)).string(), archive->manifest_text, error)) {
    cleanup();
    return PackageStatus::Io;
  }
  // Open it once from the staging directory: a library that cannot be opened
  // or speaks another provider ABI is refused now, not at the next load.
  if (!open_provider((staging / m.library).string(), m, &err)) {
    cleanup();
    *error = archive_file + ": package " + m.name + " " + m.version + " cannot be installed: " + err;
    return PackageStatus::Incompatible;
  }
  const fs::path old = fs::path(dir_) / (".old-" + m.name + "-" + std::to_string(::getpid()));
  if (fs::exists(final_dir, ec)) {
    fs::remove_all(old, ec);
    fs::rename(final_dir, old, ec);
    if (ec) { cleanup(); *error = final_dir.string() + ": cannot replace: " + ec.message(); return PackageStatus::Io; }
  }
  fs::rename(staging, final_dir, ec);
  if (ec) {
    std::error_code e2;
    if (fs::exists(old, e2)) fs::rename(old, final_dir, e2);
    cleanup();
    *error = final_dir.string() + ": cannot install: " + ec.message();
    return PackageStatus::Io;
  }
  fs::remove_all(old, ec);
  PackageState state = load_state_file(dir_);
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
  const std::string conflict = lease_conflict(dir_, name, "uninstall");
  if (!conflict.empty()) { *error = conflict; return PackageStatus::Busy; }
  const fs::path trash = fs::path(dir_) / (".removing-" + name + "-" + std::to_string(::getpid()));
  fs::rename(fs::path(dir_) / name, trash, ec);
  if (ec) { *error = (fs::path(dir_) / name).string() + ": cannot remove: " + ec.message(); return PackageStatus::Io; }
  fs::remove_all(trash, ec);
  PackageState state = load_state_file(dir_);
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
  PackageState state = load_state_file(dir_);
  if (version.empty()) {
    state.pins[model].erase(name);
    if (state.pins[model].empty()) state.pins.erase(model);
  } else {
    state.pins[model][name] = version;
  }
  if (!save_state_file(dir_, state, error)) return PackageStatus::Io;
  return PackageStatus::Ok;
}

}  // namespace guild::packages
