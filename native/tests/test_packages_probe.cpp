// The pieces behind the install checks and the fail-closed state: the probe
// runner against fake probes (garbage, silence, a bad exit, a signal, a hang,
// a flood: each one line, in bounded time), the file-only ELF check, the
// probe's discovery, reset-state (the corrupt file is kept, set aside), the
// list's problem fields, and lease recording that refuses a .leases it does
// not own. docs/PACKAGES.md.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "check.h"
#include "package_test_files.h"
#include "packages/archive.h"
#include "packages/elf_check.h"
#include "packages/loader.h"
#include "packages/probe.h"
#include "packages/store.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

using package_test_files::write;

const std::string kBuilt = GUILD_BUILT_PACKAGES_DIR;
const std::string kLibs = GUILD_TEST_PACKAGE_LIBS_DIR;
const bool kNoBundled = [] { return ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1) == 0; }();

std::string fresh_dir(const std::string& tag) { return package_test_files::fresh_dir("pkg-probe", tag); }

// A fake probe: a shell script standing in for guild-package-probe.
std::string fake_probe(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  write(path, "#!/bin/sh\n" + body + "\n");
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST(probe_runner_turns_every_misbehaviour_into_one_line) {
  REQUIRE(kNoBundled);
  const std::string dir = fresh_dir("fake");
  struct Case { const char* name; std::string body; int timeout_ms; const char* expected; };
  const Case cases[] = {
      {"garbage", "echo 'hello, I am not JSON'", 5000, "the package check gave an unreadable answer"},
      {"wrong-schema", "echo '{\"schema\": \"other/1\", \"facts\": {}}'", 5000, "the package check gave an unreadable answer"},
      {"duplicate", "echo '{\"schema\": \"guild.package-probe/1\", \"error\": \"a\", \"error\": \"b\"}'", 5000, "unreadable answer"},
      {"bad-facts", "echo '{\"schema\": \"guild.package-probe/1\", \"facts\": {\"name\": 3}}'", 5000, "unreadable answer"},
      {"silent", "exit 0", 5000, "the package library ended the check without an answer"},
      {"exit", "echo '{}'; exit 3", 5000, "the package library ended the check with exit status 3"},
      {"abort", "kill -ABRT $$", 5000, "the package library crashed while being checked (SIGABRT)"},
      {"hang", "sleep 30", 300, "the package library did not answer within 0.3 s"},
      // The answer given, but something it started keeps the pipe open.
      {"lingers", "echo '{\"schema\": \"guild.package-probe/1\", \"error\": \"x\"}'; sleep 30", 300, "did not answer within 0.3 s"},
      {"flood", "head -c 1000000 /dev/zero | tr '\\0' 'x'", 5000, "the package check wrote more than 64 KiB"},
      {"error", "echo '{\"schema\": \"guild.package-probe/1\", \"error\": \"not a Guild kernel provider (missing x)\"}'", 5000,
       "not a Guild kernel provider (missing x)"},
  };
  for (const Case& c : cases) {
    const std::string probe = fake_probe(dir, c.name, c.body);
    ProviderFacts facts;
    std::string err;
    const auto t = std::chrono::steady_clock::now();
    CHECK_MSG(!probe_library(probe, "/no/such/lib.so", c.timeout_ms, &facts, &err), "%s answered", c.name);
    const double took = seconds_since(t);
    std::printf("  %s (%.2f s): %s\n", c.name, took, err.c_str());
    CHECK_MSG(err.find(c.expected) != std::string::npos, "%s: %s", c.name, err.c_str());
    CHECK(err.find('\n') == std::string::npos);
    CHECK_MSG(took < c.timeout_ms / 1000.0 + 2.0, "%s took %.2f s", c.name, took);
  }
  // A probe that cannot be started at all.
  ProviderFacts facts;
  std::string err;
  CHECK(!probe_library(dir + "/missing-probe", "/x.so", 1000, &facts, &err));
  CHECK_MSG(err.find("cannot start the package probe") != std::string::npos, "%s", err.c_str());
}

TEST(the_real_probe_is_found_and_reads_a_built_package) {
  std::string looked;
  const std::string probe = package_probe_path(&looked);
  REQUIRE(!probe.empty());
  std::printf("  probe: %s\n", probe.c_str());
  std::string err;
  auto m = read_manifest_file(kBuilt + "/cpu-generic/cpu-generic.gkmetadata", &err);
  REQUIRE(m);
  ProviderFacts facts;
  CHECK_MSG(probe_library(probe, kBuilt + "/cpu-generic/libcpu-generic.so", kProbeTimeoutMs, &facts, &err), "%s", err.c_str());
  CHECK(facts.name == "cpu-generic" && facts.version == "1.0.0" && facts.cpu_table && facts.cpu_table_has_float_helpers);
  CHECK(facts.score == 1);
  CHECK(provider_facts_problem(facts, *m).empty());
  // Not a provider: the probe's own answer (a real shared library without the symbols).
  for (const char* sys : {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"}) {
    if (!fs::exists(sys)) continue;
    CHECK(!probe_library(probe, sys, kProbeTimeoutMs, &facts, &err));
    CHECK_MSG(err.find("not a Guild kernel provider") != std::string::npos, "%s", err.c_str());
    break;
  }
  // $GUILD_PACKAGE_PROBE decides when set; empty means none.
  ::setenv("GUILD_PACKAGE_PROBE", "", 1);
  CHECK(package_probe_path(&looked).empty());
  CHECK(looked.find("GUILD_PACKAGE_PROBE") != std::string::npos);
  ::setenv("GUILD_PACKAGE_PROBE", probe.c_str(), 1);
  CHECK(package_probe_path() == probe);
  ::unsetenv("GUILD_PACKAGE_PROBE");
}

TEST(elf_check_reads_headers_only) {
  const std::string lib = check::read_file(kBuilt + "/cpu-generic/libcpu-generic.so");
  CHECK(elf_library_problem(lib).empty());
  CHECK(elf_library_problem(check::read_file(kLibs + "/libtest-ok.so")).empty());
  auto problem = [](std::string bytes) { return elf_library_problem(bytes); };
  CHECK(problem("definitely not ELF") == "cannot be opened as a shared library: not an ELF file");
  CHECK(problem("").find("not an ELF file") != std::string::npos);
  std::string s = lib;
  s[4] = 1;  // ELFCLASS32
  CHECK(problem(s).find("not a 64-bit ELF file") != std::string::npos);
  s = lib;
  s[16] = 2;  // ET_EXEC
  CHECK_MSG(problem(s).find("an executable, not a shared object") != std::string::npos, "%s", problem(s).c_str());
  s = lib;
  s[18] = static_cast<char>(243);  // e_machine = EM_RISCV
  s[19] = 0;
  CHECK_MSG(problem(s).find("built for") != std::string::npos, "%s", problem(s).c_str());
  CHECK(problem(lib.substr(0, 40)).find("truncated") != std::string::npos);
  CHECK(problem(lib.substr(0, 2000)).find("cannot be opened as a shared library") != std::string::npos);
  for (const char* sys : {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"}) {
    if (!fs::exists(sys)) continue;
    CHECK(problem(check::read_file(sys)) == "not a Guild kernel provider (missing guild_kernel_provider_query)");
    break;
  }
}

TEST(reset_state_sets_a_corrupt_file_aside_and_the_defaults_apply) {
  const std::string dir = fresh_dir("reset");
  const std::string sdir = dir + "/store";
  PackageStore store(sdir);
  std::string err, moved;
  CHECK(store.reset_state(&moved, &err) == PackageStatus::Ok && moved.empty());  // no directory, nothing to do
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", dir + "/g.gkpkg", &err));
  REQUIRE(store.install(dir + "/g.gkpkg", &err) == PackageStatus::Ok);
  REQUIRE(store.disable("cpu-generic", &err) == PackageStatus::Ok);
  const std::string corrupt = "{\"schema\": \"guild.packages-state/1\", \"packa";
  write(sdir + "/state.json", corrupt);
  StoreProblems problems;
  PackageState state;
  auto list = store.list(&state, &problems);
  CHECK(problems.state_status == PackageStatus::Corrupt);
  CHECK_MSG(problems.state_error.find(sdir + "/state.json is corrupt (line 1, column") == 0, "%s", problems.state_error.c_str());
  REQUIRE(list.size() == 1);
  CHECK(!list[0].enabled);
  const json::Value j = store.list_json();
  CHECK(j["state_error"]["status"].as_string() == "corrupt");
  CHECK(j["state_error"]["message"].as_string() == problems.state_error);
  CHECK(j["leases_error"].is_null());
  CHECK(store.read_state(&state, &err) == PackageStatus::Corrupt);
  // A model load refuses with that line.
  auto r = load_enabled_packages(store, "m.gguf");
  CHECK(r.loaded.empty() && r.error_status == PackageStatus::Corrupt);
  CHECK_MSG(r.error.find("the kernel packages cannot be chosen: " + sdir + "/state.json is corrupt") == 0, "%s", r.error.c_str());

  CHECK(store.reset_state(&moved, &err) == PackageStatus::Ok);
  std::printf("  set aside as %s\n", moved.c_str());
  CHECK(moved.rfind(sdir + "/state.json.set-aside-", 0) == 0);
  CHECK(check::read_file(moved) == corrupt);  // kept for the user, as it was
  CHECK(!fs::exists(sdir + "/state.json"));
  list = store.list(&state, &problems);
  CHECK(!problems.any());
  CHECK(list.size() == 1 && list[0].enabled);  // the defaults
  CHECK(store.disable("cpu-generic", &err) == PackageStatus::Ok);
  // A second reset sets the new file aside under another name.
  std::string moved2;
  CHECK(store.reset_state(&moved2, &err) == PackageStatus::Ok && !moved2.empty() && moved2 != moved);
  CHECK(fs::exists(moved));
}

TEST(lease_records_go_only_into_a_real_leases_directory) {
  const std::string dir = fresh_dir("record");
  const std::string sdir = dir + "/store";
  std::string err;
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", dir + "/g.gkpkg", &err));
  PackageStore store(sdir);
  REQUIRE(store.install(dir + "/g.gkpkg", &err) == PackageStatus::Ok);
  CHECK(leases_dir_problem(sdir, true).empty());  // absent: made when needed
  auto m = read_manifest_file(sdir + "/cpu-generic/cpu-generic.gkmetadata", &err);
  REQUIRE(m);
  auto p = open_provider(sdir + "/cpu-generic/libcpu-generic.so", *m, &err);
  REQUIRE(p);
  CHECK_MSG(record_process_lease(*p, sdir, "model a.gguf", &err), "%s", err.c_str());
  CHECK(fs::exists(p->lease_file));
  p.reset();
  // A file in its place: no record, a clear error, and the list says why it cannot tell.
  fs::remove_all(sdir + "/.leases");
  write(sdir + "/.leases", "x");
  p = open_provider(sdir + "/cpu-generic/libcpu-generic.so", *m, &err);
  REQUIRE(p);
  CHECK(!record_process_lease(*p, sdir, "model a.gguf", &err));
  std::printf("  %s\n", err.c_str());
  CHECK_MSG(err == "cannot record that this process uses kernel package cpu-generic: " + sdir +
                       "/.leases is a regular file, not a directory; remove it so that a lease can be recorded",
            "%s", err.c_str());
  CHECK(p->lease_file.empty());
  StoreProblems problems;
  store.list(nullptr, &problems);
  CHECK_MSG(problems.leases_error.find(sdir + "/.leases is a regular file") == 0, "%s", problems.leases_error.c_str());
  CHECK(store.list_json()["leases_error"].as_string() == problems.leases_error);
  std::vector<std::string> holders;
  CHECK(!package_holders(sdir, "cpu-generic", &holders, &err));
  CHECK(lease_conflict(sdir, "cpu-generic", "uninstall", &err) == PackageStatus::Io);
  CHECK_MSG(err == "cannot uninstall cpu-generic: " + sdir + "/.leases is a regular file, not a directory; package leases cannot be checked: remove it",
            "%s", err.c_str());
  auto r = load_enabled_packages(store, "");
  CHECK(r.loaded.empty() && r.error_status == PackageStatus::Io && r.error.find(".leases") != std::string::npos);
  // A symbolic link is not written through either.
  fs::remove(sdir + "/.leases");
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", sdir + "/.leases");
  CHECK(!record_process_lease(*p, sdir, "model a.gguf", &err));
  CHECK(err.find("is a symbolic link") != std::string::npos);
  CHECK(fs::is_empty(dir + "/elsewhere"));
}
