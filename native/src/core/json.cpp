#include "core/json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

namespace guild::json {

namespace {

const Value kNull;
const std::string kEmptyString;
const Array kEmptyArray;
const Object kEmptyObject;

// Exact int64 when d is integral and inside [-2^63, 2^63).
bool integral_i64(double d, int64_t* out) {
  if (!std::isfinite(d) || d != std::floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
    return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// Length of the well-formed UTF-8 sequence at s[0..n), 0 if invalid.
size_t utf8_seq_len(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) { len = 3; lo = 0xA0; }
  else if (c == 0xED) { len = 3; hi = 0x9F; }  // no UTF-16 surrogates
  else if (c >= 0xE1 && c <= 0xEF) len = 3;
  else if (c == 0xF0) { len = 4; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else if (c == 0xF4) { len = 4; hi = 0x8F; }
  else return 0;
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((s[k] & 0xC0) != 0x80) return 0;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void write_string(std::string& out, std::string_view s);

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options)
      : s_(text), max_depth_(options.max_depth), reject_duplicate_keys_(options.reject_duplicate_keys) {}

  std::optional<Value> run(std::string* error) {
    skip_ws();
    Value v;
    bool ok = parse_value(v, 0);
    if (ok) {
      skip_ws();
      if (pos_ != s_.size()) ok = fail("unexpected data after the JSON value");
    }
    if (ok) return v;
    if (error) {
      size_t line = 1, col = 1;
      for (size_t i = 0; i < err_pos_ && i < s_.size(); ++i) {
        if (s_[i] == '\n') { ++line; col = 1; } else { ++col; }
      }
      *error = "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + err_;
    }
    return std::nullopt;
  }

 private:
  bool fail(const char* what) {
    if (err_.empty()) { err_ = what; err_pos_ = pos_; }
    return false;
  }
  bool fail_at(std::string what, size_t pos) {
    if (err_.empty()) { err_ = std::move(what); err_pos_ = pos; }
    return false;
  }
  bool eof() const { return pos_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[pos_]; }
  void skip_ws() {
    while (!eof() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(Value& out, int depth) {
    if (eof()) return fail("unexpected end of input");
    switch (s_[pos_]) {
      case '{': return parse_object(out, depth + 1);
      case '[': return parse_array(out, depth + 1);
      case '"': { std::string str; if (!parse_string(str)) return false; out = Value(std::move(str)); return true; }
      case 't': out = Value(true); return literal("true");
      case 'f': out = Value(false); return literal("false");
      case 'n': out = Value(); return literal("null");
      default: return parse_number(out);
    }
  }

  bool parse_array(Value& out, int depth) {
    if (depth > max_depth_) return fail("nesting too deep");
    ++pos_;  // '['
    Array items;
    skip_ws();
    if (peek() == ']') { ++pos_; out = Value(std::move(items)); return true; }
    for (;;) {
      skip_ws();
      items.emplace_back();
      if (!parse_value(items.back(), depth)) return false;
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == ']') { ++pos_; break; }
      return fail("expected ',' or ']' in array");
    }
    out = Value(std::move(items));
    return true;
  }

  bool parse_object(Value& out, int depth) {
    if (depth > max_depth_) return fail("nesting too deep");
    ++pos_;  // '{'
    Object members;
    if (reject_duplicate_keys_) start_key_set(depth);
    skip_ws();
    if (peek() == '}') { ++pos_; out = Value(std::move(members)); return true; }
    for (;;) {
      skip_ws();
      if (peek() != '"') return fail("expected a string key in object");
      const size_t key_pos = pos_;
      std::string key;
      if (!parse_string(key)) return false;
      if (reject_duplicate_keys_ && !first_use(depth, key)) return duplicate_key(key, key_pos);
      skip_ws();
      if (peek() != ':') return fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      members.emplace_back(std::move(key), Value());
      if (!parse_value(members.back().second, depth)) return false;
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == '}') { ++pos_; break; }
      return fail("expected ',' or '}' in object");
    }
    out = Value(std::move(members));
    return true;
  }

  bool hex4(uint32_t* out) {
    if (s_.size() - pos_ < 4) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_ + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return fail("invalid hex digit in \\u escape");
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  bool parse_string(std::string& out) {
    ++pos_;  // opening quote
    for (;;) {
      if (eof()) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') { ++pos_; return true; }
      if (c < 0x20) return fail("control character in string");
      if (c == '\\') {
        ++pos_;
        if (eof()) return fail("unterminated string");
        char e = s_[pos_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp;
            if (!hex4(&cp)) return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo;
              if (s_.substr(pos_, 2) != "\\u") return fail("high surrogate without a low surrogate");
              pos_ += 2;
              if (!hex4(&lo)) return false;
              if (lo < 0xDC00 || lo > 0xDFFF) return fail("high surrogate without a low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default: --pos_; return fail("invalid escape in string");
        }
        continue;
      }
      size_t len = utf8_seq_len(reinterpret_cast<const unsigned char*>(s_.data()) + pos_, s_.size() - pos_);
      if (len == 0) return fail("invalid UTF-8 in string");
      out.append(s_.data() + pos_, len);
      pos_ += len;
    }
  }

  bool parse_number(Value& out) {
    const size_t start = pos_;
    auto digits = [&] { size_t b = pos_; while (!eof() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_; return pos_ - b; };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') return fail("leading zero in number");
    } else if (digits() == 0) {
      pos_ = start;
      return fail("unexpected character");
    }
    bool integer = true;
    if (peek() == '.') {
      ++pos_;
      integer = false;
      if (digits() == 0) return fail("expected digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integer = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) return fail("expected digits in exponent");
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (integer) {
      long long i = 0;
      auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) { out = Value(i); return true; }
    }
    double d = 0.0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow reads as the (sub)normal near 0; overflow is refused: as
      // +-inf it would be written back as null (JSON has no infinity), so a
      // read-modify-write of a file would change its value (RFC 8259 §6
      // allows limits on the range).
      d = std::strtod(std::string(b, e).c_str(), nullptr);
      if (std::isinf(d)) {
        pos_ = start;
        return fail("number out of range");
      }
    } else if (r.ec != std::errc() || r.ptr != e) {
      return fail("invalid number");
    }
    out = Value(d);
    return true;
  }

  // Kept out of line: the common path (no option) stays as the compiler had it.
  // With reject_duplicate_keys: the keys seen so far in the object being
  // parsed at each depth (sets, so a huge object stays linear; kept here, out
  // of parse_object, so the common path is unchanged).
  void start_key_set(int depth) {
    if (keys_by_depth_.size() <= static_cast<size_t>(depth)) keys_by_depth_.resize(static_cast<size_t>(depth) + 1);
    keys_by_depth_[static_cast<size_t>(depth)].clear();
  }
  bool first_use(int depth, const std::string& key) { return keys_by_depth_[static_cast<size_t>(depth)].insert(key).second; }
  [[gnu::noinline]] bool duplicate_key(const std::string& key, size_t key_pos) {
    std::string shown;
    write_key_for_error(shown, key);
    return fail_at("duplicate key " + shown, key_pos);
  }

  // The key as JSON (quoted, escaped), at most 64 bytes of it: the error names it.
  static void write_key_for_error(std::string& out, const std::string& key) {
    constexpr size_t kShown = 64;
    if (key.size() <= kShown) { write_string(out, key); return; }
    size_t cut = kShown;  // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
    write_string(out, std::string_view(key).substr(0, cut));
    out += "...";
  }

  std::string_view s_;
  size_t pos_ = 0;
  int max_depth_;
  bool reject_duplicate_keys_ = false;
  std::vector<std::unordered_set<std::string>> keys_by_depth_;
  std::string err_;
  size_t err_pos_ = 0;
};

void write_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = p[i];
    if (c >= 0x80) {
      size_t len = utf8_seq_len(p + i, s.size() - i);
      if (len == 0) { out += "\xEF\xBF\xBD"; ++i; continue; }  // U+FFFD
      out.append(s.data() + i, len);
      i += len;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) { out += "\\u00"; out += hex[c >> 4]; out += hex[c & 15]; }
        else out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

void write_number(std::string& out, const Number& n) {
  char buf[40];
  std::to_chars_result r;
  if (n.is_int) r = std::to_chars(buf, buf + sizeof buf, n.i);
  else if (!std::isfinite(n.d)) { out += "null"; return; }
  else r = std::to_chars(buf, buf + sizeof buf, n.d);  // shortest round-trip
  out.append(buf, r.ptr);
}

void write_value(std::string& out, const Value& v, bool pretty, int indent) {
  auto newline = [&](int level) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<size_t>(level) * 2, ' ');
  };
  switch (v.type()) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; break;
    case Type::Number: {
      Number n;
      n.d = v.as_double();
      n.is_int = v.is_int();
      n.i = n.is_int ? v.as_int() : 0;
      write_number(out, n);
      break;
    }
    case Type::String: write_string(out, v.as_string()); break;
    case Type::Array: {
      const Array& a = v.as_array();
      if (a.empty()) { out += "[]"; break; }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        newline(indent + 1);
        write_value(out, a[i], pretty, indent + 1);
      }
      newline(indent);
      out += ']';
      break;
    }
    case Type::Object: {
      const Object& o = v.as_object();
      if (o.empty()) { out += "{}"; break; }
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += ',';
        newline(indent + 1);
        write_string(out, o[i].first);
        out += pretty ? ": " : ":";
        write_value(out, o[i].second, pretty, indent + 1);
      }
      newline(indent);
      out += '}';
      break;
    }
  }
}

}  // namespace

Value::Value(unsigned long long x) {
  if (x <= static_cast<unsigned long long>(INT64_MAX))
    v_ = Number{static_cast<double>(x), static_cast<int64_t>(x), true};
  else
    v_ = Number{static_cast<double>(x), 0, false};
}

Value::Value(double x) {
  Number n{x, 0, false};
  n.is_int = integral_i64(x, &n.i);
  v_ = n;
}

bool Value::as_bool(bool fallback) const { return is_bool() ? std::get<bool>(v_) : fallback; }

double Value::as_double(double fallback) const { return is_number() ? std::get<Number>(v_).d : fallback; }

int64_t Value::as_int(int64_t fallback) const {
  if (!is_number()) return fallback;
  const Number& n = std::get<Number>(v_);
  if (n.is_int) return n.i;
  if (std::isnan(n.d)) return fallback;
  if (n.d <= -9223372036854775808.0) return INT64_MIN;
  if (n.d >= 9223372036854775808.0) return INT64_MAX;
  return static_cast<int64_t>(n.d);
}

const std::string& Value::as_string() const { return is_string() ? std::get<std::string>(v_) : kEmptyString; }
const Array& Value::as_array() const { return is_array() ? std::get<Array>(v_) : kEmptyArray; }
const Object& Value::as_object() const { return is_object() ? std::get<Object>(v_) : kEmptyObject; }

Array& Value::as_array() {
  if (is_null()) v_ = Array{};
  return std::get<Array>(v_);
}
Object& Value::as_object() {
  if (is_null()) v_ = Object{};
  return std::get<Object>(v_);
}
std::string& Value::as_string() {
  if (is_null()) v_ = std::string{};
  return std::get<std::string>(v_);
}

size_t Value::size() const {
  if (is_array()) return std::get<Array>(v_).size();
  if (is_object()) return std::get<Object>(v_).size();
  return 0;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_))
    if (k == key) return &v;
  return nullptr;
}

Value* Value::find(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->find(key));
}

const Value& Value::operator[](std::string_view key) const {
  const Value* v = find(key);
  return v ? *v : kNull;
}

Value& Value::operator[](std::string_view key) {
  if (Value* v = find(key)) return *v;
  Object& o = as_object();
  o.emplace_back(std::string(key), Value());
  return o.back().second;
}

const Value& Value::at(size_t i) const {
  const Array& a = as_array();
  return i < a.size() ? a[i] : kNull;
}

Value& Value::at(size_t i) { return std::get<Array>(v_).at(i); }

Value& Value::push_back(Value v) {
  Array& a = as_array();
  a.push_back(std::move(v));
  return a.back();
}

Value& Value::set(std::string_view key, Value v) {
  Value& slot = (*this)[key];
  slot = std::move(v);
  return slot;
}

bool Value::operator==(const Value& o) const {
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::Null: return true;
    case Type::Bool: return as_bool() == o.as_bool();
    case Type::Number: {
      const Number& a = std::get<Number>(v_);
      const Number& b = std::get<Number>(o.v_);
      if (a.is_int && b.is_int) return a.i == b.i;
      return a.d == b.d;
    }
    case Type::String: return as_string() == o.as_string();
    case Type::Array: return as_array() == o.as_array();
    case Type::Object: return as_object() == o.as_object();
  }
  return false;
}

std::optional<Value> parse(std::string_view text, std::string* error, int max_depth) {
  ParseOptions options;
  options.max_depth = max_depth;
  return Parser(text, options).run(error);
}

std::optional<Value> parse(std::string_view text, std::string* error, const ParseOptions& options) {
  return Parser(text, options).run(error);
}

std::string serialize(const Value& v, bool pretty) {
  std::string out;
  write_value(out, v, pretty, 0);
  return out;
}

}  // namespace guild::json
