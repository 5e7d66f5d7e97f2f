// Installing a package never runs its code in the installing process: the
// library's provider ABI is checked by guild-package-probe in a child
// process. Each misbehaving test library (package_libs/test_provider.cpp)
// — a query() that segfaults, a constructor that exits or never returns, a
// query() that answers nonsense — is refused with one line, this process
// survives, no staging directory is left behind, and the library's ELF
// constructor never ran here (it marks whichever process runs it). A valid
// one installs, also checked in a child. docs/PACKAGES.md, "Install checks".
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "check.h"
#include "package_test_files.h"
#include "core/json.h"
#include "packages/archive.h"
#include "packages/sha256.h"
#include "packages/store.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

using package_test_files::write;
using package_test_files::make_archive;

const std::string kLibs = GUILD_TEST_PACKAGE_LIBS_DIR;

// No bundled layer: each test checks one user directory on its own; and a
// clean slate for the trace the test libraries' constructors leave.
const bool kIsolated = [] {
  ::unsetenv("GUILD_TEST_PROVIDER_RAN");
  return ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1) == 0;
}();

std::string fresh_dir(const std::string& tag) { return package_test_files::fresh_dir("pkg-install", tag); }

// A .gkpkg of one test library ("test-ok", "test-query-segv", ...), written into dir.
std::string test_archive(const std::string& dir, const std::string& name) {
  const std::string library = check::read_file(kLibs + "/lib" + name + ".so");
  json::Value m = json::Value::object();
  m.set("name", name);
  m.set("version", "1.0.0");
  m.set("abi", 1);
  m.set("description", "test library");
  json::Value op = json::Value::object();
  op.set("op", "float_ops");
  op.set("types", json::Value::array({json::Value("F32")}));
  op.set("device", "cpu");
  m.set("provides", json::Value::array({op}));
  m.set("library", "lib" + name + ".so");
  m.set("sha256", sha256_hex(library.data(), library.size()));
  const std::string file = dir + "/" + name + ".gkpkg";
  write(file, make_archive(json::serialize(m, true), library));
  return file;
}

// What state changes leave behind in the packages directory besides packages,
// .lock, .leases and state.json.
std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(".staging-", 0) == 0 || f.rfind(".old-", 0) == 0 || f.rfind(".removing-", 0) == 0 || f.find(".tmp.") != std::string::npos)
      out.push_back(f);
  }
  return out;
}

// The processes a test library's constructor ran in (its marks: <name>.<pid>).
std::vector<long> constructor_ran_in(const std::string& marks, const std::string& name) {
  std::vector<long> pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(marks, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(name + ".", 0) == 0) pids.push_back(std::stol(f.substr(name.size() + 1)));
  }
  return pids;
}

struct Misbehaviour {
  const char* name;
  const char* expected;  // in the one-line error
};

// Under AddressSanitizer the probe is an ASan binary too: ASan catches the
// library's SIGSEGV, reports it and ends the child itself, by SIGABRT with
// abort_on_error=1 (as .ci/run sets it) or else with exit status 1.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
bool segv_reported(const std::string& err) {
  if (err.find("the package library crashed while being checked (SIGSEGV)") != std::string::npos) return true;
  return kAsan && (err.find("the package library crashed while being checked (SIGABRT)") != std::string::npos ||
                   err.find("the package library ended the check with exit status 1") != std::string::npos);
}

}  // namespace

TEST(misbehaving_libraries_are_refused_in_one_line_and_never_run_here) {
  REQUIRE(kIsolated);
  const std::string dir = fresh_dir("bad");
  const std::string marks = dir + "/marks";
  fs::create_directories(marks);
  ::setenv("GUILD_TEST_PROVIDER_MARKS", marks.c_str(), 1);
  PackageStore store(dir + "/store");
  const Misbehaviour cases[] = {
      {"test-query-segv", "the package library crashed while being checked (SIGSEGV)"},
      {"test-ctor-exit", "the package library ended the check with exit status 7"},
      {"test-query-garbage", "provider ABI 3735928559, this runtime speaks ABI 1"},
      {"test-ctor-loop", "the package library did not answer within 10 s"},
  };
  for (const Misbehaviour& c : cases) {
    const std::string archive = test_archive(dir, c.name);
    std::string err;
    const auto started = std::chrono::steady_clock::now();
    const PackageStatus st = store.install(archive, &err);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("  %s (%.1f s): %s\n", c.name, seconds, err.c_str());
    CHECK_MSG(st == PackageStatus::Incompatible, "%s: %s", c.name, package_status_name(st));
    const bool segv = std::string(c.name) == "test-query-segv";
    CHECK_MSG(segv ? segv_reported(err) : err.find(c.expected) != std::string::npos, "%s: %s", c.name, err.c_str());
    CHECK_MSG(err.find(archive + ": package " + std::string(c.name) + " 1.0.0 cannot be installed: lib" + c.name + ".so: ") == 0,
              "%s", err.c_str());
    CHECK(err.find('\n') == std::string::npos);
    CHECK_MSG(err.find(".staging-") == std::string::npos, "the error names the staging path: %s", err.c_str());
    CHECK(seconds < 20);
    // Nothing installed, nothing left behind.
    CHECK(store.list().empty());
    for (const auto& f : leftovers(dir + "/store")) CHECK_MSG(false, "%s left %s", c.name, f.c_str());
    // The constructor ran, in another process only.
    const auto pids = constructor_ran_in(marks, c.name);
    CHECK_MSG(!pids.empty(), "%s: its constructor never ran at all", c.name);
    for (long pid : pids) CHECK_MSG(pid != ::getpid(), "%s: its constructor ran in the installing process", c.name);
  }
  CHECK_MSG(std::getenv("GUILD_TEST_PROVIDER_RAN") == nullptr, "a test library's constructor ran in this process: %s",
            std::getenv("GUILD_TEST_PROVIDER_RAN"));
  ::unsetenv("GUILD_TEST_PROVIDER_MARKS");
}

TEST(a_valid_library_is_checked_in_a_child_and_installs) {
  const std::string dir = fresh_dir("ok");
  const std::string marks = dir + "/marks";
  fs::create_directories(marks);
  ::setenv("GUILD_TEST_PROVIDER_MARKS", marks.c_str(), 1);
  PackageStore store(dir + "/store");
  std::string err, name;
  // Its constructor prints to stdout: the probe's answer is not disturbed.
  CHECK_MSG(store.install(test_archive(dir, "test-ok"), &err, &name) == PackageStatus::Ok, "%s", err.c_str());
  CHECK(name == "test-ok");
  const auto list = store.list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].valid && list[0].enabled && list[0].compatible);
  CHECK(fs::exists(dir + "/store/test-ok/libtest-ok.so"));
  for (const auto& f : leftovers(dir + "/store")) CHECK_MSG(false, "left %s", f.c_str());
  const auto pids = constructor_ran_in(marks, "test-ok");
  CHECK(pids.size() == 1);
  for (long pid : pids) CHECK_MSG(pid != ::getpid(), "the constructor ran in the installing process");
  CHECK(std::getenv("GUILD_TEST_PROVIDER_RAN") == nullptr);
  // Replacing it checks the new copy the same way.
  CHECK_MSG(store.install(test_archive(dir, "test-ok"), &err) == PackageStatus::Ok, "%s", err.c_str());
  CHECK(constructor_ran_in(marks, "test-ok").size() == 2);
  CHECK(std::getenv("GUILD_TEST_PROVIDER_RAN") == nullptr);
  ::unsetenv("GUILD_TEST_PROVIDER_MARKS");
}

TEST(without_the_probe_an_install_fails_and_never_loads_the_library_here) {
  const std::string dir = fresh_dir("noprobe");
  const std::string archive = test_archive(dir, "test-ok");
  PackageStore store(dir + "/store");
  for (const char* probe : {"", "/nonexistent/guild-package-probe"}) {
    ::setenv("GUILD_PACKAGE_PROBE", probe, 1);
    std::string err;
    CHECK(store.install(archive, &err) == PackageStatus::Io);
    std::printf("  GUILD_PACKAGE_PROBE='%s': %s\n", probe, err.c_str());
    CHECK_MSG(err.find("the package checker guild-package-probe is missing") != std::string::npos, "%s", err.c_str());
    CHECK(err.find('\n') == std::string::npos);
  }
  ::unsetenv("GUILD_PACKAGE_PROBE");
  CHECK(store.list().empty());
  if (fs::exists(dir + "/store")) for (const auto& f : leftovers(dir + "/store")) CHECK_MSG(false, "left %s", f.c_str());
  CHECK(std::getenv("GUILD_TEST_PROVIDER_RAN") == nullptr);
}

TEST(the_next_state_change_removes_what_dead_installs_left) {
  const std::string dir = fresh_dir("stale");
  const std::string store_dir = dir + "/store";
  PackageStore store(store_dir);
  std::string err;
  REQUIRE(store.install(test_archive(dir, "test-ok"), &err) == PackageStatus::Ok);
  // A process that died while installing (pid 999999999 does not exist), in
  // the staging name of today and of earlier versions, its temporary state
  // file, and a replacement that died between its two renames.
  const std::string dead = "999999999";
  for (const std::string& d : {".staging-" + dead + "-0-test-ok", ".staging-test-ok-" + dead, ".removing-" + dead + "-3-test-x"}) {
    fs::create_directories(store_dir + "/" + d);
    write(store_dir + "/" + d + "/libtest-ok.so", "partial");
  }
  write(store_dir + "/state.json.tmp." + dead + ".1", "{\"sch");
  fs::rename(store_dir + "/test-ok", store_dir + "/.old-" + dead + "-2-test-ok");
  // This process's own work in progress stays.
  const std::string mine = store_dir + "/.staging-" + std::to_string(::getpid()) + "-77-test-mine";
  fs::create_directories(mine);
  CHECK(store.pin("m.gguf", "test-ok", "1.0.0", &err) == PackageStatus::Ok);
  const auto left = leftovers(store_dir);
  CHECK_MSG(left.size() == 1 && left[0] == fs::path(mine).filename().string(), "%zu leftovers", left.size());
  for (const auto& f : left) std::printf("  left: %s\n", f.c_str());
  // The interrupted replacement put back.
  CHECK(fs::exists(store_dir + "/test-ok/libtest-ok.so"));
  CHECK(store.list().size() == 1);
  fs::remove_all(mine);
}
