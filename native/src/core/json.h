// A small JSON library: a DOM value type, a strict RFC 8259 parser and a
// serializer.
//
//   std::string err;
//   auto doc = guild::json::parse(text, &err);      // nullopt + err on failure
//   int64_t n = (*doc)["n_tokens"].as_int();
//   for (const auto& id : (*doc)["ids"].as_array()) ...
//
//   json::Value out = json::Value::object();
//   out["name"] = "x";
//   out["ids"] = json::Value::array({1, 2, 3});
//   std::string s = json::serialize(out, /*pretty=*/true);
//
// Numbers are kept as double, plus an exact int64 when the number is integral
// and fits (so ids / sizes above 2^53 survive). Objects keep insertion order
// (lookup is a linear scan; fine for the configs and fixtures we read).
// Strings hold UTF-8; the parser rejects invalid UTF-8 and lone surrogates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace guild::json {

enum class Type { Null, Bool, Number, String, Array, Object };

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

struct Number {
  double d = 0.0;
  int64_t i = 0;
  bool is_int = false;  // i holds the exact value
};

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int x) : Value(static_cast<long long>(x)) {}
  Value(unsigned x) : Value(static_cast<long long>(x)) {}
  Value(long x) : Value(static_cast<long long>(x)) {}
  Value(long long x) : v_(Number{static_cast<double>(x), static_cast<int64_t>(x), true}) {}
  Value(unsigned long x) : Value(static_cast<unsigned long long>(x)) {}
  Value(unsigned long long x);
  Value(double x);
  Value(float x) : Value(static_cast<double>(x)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  static Value array(std::initializer_list<Value> items = {}) { return Value(Array(items)); }
  static Value object() { return Value(Object{}); }

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_null() const { return type() == Type::Null; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_number() const { return type() == Type::Number; }
  bool is_int() const { return is_number() && std::get<Number>(v_).is_int; }  // integral, fits int64
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }

  // Typed reads; the fallback is returned when the type does not match.
  bool as_bool(bool fallback = false) const;
  double as_double(double fallback = 0.0) const;
  // Integral numbers exactly; other numbers truncated toward zero (clamped).
  int64_t as_int(int64_t fallback = 0) const;
  const std::string& as_string() const;  // "" unless a string
  const Array& as_array() const;         // empty unless an array
  const Object& as_object() const;       // empty unless an object
  // Mutable access converts a null value to the requested container type.
  // Calling them on any other type is a programming error (throws std::bad_variant_access).
  Array& as_array();
  Object& as_object();
  std::string& as_string();

  // Elements of an array / members of an object (0 for scalars).
  size_t size() const;
  bool empty() const { return size() == 0; }

  // Object member lookup: null Value (or nullptr) when absent or not an object.
  const Value& operator[](std::string_view key) const;
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Inserts a null member when absent (a null Value becomes an object first).
  Value& operator[](std::string_view key);
  Value* find(std::string_view key);
  // Array element: null Value when out of range or not an array.
  const Value& at(size_t i) const;
  const Value& operator[](size_t i) const { return at(i); }
  Value& at(size_t i);  // must be in range (throws std::out_of_range)
  Value& operator[](size_t i) { return at(i); }

  // Builders. push_back turns a null value into an array; set() turns a null
  // value into an object and replaces an existing member of the same name.
  Value& push_back(Value v);
  Value& set(std::string_view key, Value v);

  bool operator==(const Value& o) const;

 private:
  std::variant<std::nullptr_t, bool, Number, std::string, Array, Object> v_;
};

// Strict RFC 8259: one value with optional surrounding whitespace, no comments,
// no trailing commas, no leading zeros, no NaN/Infinity, no raw control
// characters in strings, valid UTF-8, \u escapes with surrogate pairs (lone
// surrogates rejected). Nesting deeper than max_depth is an error.
// On failure: nullopt and *error = "line L, column C: what".
std::optional<Value> parse(std::string_view text, std::string* error = nullptr, int max_depth = 512);

struct ParseOptions {
  int max_depth = 512;
  // RFC 8259 leaves duplicate object keys to the reader; by default both
  // members are kept and lookups see the first. Files whose every field is a
  // decision (package manifests, package state) set this: a second "name" is
  // an error ("duplicate key \"name\"", at its position).
  bool reject_duplicate_keys = false;
};
std::optional<Value> parse(std::string_view text, std::string* error, const ParseOptions& options);

// Valid JSON. Strings: '"', '\\' and control characters escaped (\n, \t, ...
// or \u00XX), other UTF-8 written as is, invalid UTF-8 bytes replaced by
// U+FFFD. Numbers: integers without ".0", doubles in shortest round-trip form,
// NaN / infinity as null. pretty: two-space indentation, one member per line.
std::string serialize(const Value& v, bool pretty = false);

}  // namespace guild::json
