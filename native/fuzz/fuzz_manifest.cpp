// Fuzz target: the package manifest (packages/manifest.h) and the JSON
// library under it (core/json.h). The input is a .gkmetadata text.
//  * parse_manifest: a manifest it accepts survives to_json -> serialize ->
//    parse_manifest unchanged, and requirement_problem() answers for it;
//  * json::parse (lenient and strict): a document it accepts serializes
//    (compact and pretty) to text that parses back to an equal document.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "fuzz_check.h"
#include "verbose.h"
#include "packages/manifest.h"

using namespace guild;

namespace {

bool same_manifest(const packages::Manifest& a, const packages::Manifest& b) {
  if (a.provides.size() != b.provides.size()) return false;
  for (size_t i = 0; i < a.provides.size(); ++i)
    if (a.provides[i].op != b.provides[i].op || a.provides[i].types != b.provides[i].types ||
        a.provides[i].device != b.provides[i].device)
      return false;
  return a.name == b.name && a.version == b.version && a.abi == b.abi && a.description == b.description &&
         a.cpu_features == b.cpu_features && a.cuda_compute_capability == b.cuda_compute_capability &&
         a.cuda_driver == b.cuda_driver && a.library == b.library && a.sha256 == b.sha256;
}

void check_json_round_trip(std::string_view text, const json::ParseOptions& options) {
  std::string err;
  const std::optional<json::Value> doc = json::parse(text, &err, options);
  if (!doc) {
    FUZZ_CHECK(!err.empty() && err.find('\n') == std::string::npos, "refused without a one-line reason");
    return;
  }
  for (bool pretty : {false, true}) {
    const std::string out = json::serialize(*doc, pretty);
    const std::optional<json::Value> back = json::parse(out, &err, options);
    FUZZ_CHECK(back.has_value(), "serialize wrote text parse refuses (%s): %.200s", err.c_str(), out.c_str());
    FUZZ_CHECK(*back == *doc, "serialize -> parse changed the document: %.200s", out.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::string err;
  const std::optional<packages::Manifest> m = packages::parse_manifest(text, &err);
  if (m) {
    const std::string written = json::serialize(m->to_json(), true);
    std::string err2;
    const std::optional<packages::Manifest> again = packages::parse_manifest(written, &err2);
    FUZZ_CHECK(again.has_value(), "to_json wrote a manifest parse_manifest refuses (%s): %.300s", err2.c_str(),
               written.c_str());
    FUZZ_CHECK(same_manifest(*m, *again), "to_json -> parse_manifest changed the manifest: %.300s", written.c_str());
    FUZZ_LOG("manifest %s: %s", m->name.c_str(), packages::requirement_problem(*m).c_str());
  } else {
    FUZZ_LOG("manifest: %s", err.c_str());
    FUZZ_CHECK(!err.empty(), "a manifest refused without a reason");
  }

  json::ParseOptions lenient;
  check_json_round_trip(text, lenient);
  json::ParseOptions strict;
  strict.reject_duplicate_keys = true;
  strict.max_depth = 16;
  check_json_round_trip(text, strict);
  return 0;
}
