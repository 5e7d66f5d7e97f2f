// Kernel packages: .gkpkg archives, the PackageStore (install → enable →
// disable → uninstall, leases, state file), its bundled layer, the loader and
// the per-op provider priority, on the built-in packages this build wrote to
// GUILD_BUILT_PACKAGES_DIR. Every bad input is a clear error, never a crash.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "check.h"
#include "package_test_files.h"
#include "core/cpu_features.h"
#include "core/json.h"
#include "packages/archive.h"
#include "packages/loader.h"
#include "packages/manifest.h"
#include "packages/sha256.h"
#include "packages/store.h"
#include "runtime/leases.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

using package_test_files::write;
using package_test_files::make_archive;

const std::string kBuilt = GUILD_BUILT_PACKAGES_DIR;

// Most tests here check one user directory on its own: without a bundled
// layer (the runtime would otherwise add this build's packages, found by
// bundled_packages_dir(), to every list). The bundled-layer tests name their
// bundled directory explicitly.
const bool kNoDiscoveredBundledPackages = [] { return ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1) == 0; }();

std::string fresh_dir(const std::string& tag) { return package_test_files::fresh_dir("packages", tag); }

std::string built_manifest(const std::string& name) { return check::read_file(kBuilt + "/" + name + "/" + name + ".gkmetadata"); }
std::string built_library(const std::string& name) { return check::read_file(kBuilt + "/" + name + "/lib" + name + ".so"); }

// The built manifest with some fields replaced.
std::string edited_manifest(const std::string& name, const std::function<void(json::Value&)>& edit) {
  auto doc = json::parse(built_manifest(name));
  edit(*doc);
  return json::serialize(*doc, true);
}

bool has_avx2() { return cpu_features().has_avx2_table_isa(); }

const PackageEntry* find(const std::vector<PackageEntry>& v, const std::string& name) {
  for (const auto& e : v) if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

TEST(built_packages_have_valid_manifests_and_checksums) {
  REQUIRE(kNoDiscoveredBundledPackages);
  for (const char* name : {"cpu-generic", "cpu-avx2"}) {
    std::string err;
    auto m = read_manifest_file(kBuilt + "/" + name + "/" + name + ".gkmetadata", &err);
    REQUIRE(m);
    CHECK(m->name == name);
    CHECK(m->abi == GUILD_KERNEL_PROVIDER_ABI_VERSION);
    CHECK(sha256_file_hex(kBuilt + "/" + name + "/" + m->library, &err) == m->sha256);
  }
  // The built directory itself is a packages directory.
  PackageStore store(kBuilt);
  const auto list = store.list();
  const PackageEntry* gen = find(list, "cpu-generic");
  const PackageEntry* avx2 = find(list, "cpu-avx2");
  REQUIRE(gen && avx2);
  CHECK(gen->valid && gen->compatible);
  CHECK(avx2->valid);
  CHECK(avx2->compatible == has_avx2());
  if (!avx2->compatible) CHECK(avx2->incompatible_reason.find("which this CPU lacks") != std::string::npos);
}

TEST(install_enable_disable_uninstall) {
  const std::string dir = fresh_dir("cycle");
  const std::string pkg = dir + "/../cpu-generic-" + std::to_string(::getpid()) + ".gkpkg";
  std::string err;
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", pkg, &err));
  PackageStore store(dir + "/store");
  std::string name;
  CHECK(store.install(pkg, &err, &name) == PackageStatus::Ok);
  CHECK(name == "cpu-generic");
  auto list = store.list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].enabled && list[0].compatible && list[0].manifest.version == "1.0.0");

  CHECK(store.disable("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(!store.list()[0].enabled);
  // The state file is plain JSON and says so.
  auto state = json::parse(check::read_file(dir + "/store/state.json"));
  REQUIRE(state);
  CHECK((*state)["packages"]["cpu-generic"]["enabled"].as_bool(true) == false);
  CHECK(store.enable("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(store.list()[0].enabled);

  CHECK(store.disable("no-such-package", &err) == PackageStatus::NotFound);
  CHECK(err.find("no package no-such-package") != std::string::npos);
  CHECK(store.disable("../etc", &err) == PackageStatus::InvalidArgument);

  // Reinstalling replaces in place.
  CHECK(store.install(pkg, &err) == PackageStatus::Ok);
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(store.list().empty());
  CHECK(!fs::exists(dir + "/store/cpu-generic"));
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::NotFound);
  // No staging or lock leftovers besides the lock and state files.
  for (const auto& e : fs::directory_iterator(dir + "/store"))
    CHECK_MSG(e.path().filename() == ".lock" || e.path().filename() == "state.json", "leftover %s", e.path().c_str());
  fs::remove(pkg);
}

TEST(disable_while_leased_fails_naming_the_holder) {
  const std::string dir = fresh_dir("lease");
  std::string err;
  const std::string pkg = dir + "/g.gkpkg";
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", pkg, &err));
  PackageStore store(dir + "/store");
  REQUIRE(store.install(pkg, &err) == PackageStatus::Ok);
  {
    Lease model_lease("cpu-generic", "model qwen3moe-a-Q8_0.gguf");
    Lease session_lease("cpu-generic", "session 7 (model qwen3moe-a-Q8_0.gguf)");
    CHECK(store.disable("cpu-generic", &err) == PackageStatus::Busy);
    CHECK(err.find("model qwen3moe-a-Q8_0.gguf") != std::string::npos);
    CHECK(err.find("session 7") != std::string::npos);
    CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::Busy);
    CHECK(err.find("model qwen3moe-a-Q8_0.gguf") != std::string::npos);
    CHECK(store.install(pkg, &err) == PackageStatus::Busy);  // replacing a leased package
    const auto list = store.list();
    REQUIRE(list.size() == 1);
    CHECK(list[0].leased_by.size() == 2);
    const json::Value j = store.list_json();
    CHECK(j["packages"][0]["pinned_by"].size() == 2);
    CHECK(list[0].enabled);  // nothing changed
  }
  CHECK(store.disable("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::Ok);
}

TEST(bad_archives_are_refused_with_a_clear_error) {
  const std::string dir = fresh_dir("bad");
  PackageStore store(dir + "/store");
  std::string err;
  const std::string manifest = built_manifest("cpu-generic");
  const std::string library = built_library("cpu-generic");
  const std::string good = make_archive(manifest, library);

  // Corrupt: one byte flipped in the library section.
  std::string flipped = good;
  flipped[24 + manifest.size() + 100] ^= 0x5a;
  write(dir + "/flipped.gkpkg", flipped);
  CHECK(store.install(dir + "/flipped.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK(err.find("checksum mismatch") != std::string::npos);
  // Truncated.
  write(dir + "/trunc.gkpkg", good.substr(0, good.size() / 2));
  CHECK(store.install(dir + "/trunc.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK(err.find("truncated") != std::string::npos);
  // Not an archive at all.
  write(dir + "/junk.gkpkg", "hello, this is not a package");
  CHECK(store.install(dir + "/junk.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK(err.find("not a .gkpkg") != std::string::npos);
  // Missing file.
  CHECK(store.install(dir + "/missing.gkpkg", &err) == PackageStatus::Io);
  // Invalid manifest JSON inside a well-formed archive.
  write(dir + "/badjson.gkpkg", make_archive("{not json", library));
  CHECK(store.install(dir + "/badjson.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK(err.find("invalid manifest") != std::string::npos);

  // Library checksum mismatch: valid archive, but the manifest's sha256 is wrong.
  const std::string wrong_sha = edited_manifest("cpu-generic", [](json::Value& m) { m.set("sha256", std::string(64, 'a')); });
  write(dir + "/sha.gkpkg", make_archive(wrong_sha, library));
  CHECK(store.install(dir + "/sha.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK(err.find("checksum mismatch: library") != std::string::npos);

  // ABI mismatch.
  const std::string abi2 = edited_manifest("cpu-generic", [](json::Value& m) { m.set("abi", 99); });
  write(dir + "/abi.gkpkg", make_archive(abi2, library));
  CHECK(store.install(dir + "/abi.gkpkg", &err) == PackageStatus::Incompatible);
  CHECK(err.find("ABI 99") != std::string::npos);

  // A CPU requirement this CPU lacks (simulated through the manifest).
  std::string lacking;
  for (const char* f : {"amx_tile", "amx_int8", "avx512bf16", "avx512vnni", "avx512f", "avx2"})
    if (cpu_has_feature(f) == false) { lacking = f; break; }
  if (!lacking.empty()) {
    const std::string req = edited_manifest("cpu-generic", [&](json::Value& m) {
      json::Value r = json::Value::object();
      r.set("cpu_features", json::Value::array({json::Value(lacking)}));
      m.set("requires", std::move(r));
    });
    write(dir + "/cpu.gkpkg", make_archive(req, library));
    CHECK(store.install(dir + "/cpu.gkpkg", &err) == PackageStatus::Incompatible);
    CHECK_MSG(err.find("requires CPU feature " + lacking + ", which this CPU lacks") != std::string::npos, "%s", err.c_str());
  }
  const std::string unknown = edited_manifest("cpu-generic", [](json::Value& m) {
    json::Value r = json::Value::object();
    r.set("cpu_features", json::Value::array({json::Value("quantum-entangler")}));
    m.set("requires", std::move(r));
  });
  write(dir + "/unknown.gkpkg", make_archive(unknown, library));
  CHECK(store.install(dir + "/unknown.gkpkg", &err) == PackageStatus::Incompatible);
  CHECK(err.find("quantum-entangler") != std::string::npos);

  // A library that fails to open (not an ELF file), with a matching checksum.
  const std::string not_elf = "this is not a shared library";
  const std::string m_not_elf = edited_manifest("cpu-generic", [&](json::Value& m) { m.set("sha256", sha256_hex(not_elf.data(), not_elf.size())); });
  write(dir + "/notelf.gkpkg", make_archive(m_not_elf, not_elf));
  CHECK(store.install(dir + "/notelf.gkpkg", &err) == PackageStatus::Incompatible);
  CHECK(err.find("cannot be opened as a shared library") != std::string::npos);

  // A real shared library that is not a provider.
  for (const char* sys : {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"}) {
    if (!fs::exists(sys)) continue;
    const std::string lib = check::read_file(sys);
    const std::string m = edited_manifest("cpu-generic", [&](json::Value& v) { v.set("sha256", sha256_hex(lib.data(), lib.size())); });
    write(dir + "/libm.gkpkg", make_archive(m, lib));
    CHECK(store.install(dir + "/libm.gkpkg", &err) == PackageStatus::Incompatible);
    CHECK(err.find("not a Guild kernel provider") != std::string::npos);
    break;
  }

  // A provider whose library says it is another package.
  const std::string renamed = edited_manifest("cpu-generic", [](json::Value& m) { m.set("name", "cpu-fake"); });
  write(dir + "/renamed.gkpkg", make_archive(renamed, library));
  CHECK(store.install(dir + "/renamed.gkpkg", &err) == PackageStatus::Incompatible);
  CHECK(err.find("the library is cpu-generic 1.0.0 but the manifest says cpu-fake") != std::string::npos);

  // Nothing was installed by any of them.
  CHECK(store.list().empty());
}

TEST(loader_priority_disable_pins_and_broken_packages) {
  const std::string dir = fresh_dir("load");
  const std::string sdir = dir + "/store";
  PackageStore store(sdir);
  std::string err;
  for (const char* name : {"cpu-generic", "cpu-avx2"}) {
    const std::string pkg = dir + "/" + name + ".gkpkg";
    REQUIRE(pack_package_dir(kBuilt + "/" + name, pkg, &err));
    const PackageStatus st = store.install(pkg, &err);
    if (std::string(name) == "cpu-avx2" && !has_avx2()) { CHECK(st == PackageStatus::Incompatible); continue; }
    CHECK_MSG(st == PackageStatus::Ok, "%s", err.c_str());
  }
  {
    auto r = load_enabled_packages(sdir, "m.gguf");
    REQUIRE(!r.loaded.empty());
    auto best = pick_cpu_provider(r, nullptr, nullptr);
    REQUIRE(best && best->cpu);
    CHECK(std::string(best->cpu->name) == (has_avx2() ? "cpu-avx2" : "cpu-generic"));
    std::string note;
    auto forced = pick_cpu_provider(r, "cpu-generic", &note);
    CHECK(forced && forced->manifest.name == "cpu-generic" && note.empty());
    forced = pick_cpu_provider(r, "cpu-nonexistent", &note);
    CHECK(forced == best);
    CHECK(note.find("ignored") != std::string::npos);
  }
  if (has_avx2()) {
    CHECK(store.disable("cpu-avx2", &err) == PackageStatus::Ok);
    auto r = load_enabled_packages(sdir, "m.gguf");
    auto best = pick_cpu_provider(r, nullptr, nullptr);
    REQUIRE(best);
    CHECK(best->manifest.name == "cpu-generic");
    bool saw = false;
    for (const auto& s : r.skipped) saw = saw || (s.name == "cpu-avx2" && s.reason == "disabled");
    CHECK(saw);
    CHECK(store.enable("cpu-avx2", &err) == PackageStatus::Ok);

    // A version pin the installed package does not meet skips it for that model only.
    CHECK(store.pin("m.gguf", "cpu-avx2", "9.9.9", &err) == PackageStatus::Ok);
    r = load_enabled_packages(sdir, "m.gguf");
    CHECK(pick_cpu_provider(r, nullptr, nullptr)->manifest.name == "cpu-generic");
    CHECK(pick_cpu_provider(load_enabled_packages(sdir, "other.gguf"), nullptr, nullptr)->manifest.name == "cpu-avx2");
    CHECK(store.list_json()["packages"][0]["model_pins"].size() == 1);
    CHECK(store.pin("m.gguf", "cpu-avx2", "", &err) == PackageStatus::Ok);
  }
  // Tampering after install: the checksum is checked before dlopen; the
  // package is skipped with the reason, the others still load.
  {
    std::ofstream f(sdir + "/cpu-generic/libcpu-generic.so", std::ios::binary | std::ios::app);
    f << "tampered";
  }
  auto r = load_enabled_packages(sdir, "");
  bool saw = false;
  for (const auto& s : r.skipped) saw = saw || (s.name == "cpu-generic" && s.reason.find("checksum mismatch") != std::string::npos);
  CHECK(saw);
  for (const auto& p : r.loaded) CHECK(p->manifest.name != "cpu-generic");
  // A package directory with a broken manifest is listed as invalid and skipped.
  fs::create_directories(sdir + "/cpu-broken");
  write(sdir + "/cpu-broken/cpu-broken.gkmetadata", "{\"name\": 3}");
  r = load_enabled_packages(sdir, "");
  saw = false;
  for (const auto& s : r.skipped) saw = saw || (s.name == "cpu-broken" && s.reason.find("name") != std::string::npos);
  CHECK(saw);
  // Missing directory: nothing loaded, nothing skipped.
  r = load_enabled_packages(dir + "/nope", "");
  CHECK(!r.dir_exists && r.loaded.empty() && r.skipped.empty());
}

TEST(concurrent_processes_keep_the_state_file_whole) {
  // Several processes (as the CLI and the app would) change the state at
  // once: every write is under the lock and atomic, so the file always parses
  // and no change is lost.
  const std::string dir = fresh_dir("concurrent");
  std::string err;
  const std::string pkg = dir + "/g.gkpkg";
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", pkg, &err));
  PackageStore store(dir + "/store");
  REQUIRE(store.install(pkg, &err) == PackageStatus::Ok);
  constexpr int kProcs = 4, kRounds = 25;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      PackageStore s(dir + "/store");
      std::string e;
      bool ok = true;
      for (int i = 0; i < kRounds; ++i) {
        ok = ok && s.disable("cpu-generic", &e) == PackageStatus::Ok;
        ok = ok && s.enable("cpu-generic", &e) == PackageStatus::Ok;
        ok = ok && s.pin("model-" + std::to_string(p) + "-" + std::to_string(i) + ".gguf", "cpu-generic", "1.0.0", &e) == PackageStatus::Ok;
        auto st = json::parse(check::read_file(dir + "/store/state.json"));
        ok = ok && st.has_value();
      }
      ::_exit(ok ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  PackageState state;
  CHECK(store.read_state(&state, &err) == PackageStatus::Ok);
  CHECK(state.pins.size() == static_cast<size_t>(kProcs * kRounds));  // no lost update
  CHECK(store.list()[0].enabled);
  for (const auto& e : fs::directory_iterator(dir + "/store"))
    CHECK_MSG(e.path().filename().string().find(".tmp") == std::string::npos, "leftover %s", e.path().c_str());
}

TEST(another_process_using_a_package_blocks_disable_until_it_exits) {
  const std::string dir = fresh_dir("xproc");
  std::string err;
  const std::string pkg = dir + "/g.gkpkg";
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", pkg, &err));
  const std::string sdir = dir + "/store";
  PackageStore store(sdir);
  REQUIRE(store.install(pkg, &err) == PackageStatus::Ok);
  int to_parent[2], to_child[2];
  REQUIRE(::pipe(to_parent) == 0 && ::pipe(to_child) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The "app": loads the package and holds it until told to stop.
    auto r = load_enabled_packages(sdir, "");
    auto p = pick_cpu_provider(r, nullptr, nullptr);
    std::string lease_error;
    if (p && !record_process_lease(*p, sdir, "model app-model.gguf", &lease_error)) p.reset();
    char c = p ? 'y' : 'n';
    (void)!::write(to_parent[1], &c, 1);
    (void)!::read(to_child[0], &c, 1);
    p.reset();
    r.loaded.clear();
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(to_parent[0], &c, 1) == 1 && c == 'y');
  CHECK(store.disable("cpu-generic", &err) == PackageStatus::Busy);
  CHECK_MSG(err.find("model app-model.gguf (process " + std::to_string(pid) + ")") != std::string::npos, "%s", err.c_str());
  CHECK(store.list()[0].leased_by.size() == 1);
  c = 'q';
  (void)!::write(to_child[1], &c, 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(store.disable("cpu-generic", &err) == PackageStatus::Ok);
  // A record left by a process that died without cleaning up is stale.
  fs::create_directories(sdir + "/.leases");
  write(sdir + "/.leases/999999999-0.json", "{\"pid\": 999999999, \"package\": \"cpu-generic\", \"holder\": \"model ghost.gguf\"}\n");
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(!fs::exists(sdir + "/.leases/999999999-0.json"));
}

TEST(bundled_packages_dir_is_found_without_setup) {
  // $GUILD_BUNDLED_PACKAGES_DIR decides when set ("" = no bundled layer).
  CHECK(bundled_packages_dir().empty());
  ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "/somewhere/packages", 1);
  CHECK(bundled_packages_dir() == "/somewhere/packages");
  // Unset: this test binary sits in <build>/native/tests, away from
  // <build>/packages, so the build tree's directory compiled into the runtime is used.
  ::unsetenv("GUILD_BUNDLED_PACKAGES_DIR");
  const std::string found = bundled_packages_dir();
  std::error_code ec;
  CHECK_MSG(fs::equivalent(found, kBuilt, ec), "found '%s', built '%s'", found.c_str(), kBuilt.c_str());
  // The default store (user directory + discovered bundled packages) lists them.
  const std::string user = fresh_dir("discover") + "/user";
  const auto list = PackageStore(user).list();
  CHECK(find(list, "cpu-generic") && find(list, "cpu-generic")->source == PackageSource::Bundled);
  CHECK(!fs::exists(user));  // listing creates nothing
  ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1);
}

TEST(bundled_layer_enable_disable_shadow_and_uninstall) {
  const std::string dir = fresh_dir("bundled");
  const std::string user = dir + "/user";
  PackageStore store(user, kBuilt);
  std::string err;
  // Nothing installed: the bundled packages are listed (and loaded) as they are.
  auto list = store.list();
  const PackageEntry* gen = find(list, "cpu-generic");
  REQUIRE(gen);
  CHECK(gen->source == PackageSource::Bundled && gen->enabled && gen->compatible && gen->shadows.empty());
  CHECK(fs::path(gen->path).parent_path() == fs::path(kBuilt));
  json::Value j = store.list_json();
  CHECK(j["bundled_dir"].as_string() == kBuilt);
  CHECK(!j["exists"].as_bool(true));
  auto r = load_enabled_packages(store, "");
  CHECK(!r.dir_exists && r.bundled_dir == kBuilt);
  auto best = pick_cpu_provider(r, nullptr, nullptr);
  REQUIRE(best);
  CHECK(best->source == PackageSource::Bundled);

  // Disabling a bundled package writes the user's state file (made on demand);
  // the bundled directory is never written.
  CHECK_MSG(store.disable("cpu-generic", &err) == PackageStatus::Ok, "%s", err.c_str());
  CHECK(fs::exists(user + "/state.json"));
  CHECK(!find(store.list(), "cpu-generic")->enabled);
  r = load_enabled_packages(store, "");
  bool skipped = false;
  for (const auto& s : r.skipped) skipped = skipped || (s.name == "cpu-generic" && s.reason == "disabled");
  CHECK(skipped);
  for (const auto& p : r.loaded) CHECK(p->manifest.name != "cpu-generic");
  CHECK(store.enable("cpu-generic", &err) == PackageStatus::Ok);

  // A bundled package cannot be uninstalled: it would come back with the next update.
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::InvalidArgument);
  CHECK_MSG(err.find("bundled") != std::string::npos && err.find("disable it instead") != std::string::npos, "%s", err.c_str());
  CHECK(fs::exists(kBuilt + "/cpu-generic"));
  CHECK(store.disable("cpu-nope", &err) == PackageStatus::NotFound);
  CHECK_MSG(err.find("or the bundled packages") != std::string::npos, "%s", err.c_str());

  // An installed package of the same name hides the bundled one and is the one loaded.
  const std::string pkg = dir + "/g.gkpkg";
  REQUIRE(pack_package_dir(kBuilt + "/cpu-generic", pkg, &err));
  CHECK_MSG(store.install(pkg, &err) == PackageStatus::Ok, "%s", err.c_str());
  list = store.list();
  size_t generic_entries = 0;
  for (const auto& e : list) generic_entries += e.name == "cpu-generic";
  CHECK(generic_entries == 1);
  gen = find(list, "cpu-generic");
  CHECK(gen->source == PackageSource::User && gen->shadows == kBuilt + "/cpu-generic");
  r = load_enabled_packages(store, "");
  bool user_copy = false;
  for (const auto& p : r.loaded)
    if (p->manifest.name == "cpu-generic") user_copy = p->source == PackageSource::User && p->library_path.rfind(user, 0) == 0;
  CHECK(user_copy);
  // Uninstalling it brings the bundled one back.
  CHECK(store.uninstall("cpu-generic", &err) == PackageStatus::Ok);
  CHECK(find(store.list(), "cpu-generic")->source == PackageSource::Bundled);

  // The bundled directory used as the user's directory is listed once.
  const auto same = PackageStore(kBuilt, kBuilt).list();
  size_t n = 0;
  for (const auto& e : same) n += e.name == "cpu-generic";
  CHECK(n == 1);
  CHECK(PackageStore(kBuilt, kBuilt).bundled_dir().empty());
}

TEST(per_op_priority_fills_in_what_the_chosen_provider_lacks) {
  // A provider table may leave rows empty (a type it does not support, an
  // activation quantizer it does not have); the next provider in priority
  // order serves those ops. Built here from the real packages: "cpu-partial"
  // is cpu-generic's table without its Q4_K row and its Q8_K quantizer.
  std::string err;
  auto open_built = [&](const std::string& name) {
    auto m = read_manifest_file(kBuilt + "/" + name + "/" + name + ".gkmetadata", &err);
    return m ? open_provider(kBuilt + "/" + name + "/lib" + name + ".so", *m, &err) : nullptr;
  };
  auto generic = open_built("cpu-generic");
  REQUIRE(generic && generic->cpu);
  // A second real library, whose pointers differ from cpu-generic's.
  auto other = has_avx2() ? open_built("cpu-avx2") : open_built("cpu-generic");
  REQUIRE(other && other->cpu);

  const uint32_t q4k = static_cast<uint32_t>(TensorType::Q4_K), q8k = static_cast<uint32_t>(TensorType::Q8_K);
  const uint32_t q80 = static_cast<uint32_t>(TensorType::Q8_0);
  auto partial = std::make_shared<LoadedProvider>();
  partial->manifest = other->manifest;
  partial->manifest.name = "cpu-partial";
  partial->score = 50;
  partial->composed = *other->cpu;
  partial->composed.types[q4k] = TypeKernels{};
  partial->composed.quantize_act[q8k] = nullptr;
  partial->cpu = &partial->composed;

  PackageLoadResult r;
  r.dir = fresh_dir("compose");
  r.loaded = {partial, generic};
  CHECK(pick_cpu_provider(r, nullptr, nullptr) == partial);
  CpuOpProviders ops;
  {
    auto composed = compose_cpu_kernels(partial, r, "model t.gguf", &ops, &err);
    REQUIRE(composed && composed != partial && composed->cpu);
    CHECK(ops.primary == "cpu-partial");
    CHECK(composed->cpu->types[q4k].vec_dot == generic->cpu->types[q4k].vec_dot);
    CHECK(composed->cpu->types[q4k].dequant_row == generic->cpu->types[q4k].dequant_row);
    CHECK(composed->cpu->types[q4k].gemm == generic->cpu->types[q4k].gemm);
    CHECK(composed->cpu->types[q80].vec_dot == other->cpu->types[q80].vec_dot);
    CHECK(composed->cpu->quantize_act[q8k] == generic->cpu->quantize_act[q8k]);
    CHECK(composed->cpu->attn_scores_f16 == other->cpu->attn_scores_f16);
    CHECK(ops.type_rows.size() == 1 && ops.type_rows[0].first == "q4_K" && ops.type_rows[0].second == "cpu-generic");
    CHECK(ops.act_quantizers.size() == 1 && ops.act_quantizers[0].second == "cpu-generic");
    // The contributor is leased for the composed table's life, here and for other processes.
    std::vector<std::string> holders;
    CHECK(package_holders(r.dir, "cpu-generic", &holders, &err));
    CHECK(holders.size() == 1 && holders[0] == "model t.gguf");
    CHECK(fs::exists(r.dir + "/.leases"));
  }
  std::vector<std::string> holders;
  CHECK(package_holders(r.dir, "cpu-generic", &holders, &err) && holders.empty());
  // A provider that lacks nothing is used as it is.
  CHECK(compose_cpu_kernels(generic, r, "model t.gguf", &ops, &err) == generic);
  CHECK(ops.type_rows.empty() && ops.act_quantizers.empty());
}
