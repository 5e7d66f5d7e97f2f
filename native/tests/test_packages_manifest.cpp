// Strict manifests (docs/PACKAGES.md, "Manifest"): a field, op or tensor type
// this runtime does not know, and a key given twice, are refused with a
// message naming them — never ignored, since an ignored field could be a
// requirement nobody enforces and a second "sha256" could quietly win. The
// built-in manifests pass; an archive carrying a bad one is refused.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "check.h"
#include "core/json.h"
#include "packages/archive.h"
#include "packages/manifest.h"
#include "packages/sha256.h"
#include "packages/store.h"

using namespace guild;
using namespace guild::packages;
namespace fs = std::filesystem;

namespace {

const std::string kBuilt = GUILD_BUILT_PACKAGES_DIR;
const std::string kSha(64, 'a');

// A valid manifest with `extra` spliced in before its closing brace (or, with
// replace_provides, its provides array replaced).
std::string manifest_with(const std::string& extra, const std::string& provides = "") {
  return "{\"name\": \"cpu-x\", \"version\": \"1.0.0\", \"abi\": 1, \"description\": \"x\", \"provides\": " +
         (provides.empty() ? std::string("[{\"op\": \"dequant\", \"types\": [\"Q8_0\", \"q4_K\"], \"device\": \"cpu\"}]") : provides) +
         ", \"library\": \"libcpu-x.so\", \"sha256\": \"" + kSha + "\"" + extra + "}";
}

std::string refusal(const std::string& text) {
  std::string err;
  if (parse_manifest(text, &err)) return "(accepted)";
  return err;
}

}  // namespace

TEST(a_valid_manifest_and_the_built_ones_parse) {
  std::string err;
  auto m = parse_manifest(manifest_with(""), &err);
  REQUIRE(m);
  CHECK(m->provides.size() == 1 && m->provides[0].types.size() == 2);
  CHECK(parse_manifest(manifest_with(", \"requires\": {\"cpu_features\": [\"avx2\"], \"cuda_driver\": \"13.0\"}"), &err));
  CHECK(parse_manifest(manifest_with("", "[{\"op\": \"decoder\", \"types\": [\"F16\", \"BF16\"], \"device\": \"cuda\"}]"), &err));
  CHECK(parse_manifest(manifest_with("", "[{\"op\": \"gemm\", \"types\": [\"*\"]}]"), &err));  // device defaults to cpu
  int built = 0;
  for (const auto& e : fs::directory_iterator(kBuilt)) {
    const std::string name = e.path().filename().string();
    if (!fs::exists(e.path() / (name + kManifestSuffix))) continue;
    CHECK_MSG(read_manifest_file((e.path() / (name + kManifestSuffix)).string(), &err), "%s", err.c_str());
    ++built;
  }
  CHECK(built >= 2);
}

TEST(unknown_fields_ops_and_types_are_refused_by_name) {
  const std::pair<std::string, std::string> cases[] = {
      {manifest_with(", \"licence\": \"MIT\""), "unknown field 'licence'"},
      {manifest_with(", \"requires\": {\"gpu_features\": [\"x\"]}"), "requires: unknown field 'gpu_features'"},
      {manifest_with("", "[{\"op\": \"dequant\", \"types\": [\"*\"], \"devices\": \"cpu\"}]"), "provides[0]: unknown field 'devices'"},
      {manifest_with("", "[{\"op\": \"dequant\", \"types\": [\"*\"]}, {\"op\": \"fused_moe\", \"types\": [\"*\"]}]"),
       "provides[1].op: unknown op 'fused_moe'"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": [\"Q8_0\", \"Q9_9\"]}]"), "provides[0].types: unknown tensor type 'Q9_9'"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": [\"*\", \"Q8_0\"]}]"), "must be the only entry"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": [\"Q8_0\", \"Q8_0\"]}]"), "'Q8_0' is listed twice"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": []}]"), "provides[0].types: missing or not a non-empty array"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": [\"*\"], \"device\": 7}]"), "provides[0].device: not a string"},
      {manifest_with("", "[{\"op\": \"vec_dot\", \"types\": [\"*\"], \"device\": \"tpu\"}]"), "'tpu' (expected cpu or cuda)"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string err = refusal(text);
    CHECK_MSG(err.find(expected) != std::string::npos, "expected '%s', got '%s'", expected.c_str(), err.c_str());
  }
}

TEST(duplicate_keys_are_refused_at_any_depth) {
  const std::pair<std::string, std::string> cases[] = {
      {manifest_with(", \"sha256\": \"" + std::string(64, 'b') + "\""), "duplicate key \"sha256\""},
      {manifest_with(", \"name\": \"cpu-y\""), "duplicate key \"name\""},
      {manifest_with("", "[{\"op\": \"dequant\", \"op\": \"vec_dot\", \"types\": [\"*\"]}]"), "duplicate key \"op\""},
      {manifest_with(", \"requires\": {\"cpu_features\": [], \"cpu_features\": [\"avx512f\"]}"), "duplicate key \"cpu_features\""},
  };
  for (const auto& [text, expected] : cases) {
    const std::string err = refusal(text);
    CHECK_MSG(err.find(expected) != std::string::npos, "expected '%s', got '%s'", expected.c_str(), err.c_str());
    CHECK(err.find("not valid JSON: line 1, column") == 0);
  }
}

TEST(an_archive_with_a_loose_manifest_is_not_installed) {
  ::setenv("GUILD_BUNDLED_PACKAGES_DIR", "", 1);
  const std::string dir = check::tmp_dir() + "/pkg-manifest-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string library = check::read_file(kBuilt + "/cpu-generic/libcpu-generic.so");
  auto doc = json::parse(check::read_file(kBuilt + "/cpu-generic/cpu-generic.gkmetadata"));
  REQUIRE(doc);
  doc->set("homepage", "https://example.invalid");
  const std::string manifest = json::serialize(*doc, true);
  std::string out("GUILDPKG", 8);
  auto le = [&](uint64_t v, int n) { for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i))); };
  le(1, 4);
  le(manifest.size(), 4);
  le(library.size(), 8);
  out += manifest + library;
  uint8_t d[32];
  Sha256 h;
  h.update(out.data(), out.size());
  h.finish(d);
  out.append(reinterpret_cast<const char*>(d), 32);
  {
    std::ofstream f(dir + "/loose.gkpkg", std::ios::binary);
    f << out;
  }
  PackageStore store(dir + "/store");
  std::string err;
  CHECK(store.install(dir + "/loose.gkpkg", &err) == PackageStatus::Corrupt);
  CHECK_MSG(err.find("invalid manifest: unknown field 'homepage'") != std::string::npos, "%s", err.c_str());
  CHECK(store.list().empty());
}
