// guild_pkgtool: build-time and packaging helper for kernel packages.
//   guild_pkgtool manifest TEMPLATE LIBRARY OUT   write OUT: TEMPLATE's JSON plus
//                                                  "library" (LIBRARY's file name)
//                                                  and "sha256" (of LIBRARY's bytes)
//   guild_pkgtool pack PACKAGE_DIR OUT.gkpkg       pack a package directory
//   guild_pkgtool sha256 FILE...                   print "<hex>  <file>" lines
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/json.h"
#include "packages/archive.h"
#include "packages/manifest.h"
#include "packages/sha256.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: guild_pkgtool manifest TEMPLATE LIBRARY OUT\n"
               "       guild_pkgtool pack PACKAGE_DIR OUT.gkpkg\n"
               "       guild_pkgtool sha256 FILE...\n");
  return 2;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "guild_pkgtool: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace guild;
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  std::string err;
  if (cmd == "manifest" && argc == 5) {
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) return fail(std::string(argv[2]) + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    json::ParseOptions strict;
    strict.reject_duplicate_keys = true;  // a template's second key would be dropped silently
    auto doc = json::parse(ss.str(), &err, strict);
    if (!doc || !doc->is_object()) return fail(std::string(argv[2]) + ": " + (err.empty() ? "not a JSON object" : err));
    const std::string sha = packages::sha256_file_hex(argv[3], &err);
    if (sha.empty()) return fail(err);
    doc->set("library", std::filesystem::path(argv[3]).filename().string());
    doc->set("sha256", sha);
    const std::string text = json::serialize(*doc, true) + "\n";
    if (!packages::parse_manifest(text, &err)) return fail(std::string(argv[2]) + ": the generated manifest is invalid: " + err);
    if (!packages::write_file_atomic(argv[4], text, &err)) return fail(err);
    return 0;
  }
  if (cmd == "pack" && argc == 4) {
    if (!packages::pack_package_dir(argv[2], argv[3], &err)) return fail(err);
    return 0;
  }
  if (cmd == "sha256" && argc >= 3) {
    for (int i = 2; i < argc; ++i) {
      const std::string sha = packages::sha256_file_hex(argv[i], &err);
      if (sha.empty()) return fail(err);
      std::printf("%s  %s\n", sha.c_str(), argv[i]);
    }
    return 0;
  }
  return usage();
}
