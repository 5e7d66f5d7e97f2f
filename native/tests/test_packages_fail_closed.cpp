// Package state and leases fail closed (docs/PACKAGES.md, "state.json",
// "Leases"): a truncated, corrupt, duplicate-keyed or unreadable state.json is
// an error naming the file for every state change — and is left exactly as it
// was — never "all enabled, no pins"; a missing one still means the defaults.
// A .leases that is not a directory (a file, a symbolic link elsewhere), or a
// lease record that cannot be read, makes disable, uninstall and replace
// refuse instead of assuming nobody holds the package.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "check.h"
#include "package_test_files.h"
#include "packages/archive.h"
#include "packages/loader.h"
#include "packages/store.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

using package_test_files::write;

const std::string kBuilt = GUILD_BUILT_PACKAGES_DIR;
const bool kNoBundled = [] { return ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1) == 0; }();

// A user directory with cpu-generic installed, disabled and pinned; returns it.
std::string store_with_state(const std::string& tag) {
  const std::string dir = check::tmp_dir() + "/pkg-closed-" + tag + "-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string err;
  const std::string pkg = dir + "/g.gkpkg";
  if (!pack_package_dir(kBuilt + "/cpu-generic", pkg, &err)) std::printf("  pack: %s\n", err.c_str());
  PackageStore store(dir + "/store");
  if (store.install(pkg, &err) != PackageStatus::Ok) std::printf("  install: %s\n", err.c_str());
  if (store.disable("cpu-generic", &err) != PackageStatus::Ok) std::printf("  disable: %s\n", err.c_str());
  if (store.pin("m.gguf", "cpu-generic", "1.0.0", &err) != PackageStatus::Ok) std::printf("  pin: %s\n", err.c_str());
  return dir;
}

// Every state change refuses with an error naming `path`, and `path` keeps `bytes`.
void every_change_refuses(const std::string& dir, const std::string& path, const std::string& bytes, const char* what) {
  PackageStore store(dir + "/store");
  std::string err;
  const std::string pkg = dir + "/g.gkpkg";
  struct Op { const char* name; std::function<PackageStatus()> run; };
  const Op ops[] = {
      {"enable", [&] { return store.enable("cpu-generic", &err); }},
      {"disable", [&] { return store.disable("cpu-generic", &err); }},
      {"pin", [&] { return store.pin("x.gguf", "cpu-generic", "1.0.0", &err); }},
      {"install", [&] { return store.install(pkg, &err); }},
      {"uninstall", [&] { return store.uninstall("cpu-generic", &err); }},
  };
  for (const Op& op : ops) {
    err.clear();
    const PackageStatus st = op.run();
    CHECK_MSG(st != PackageStatus::Ok, "%s: %s succeeded over the unreadable state file", what, op.name);
    CHECK_MSG(err.find(path) != std::string::npos, "%s: %s: the error does not name the file: %s", what, op.name, err.c_str());
    CHECK_MSG(err.find("reset-state") != std::string::npos, "%s: %s: no way out named: %s", what, op.name, err.c_str());
    CHECK(err.find('\n') == std::string::npos);
    if (fs::is_regular_file(path)) CHECK_MSG(check::read_file(path) == bytes, "%s: %s changed the state file", what, op.name);
  }
  std::printf("  %s: %s\n", what, err.c_str());
  // The package itself is untouched.
  CHECK(fs::exists(dir + "/store/cpu-generic/libcpu-generic.so"));
}

}  // namespace

TEST(a_truncated_state_file_is_an_error_and_is_kept) {
  REQUIRE(kNoBundled);
  const std::string dir = store_with_state("trunc");
  const std::string path = dir + "/store/state.json";
  const std::string whole = check::read_file(path);
  REQUIRE(whole.find("\"enabled\": false") != std::string::npos);
  const std::string truncated = whole.substr(0, 40);
  write(path, truncated);
  every_change_refuses(dir, path, truncated, "truncated");
  // Listing says nothing is enabled, rather than everything.
  const auto list = PackageStore(dir + "/store").list();
  REQUIRE(list.size() == 1);
  CHECK(!list[0].enabled);
  // A model load cannot decide which packages it may use: nothing is loaded.
  const auto r = load_enabled_packages(dir + "/store", "m.gguf");
  CHECK(r.loaded.empty());
}

TEST(corrupt_state_files_of_every_kind_are_errors) {
  const std::string dir = store_with_state("corrupt");
  const std::string path = dir + "/store/state.json";
  const std::pair<const char*, std::string> cases[] = {
      {"empty", ""},
      {"not JSON", "state? what state"},
      {"duplicate key", "{\"schema\": \"guild.packages-state/1\", \"packages\": {\"cpu-generic\": {\"enabled\": false}},"
                        " \"packages\": {}, \"pins\": {}}"},
      {"another schema", "{\"schema\": \"guild.packages-state/9\", \"packages\": {}, \"pins\": {}}"},
      {"unknown field", "{\"schema\": \"guild.packages-state/1\", \"packages\": {}, \"pins\": {}, \"mode\": \"open\"}"},
      {"wrong types", "{\"schema\": \"guild.packages-state/1\", \"packages\": {\"cpu-generic\": {\"enabled\": \"no\"}}, \"pins\": {}}"},
      {"an array", "[1, 2, 3]"},
  };
  for (const auto& [what, bytes] : cases) {
    write(path, bytes);
    every_change_refuses(dir, path, bytes, what);
  }
}

TEST(a_state_file_that_is_not_a_file_is_an_error_not_a_hang) {
  const std::string dir = store_with_state("fifo");
  const std::string path = dir + "/store/state.json";
  fs::remove(path);
  // A FIFO: reading it would wait for a writer forever.
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  every_change_refuses(dir, path, "", "a FIFO");
  fs::remove(path);
  fs::create_directories(path);
  every_change_refuses(dir, path, "", "a directory");
  fs::remove_all(path);
}

TEST(a_missing_state_file_still_means_the_defaults) {
  const std::string dir = store_with_state("missing");
  fs::remove(dir + "/store/state.json");
  PackageStore store(dir + "/store");
  const auto list = store.list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].enabled);
  std::string err;
  CHECK_MSG(store.disable("cpu-generic", &err) == PackageStatus::Ok, "%s", err.c_str());
  CHECK(!store.list()[0].enabled);
}

TEST(leases_that_cannot_be_read_block_uninstall_disable_and_replace) {
  const std::string dir = store_with_state("leases");
  const std::string sdir = dir + "/store";
  PackageStore store(sdir);
  std::string err;
  REQUIRE(store.enable("cpu-generic", &err) == PackageStatus::Ok);
  const std::string leases = sdir + "/.leases";
  fs::remove_all(leases);
  auto all_refuse = [&](const char* what) {
    CHECK_MSG(store.uninstall("cpu-generic", &err) != PackageStatus::Ok, "%s: uninstall went ahead", what);
    std::printf("  %s: %s\n", what, err.c_str());
    CHECK_MSG(err.find(".leases") != std::string::npos || err.find("lease record") != std::string::npos, "%s", err.c_str());
    CHECK(err.find('\n') == std::string::npos);
    CHECK_MSG(store.disable("cpu-generic", &err) != PackageStatus::Ok, "%s: disable went ahead", what);
    CHECK_MSG(store.install(dir + "/g.gkpkg", &err) != PackageStatus::Ok, "%s: replace went ahead", what);
    CHECK(fs::exists(sdir + "/cpu-generic/libcpu-generic.so"));
    CHECK(store.list()[0].enabled);
  };
  // A regular file where the directory belongs.
  write(leases, "not a directory");
  all_refuse("a regular file");
  // A symbolic link to a directory elsewhere.
  fs::remove(leases);
  const std::string elsewhere = dir + "/elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, leases);
  all_refuse("a symbolic link");
  fs::remove(leases);
  // A record of a live process (our parent) that cannot be read: it may hold anything.
  fs::create_directories(leases);
  write(leases + "/" + std::to_string(::getppid()) + "-0.json", "{\"pid\": ");
  all_refuse("an unreadable record");
  // With the directory whole again, everything works.
  fs::remove_all(leases);
  fs::create_directories(leases);
  CHECK_MSG(store.disable("cpu-generic", &err) == PackageStatus::Ok, "%s", err.c_str());
  CHECK_MSG(store.uninstall("cpu-generic", &err) == PackageStatus::Ok, "%s", err.c_str());
}
