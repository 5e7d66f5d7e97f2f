// Replays a corpus through a harness without libFuzzer: the same
// LLVMFuzzerTestOneInput, built with the normal compiler, so every ctest run
// (CI's AddressSanitizer + UBSan one too) feeds it the committed seeds and
// the regression inputs. Arguments: files or directories (read recursively,
// in name order). A crash or a failed invariant aborts, failing the test; so
// does an input slower than GUILD_FUZZ_REPLAY_MAX_SECONDS (default 30: hangs
// are findings too) and a run that found no input at all (a wrong path would
// otherwise pass while testing nothing).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    const fs::path p(argv[i]);
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p, ec))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "%s: not found\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs found\n");
    return 2;
  }
  const char* max_env = std::getenv("GUILD_FUZZ_REPLAY_MAX_SECONDS");
  const double max_seconds = max_env && *max_env ? std::atof(max_env) : 30.0;
  double slowest = 0;
  std::string slowest_name;
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", p.c_str(), bytes.size());
    // A copy of exactly the input's size, as libFuzzer passes it: a read one
    // byte past the end is caught by AddressSanitizer.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    const auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > slowest) slowest = s, slowest_name = p.string();
    if (s > max_seconds) {
      std::fprintf(stderr, "%s took %.1f s (limit %.0f s): a hang\n", p.c_str(), s, max_seconds);
      return 1;
    }
  }
  std::printf("replayed %zu inputs, slowest %.3f s (%s)\n", inputs.size(), slowest, slowest_name.c_str());
  return 0;
}
