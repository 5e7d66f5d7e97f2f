#include "tool_args.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace guild::tools {

void die(const std::string& message) {
  std::fprintf(stderr, "guild: error: %s\n", message.c_str());
  std::exit(1);
}

bool Args::parse(int argc, char** argv, const std::vector<std::string>& with_value,
                 const std::vector<std::string>& switches, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) { std::fprintf(stderr, "unexpected argument '%s'\n%s", a.c_str(), usage); return false; }
    a = a.substr(2);
    if (std::find(switches.begin(), switches.end(), a) != switches.end()) { values_[a] = "1"; continue; }
    if (std::find(with_value.begin(), with_value.end(), a) == with_value.end() || i + 1 >= argc) {
      std::fprintf(stderr, "unknown flag or missing value: --%s\n%s", a.c_str(), usage);
      return false;
    }
    values_[a] = argv[++i];
  }
  return true;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

long long Args::get_int(const std::string& name, long long fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end) { std::fprintf(stderr, "guild: --%s expects an integer, got '%s'\n", name.c_str(), v.c_str()); std::exit(2); }
  return x;
}

double Args::get_float(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end) { std::fprintf(stderr, "guild: --%s expects a number, got '%s'\n", name.c_str(), v.c_str()); std::exit(2); }
  return x;
}

std::vector<int> Args::get_int_list(const std::string& name) const {
  std::vector<int> out;
  std::stringstream ss(get(name));
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    const long x = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end) { std::fprintf(stderr, "guild: --%s expects comma-separated integers\n", name.c_str()); std::exit(2); }
    out.push_back(static_cast<int>(x));
  }
  return out;
}

}  // namespace guild::tools
