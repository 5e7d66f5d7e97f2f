// A minimal test harness: TEST(name) { CHECK(...); } and a main that runs them
// all and prints "N passed, N failed". SKIP_TEST("why") ends the whole
// executable with exit code 77 (ctest's skip) after printing the reason.
#pragma once
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace check {

struct Case { const char* name; std::function<void()> fn; };
inline std::vector<Case>& registry() { static std::vector<Case> r; return r; }
inline int& failures_in_case() { static int n = 0; return n; }

struct Registrar {
  Registrar(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

[[noreturn]] inline void skip_all(const std::string& why) {
  std::printf("SKIPPED: %s\n", why.c_str());
  std::fflush(stdout);
  std::exit(77);
}

// Fixture root ($GUILD_FIXTURES), or skip when it does not exist.
inline std::string fixtures_dir() {
  const char* env = std::getenv("GUILD_FIXTURES");
  std::string dir = env ? env : "";
  if (dir.empty() || !std::filesystem::exists(dir + "/models"))
    skip_all("reference fixtures not found (set GUILD_FIXTURES; expected ../shared/fixtures)");
  return dir;
}

inline std::string tmp_dir() {
  const char* env = std::getenv("GUILD_TEST_TMP");
  std::string dir = env ? env : "/tmp/guild-test";
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<float> read_f32(const std::string& path) {
  std::string bytes = read_file(path);
  std::vector<float> out(bytes.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace check

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)
#define TEST(name)                                                       \
  static void name();                                                    \
  static check::Registrar CHECK_CAT(reg_, name)(#name, name);            \
  static void name()

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);     \
      ++check::failures_in_case();                                               \
    }                                                                            \
  } while (0)

#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);     \
      std::printf(__VA_ARGS__);                                                  \
      std::printf("\n");                                                         \
      ++check::failures_in_case();                                               \
    }                                                                            \
  } while (0)

#define REQUIRE(cond)                                                            \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("  %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #cond);   \
      ++check::failures_in_case();                                               \
      return;                                                                    \
    }                                                                            \
  } while (0)

#define REQUIRE_MSG(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("  %s:%d: REQUIRE(%s) failed: ", __FILE__, __LINE__, #cond);   \
      std::printf(__VA_ARGS__);                                                  \
      std::printf("\n");                                                         \
      ++check::failures_in_case();                                               \
      return;                                                                    \
    }                                                                            \
  } while (0)

#define SKIP_TEST(why) check::skip_all(why)

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  const char* only = argc > 1 ? argv[1] : nullptr;
  for (auto& c : check::registry()) {
    if (only && std::string(c.name).find(only) == std::string::npos) continue;
    check::failures_in_case() = 0;
    std::printf("[ RUN  ] %s\n", c.name);
    std::fflush(stdout);
    c.fn();
    if (check::failures_in_case() == 0) { ++passed; std::printf("[  OK  ] %s\n", c.name); }
    else { ++failed; std::printf("[ FAIL ] %s\n", c.name); }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
