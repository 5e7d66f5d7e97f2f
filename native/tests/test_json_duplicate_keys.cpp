// json::ParseOptions::reject_duplicate_keys (used for package manifests and
// state files): a key given twice in one object is an error naming it and
// its position, at any depth; the same key in different objects is fine; the
// default parse keeps its behaviour (both members kept, lookups see the first).
#include <chrono>
#include <string>

#include "check.h"
#include "core/json.h"

using namespace guild;

namespace {

json::ParseOptions strict() {
  json::ParseOptions o;
  o.reject_duplicate_keys = true;
  return o;
}

}  // namespace

TEST(duplicates_are_errors_with_the_option) {
  std::string err;
  CHECK(!json::parse("{\"a\": 1, \"b\": 2, \"a\": 3}", &err, strict()));
  CHECK_MSG(err == "line 1, column 18: duplicate key \"a\"", "%s", err.c_str());
  CHECK(!json::parse("{\"x\": [{\"k\": 1}, {\"k\": 2, \"m\": {\"q\": 1,\n \"q\": 2}}]}", &err, strict()));
  CHECK_MSG(err == "line 2, column 2: duplicate key \"q\"", "%s", err.c_str());
  // Keys equal after unescaping are the same key.
  CHECK(!json::parse("{\"ab\": 1, \"a\\u0062\": 2}", &err, strict()));
  CHECK(err.find("duplicate key \"ab\"") != std::string::npos);
  // The name shown is escaped and bounded.
  const std::string long_key(300, 'k');
  CHECK(!json::parse("{\"" + long_key + "\": 1, \"" + long_key + "\": 2}", &err, strict()));
  CHECK(err.size() < 120 && err.find("...") != std::string::npos);
  CHECK(!json::parse("{\"a\\nb\": 1, \"a\\nb\": 2}", &err, strict()));
  CHECK(err.find("\"a\\nb\"") != std::string::npos);
}

TEST(distinct_keys_and_the_default_are_unchanged) {
  std::string err;
  auto v = json::parse("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"c\": [{\"k\": 3}, {\"k\": 4}]}", &err, strict());
  REQUIRE(v);
  CHECK((*v)["b"]["k"].as_int() == 2);
  // Without the option both members are kept and lookups see the first, as before.
  auto loose = json::parse("{\"a\": 1, \"a\": 3}", &err);
  REQUIRE(loose);
  CHECK((*loose)["a"].as_int() == 1);
  CHECK(loose->size() == 2);
  // max_depth still applies through the options.
  json::ParseOptions shallow = strict();
  shallow.max_depth = 2;
  CHECK(!json::parse("[[[1]]]", &err, shallow));
  CHECK(err.find("nesting too deep") != std::string::npos);
}

TEST(a_large_object_stays_fast) {
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const auto t = std::chrono::steady_clock::now();
  std::string err;
  auto v = json::parse(text, &err, strict());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  REQUIRE(v);
  CHECK(v->size() == 200000);
  CHECK_MSG(s < 5.0, "%.2f s", s);
  text.insert(text.size() - 1, ",\"k7\":0");
  CHECK(!json::parse(text, &err, strict()));
  CHECK(err.find("duplicate key \"k7\"") != std::string::npos);
}
