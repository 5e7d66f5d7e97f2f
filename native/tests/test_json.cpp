// guild::json: parser strictness, escapes, numbers, accessors, serializer.
#include "check.h"
#include "core/json.h"

#include <limits>

using guild::json::parse;
using guild::json::serialize;
using guild::json::Type;
using guild::json::Value;

static bool parses(std::string_view s) { return parse(s).has_value(); }

TEST(scalars) {
  CHECK(parse("null")->is_null());
  CHECK(parse("true")->as_bool() == true);
  CHECK(parse(" false ")->as_bool(true) == false);
  CHECK(parse("\"hi\"")->as_string() == "hi");
  CHECK(parse("0")->as_int() == 0);
  CHECK(parse("-12")->as_int() == -12);
  CHECK(parse("1.5")->as_double() == 1.5);
  CHECK(parse("1.5")->is_int() == false);
  CHECK(parse("1e2")->is_int() && parse("1e2")->as_int() == 100);
  CHECK(parse("-0.25e-2")->as_double() == -0.0025);
  // int64 beyond 2^53 kept exactly
  CHECK(parse("9007199254740993")->as_int() == 9007199254740993LL);
  CHECK(parse("-9223372036854775808")->as_int() == INT64_MIN);
  CHECK(parse("9223372036854775807")->as_int() == INT64_MAX);
  // beyond int64: a double
  auto big = parse("18446744073709551616");
  REQUIRE(big);
  CHECK(!big->is_int() && big->as_double() == 18446744073709551616.0);
  // Overflow is an error (as infinity it could only be written back as null); underflow reads as 0.
  CHECK(!parse("1e400"));
  CHECK(!parse("[-1e400]"));
  CHECK(parse("1e-400")->as_double() == 0.0);
}

TEST(strict_rejections) {
  const char* bad[] = {
      "", " ", "nul", "True", "01", "-", "+1", "1.", ".5", "1e", "1e+", "0x10", "NaN", "Infinity",
      "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{a:1}", "{'a':1}", "\"abc", "\"a\tb\"",
      "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "[1] x", "// c\n1",
      "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[", "{", "{\"a\":}", "\"\x01\"",
  };
  for (const char* s : bad) CHECK_MSG(!parses(s), "accepted: %s", s);
  std::string err;
  CHECK(!parse("{\n  \"a\": [1,,2]\n}", &err));
  CHECK_MSG(err.rfind("line 2, column 11:", 0) == 0, "%s", err.c_str());
}

TEST(escapes_and_unicode) {
  auto v = parse(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u4e2d\ud83d\ude80")");
  REQUIRE(v);
  CHECK(v->as_string() == "a\"b\\c/d\b\f\n\r\tA\xc3\xa9\xe4\xb8\xad\xf0\x9f\x9a\x80");
  // raw UTF-8 passes through
  CHECK(parse("\"\xe4\xb8\xad\xf0\x9f\xa6\x99\"")->as_string() == "\xe4\xb8\xad\xf0\x9f\xa6\x99");
  // serializer escapes control characters only
  Value s(std::string("q\"\\\n\x01\x1f\x7f \xc3\xa9", 10));
  CHECK(serialize(s) == "\"q\\\"\\\\\\n\\u0001\\u001f\x7f \xc3\xa9\"");
  // invalid UTF-8 becomes U+FFFD so the output stays valid JSON
  CHECK(serialize(Value(std::string("a\xff" "b"))) == "\"a\xef\xbf\xbd" "b\"");
  CHECK(parses(serialize(Value(std::string("\x80\xc3", 2)))));
}

TEST(depth_limit) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  CHECK(parses(deep));
  CHECK(!parse(deep, nullptr, 99));
  CHECK(parse(deep, nullptr, 100));
  std::string very(100000, '[');  // must not overflow the stack
  std::string err;
  CHECK(!parse(very, &err));
  CHECK(err.find("too deep") != std::string::npos);
}

TEST(containers_and_order) {
  auto v = parse(R"({"z": 1, "a": [true, null, {"k": "v"}], "m": {}})");
  REQUIRE(v);
  CHECK(v->is_object() && v->size() == 3);
  CHECK(v->as_object()[0].first == "z" && v->as_object()[1].first == "a");
  const Value& doc = *v;
  CHECK(doc["a"].is_array() && doc["a"].size() == 3);
  CHECK(doc["a"][0].as_bool());
  CHECK(doc["a"].at(1).is_null());
  CHECK(doc["a"][2]["k"].as_string() == "v");
  CHECK(doc["a"][7].is_null());          // out of range: null
  CHECK(doc["missing"]["deeper"].is_null());
  CHECK(doc["z"]["x"].is_null());        // not an object: null
  CHECK(doc.contains("m") && !doc.contains("q"));
  CHECK(doc["m"].is_object() && doc["m"].empty());
  CHECK(doc["a"].as_string().empty());   // wrong type: fallback
  CHECK(doc["z"].as_int(-1) == 1 && doc["a"].as_int(-1) == -1);
}

TEST(builders_and_serialize) {
  Value o = Value::object();
  o["name"] = "guild";
  o["n"] = 3;
  o["pi"] = 3.14159;
  o["ids"] = Value::array({1, 2, 3});
  o["nested"]["x"] = nullptr;            // null member converted to an object
  o.set("n", 4);                         // replace keeps position
  Value list;                            // null -> array on push_back
  list.push_back("a");
  list.push_back(Value::object());
  o["list"] = list;
  CHECK(serialize(o) ==
        R"({"name":"guild","n":4,"pi":3.14159,"ids":[1,2,3],"nested":{"x":null},"list":["a",{}]})");
  CHECK(serialize(o, true) ==
        "{\n  \"name\": \"guild\",\n  \"n\": 4,\n  \"pi\": 3.14159,\n  \"ids\": [\n    1,\n    2,\n    3\n  ],\n"
        "  \"nested\": {\n    \"x\": null\n  },\n  \"list\": [\n    \"a\",\n    {}\n  ]\n}");
  auto back = parse(serialize(o, true));
  REQUIRE(back);
  CHECK(*back == o);
}

TEST(numbers_serialize) {
  CHECK(serialize(Value(1.0)) == "1");
  CHECK(serialize(Value(-2.0)) == "-2");
  CHECK(serialize(Value(0.1)) == "0.1");
  CHECK(serialize(Value(1.0 / 3.0)) == "0.3333333333333333");
  CHECK(serialize(Value(1e300)) == "1e+300");
  CHECK(serialize(Value(5e-324)) == "5e-324");
  CHECK(serialize(Value(INT64_MIN)) == "-9223372036854775808");
  CHECK(serialize(Value(uint64_t(18446744073709551615ULL))) == "18446744073709551616");
  CHECK(serialize(Value(std::nan(""))) == "null");
  CHECK(serialize(Value(std::numeric_limits<float>::infinity())) == "null");
  CHECK(serialize(Value(0.1f)) == "0.10000000149011612");
  // round trip of awkward doubles
  for (double d : {0.1, 1e-7, 123456.789, 2.2250738585072014e-308, 1.7976931348623157e308, -3.5e-10}) {
    auto v = parse(serialize(Value(d)));
    CHECK(v && v->as_double() == d);
  }
}

TEST(fixture_file_roundtrip) {
  const char* env = std::getenv("GUILD_FIXTURES");
  if (!env) return;
  std::string path = std::string(env) + "/expected/qwen3-vocab/tokenize.json";
  if (!std::filesystem::exists(path)) return;
  std::string text = check::read_file(path);
  std::string err;
  auto v = parse(text, &err);
  REQUIRE(v);
  CHECK((*v)["model"].as_string() == "models/qwen3-vocab.gguf");
  CHECK((*v)["vectors"].size() == 30);
  CHECK((*v)["vectors"][0]["no_parse_special"]["ids"][0].as_int() == 9707);
  auto again = parse(serialize(*v, true));
  REQUIRE(again);
  CHECK(*again == *v);
}
