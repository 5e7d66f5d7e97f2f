// Reading the fixtures' JSON files in tests: parse (printing why on failure)
// and token-id arrays.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"
#include "core/json.h"

namespace check {

inline guild::json::Value load_json(const std::string& path) {
  std::string err;
  auto v = guild::json::parse(read_file(path), &err);
  if (!v) std::printf("  cannot parse %s: %s\n", path.c_str(), err.c_str());
  return v ? *v : guild::json::Value();
}

inline std::vector<int32_t> ids_of(const guild::json::Value& arr) {
  std::vector<int32_t> out;
  for (const auto& x : arr.as_array()) out.push_back(static_cast<int32_t>(x.as_int()));
  return out;
}

}  // namespace check
