// GUILD_FUZZ_VERBOSE=1: harnesses say what each input did (refused and why,
// loaded, generated), to check that seeds reach deep into the code. Off while
// fuzzing: libFuzzer's own output is what matters there.
#pragma once
#include <cstdio>
#include <cstdlib>

namespace guild::fuzz {

inline bool verbose() {
  static const bool on = [] {
    const char* v = std::getenv("GUILD_FUZZ_VERBOSE");
    return v && *v && *v != '0';
  }();
  return on;
}

}  // namespace guild::fuzz

#define FUZZ_LOG(...)                                   \
  do {                                                  \
    if (::guild::fuzz::verbose()) {                     \
      std::fprintf(stderr, "  -> " __VA_ARGS__);        \
      std::fprintf(stderr, "\n");                       \
    }                                                   \
  } while (0)
