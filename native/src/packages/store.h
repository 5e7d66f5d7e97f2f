// PackageStore: the kernel packages installed in one directory, their state
// (state.json: enabled/disabled, per-model version pins) and the operations
// on them — list, enable, disable, install (.gkpkg), uninstall, pin,
// reset-state. State changes are made under an advisory lock (flock on
// <dir>/.lock) and written atomically (temporary file + fsync + rename), so
// the CLI and the app can act at once. Disabling or uninstalling a package
// that a live model or session leases (LeaseRegistry, <dir>/.leases) fails
// and names the holders. docs/PACKAGES.md.
//
// State and leases fail closed: a state.json that cannot be read or parsed is
// an error naming it (never "all enabled"), and is never overwritten by a
// change (reset_state sets it aside); a .leases that is not a directory makes
// every operation that must know the holders refuse.
//
// Installing never runs the package's code in this process: the files are
// checked by reading them, and the library's provider ABI by
// guild-package-probe in a child process (probe.h).
//
// Two layers (docs/PACKAGES.md, "Where packages are found"): the user's
// packages directory (writable; holds state.json, the lock and the leases)
// and the bundled packages shipped with this build of the runtime
// (read-only). A package installed in the user's directory shadows a bundled
// one of the same name; enable/disable/pin act on either through the user's
// state file; only the user's packages can be uninstalled.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "packages/manifest.h"

namespace guild::packages {

enum class PackageStatus { Ok, NotFound, InvalidArgument, Busy, Io, Corrupt, Incompatible };
const char* package_status_name(PackageStatus s);

struct PackageState {
  std::map<std::string, bool> enabled;                            // absent = enabled
  std::map<std::string, std::map<std::string, std::string>> pins;  // model -> package -> version
  json::Value to_json() const;
  // Strict: the schema tag, known fields and their types; nullopt and *error
  // ("pins.x.gguf: not an object") otherwise.
  static std::optional<PackageState> from_json(const json::Value& v, std::string* error);
};

// What keeps a store from answering for certain: its state file cannot be
// read (status Corrupt or Io), or its lease records cannot be (Io). Empty
// messages when all is well.
struct StoreProblems {
  PackageStatus state_status = PackageStatus::Ok;
  std::string state_error;   // "/…/state.json is corrupt (line 1, column 41: …); …"
  std::string leases_error;  // "/…/.leases is a regular file, not a directory; …"
  bool any() const { return !state_error.empty() || !leases_error.empty(); }
};

// Which layer a package comes from.
enum class PackageSource { User, Bundled };
const char* package_source_name(PackageSource s);  // "user", "bundled"

struct PackageEntry {
  std::string name;          // the directory name
  std::string path;          // the package directory
  PackageSource source = PackageSource::User;
  // A user package with the same name as a bundled one hides it; this is the
  // hidden bundled copy's directory ("" when none).
  std::string shadows;
  bool valid = false;        // manifest read and valid, library present
  std::string error;         // why not valid
  Manifest manifest;
  bool enabled = true;
  bool compatible = false;
  std::string incompatible_reason;
  std::vector<std::string> leased_by;  // live LeaseRegistry holders
};

// The bundled packages directory of this runtime, "" when there is none:
// $GUILD_BUNDLED_PACKAGES_DIR when set (an empty value turns the bundled
// layer off), else the first existing of <dir of the binary holding the
// runtime>/packages and <that dir>/../packages (the packaged app:
// resources/native/guild_addon.node next to resources/packages; a build
// tree: build/Release/guild_addon.node next to build/packages), else the
// build tree's packages directory this runtime was compiled in.
std::string bundled_packages_dir();

class PackageStore {
 public:
  // The user's packages directory `dir` over the discovered bundled
  // packages (bundled_packages_dir()).
  explicit PackageStore(std::string dir);
  // An explicit bundled directory; "" = no bundled layer. A bundled
  // directory that is the user's directory itself is ignored (no package is
  // listed twice).
  PackageStore(std::string dir, std::string bundled_dir);
  // $GUILD_PACKAGES_DIR, else $XDG_DATA_HOME/guild/packages, else
  // ~/.local/share/guild/packages.
  static std::string default_dir();
  // dir if non-empty, else default_dir().
  static std::string resolve_dir(const std::string& dir) { return dir.empty() ? default_dir() : dir; }
  const std::string& dir() const { return dir_; }
  const std::string& bundled_dir() const { return bundled_dir_; }

  // Every package of both layers, by name; a user package hides a bundled
  // one of the same name. When the state file cannot be read, every entry
  // reads as disabled (nothing can be decided) and problems->state_error says
  // why; when the lease records cannot be read, problems->leases_error.
  std::vector<PackageEntry> list(PackageState* state_out = nullptr, StoreProblems* problems = nullptr) const;
  // schema guild.packages-list/1; "state_error" ({status, message} or null)
  // and "leases_error" (string or null) carry the problems.
  json::Value list_json() const;

  PackageStatus enable(const std::string& name, std::string* error);
  PackageStatus disable(const std::string& name, std::string* error);
  // Installs (or replaces) a package from a .gkpkg archive; *installed_name
  // receives its name.
  PackageStatus install(const std::string& archive_file, std::string* error, std::string* installed_name = nullptr);
  PackageStatus uninstall(const std::string& name, std::string* error);
  // Pins (version non-empty) or unpins (empty) a model to a package version.
  PackageStatus pin(const std::string& model, const std::string& name, const std::string& version, std::string* error);
  // Sets state.json aside (renamed to state.json.set-aside-<UTC time>, kept
  // for the user to inspect), so that the defaults apply: every package
  // enabled, no pins. The way out of a corrupt state file. *moved_to: the new
  // name, "" when there was no state file.
  PackageStatus reset_state(std::string* moved_to, std::string* error);

  // The state file; Ok with the defaults when there is none.
  PackageStatus read_state(PackageState* state, std::string* error) const;

 private:
  PackageStatus set_enabled(const std::string& name, bool enabled, std::string* error);
  bool is_bundled_only(const std::string& name) const;
  std::string dir_;
  std::string bundled_dir_;
};

// Holders of a package: this process's LeaseRegistry holders, then those
// other live processes recorded under <dir>/.leases ("model x.gguf (process
// 1234)"); stale records (dead processes) are removed. False and *error when
// the records cannot be read (.leases is not a directory, is a symbolic
// link, cannot be listed): then nobody can say the package is free.
bool package_holders(const std::string& dir, const std::string& name, std::vector<std::string>* holders, std::string* error);
// Ok when nobody holds the package; Busy and "cannot disable cpu-avx2: it is
// in use by model x.gguf, session 3 (model x.gguf); unload them first"; Io
// and "cannot disable cpu-avx2: …/.leases is a regular file, not a
// directory; package leases cannot be checked: remove it" when the records
// cannot be read.
PackageStatus lease_conflict(const std::string& dir, const std::string& name, const char* action, std::string* error);
// "" when <dir>/.leases is absent or a real directory this process can read
// (and, with for_writing, write); else why not, naming it.
std::string leases_dir_problem(const std::string& dir, bool for_writing);

}  // namespace guild::packages
