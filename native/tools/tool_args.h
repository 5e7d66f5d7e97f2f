// Tiny flag parser for the native tools: --name value pairs and --flag switches.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace guild::tools {

class Args {
 public:
  // Returns false (and prints usage to stderr) on a malformed command line.
  bool parse(int argc, char** argv, const std::vector<std::string>& flags_with_value,
             const std::vector<std::string>& switches, const char* usage);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Integer/float getters exit(2) with a message on a malformed value.
  long long get_int(const std::string& name, long long fallback) const;
  double get_float(const std::string& name, double fallback) const;
  std::vector<int> get_int_list(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

[[noreturn]] void die(const std::string& message);  // "guild: error: …", exit 1

}  // namespace guild::tools
