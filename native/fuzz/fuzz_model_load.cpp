// Fuzz target: the model loader (runtime/model.h, GuildModel::load: the 14
// stages) and a short generation on what it loads. The input is a .gguf
// file. One the GGUF reader refuses is skipped (fuzz_gguf_reader covers it,
// and the load would stop at stage 3 the same way); every other one goes
// through the whole load on the CPU with the kernel packages of the build
// (a packages directory of the harness's own, the cuda package disabled),
// a 64-token context, one thread and a 256 MiB memory limit. A model that
// loads then generates greedily and by sampling (fuzzed weights give NaN and
// infinite logits: the sampler must cope), and its tokenizer turns a prompt
// into ids.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "artifact/gguf.h"
#include "fuzz_check.h"
#include "verbose.h"
#include "memory_file.h"
#include "packages/loader.h"
#include "packages/store.h"
#include "runtime/model.h"
#include "runtime/session.h"

using namespace guild;

namespace {

std::string g_packages_dir;

void remove_packages_dir() {
  std::error_code ec;
  if (!g_packages_dir.empty()) std::filesystem::remove_all(g_packages_dir, ec);
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz_model_load: %s\n", msg.c_str());
  std::abort();
}

LoadOptions load_options() {
  LoadOptions o;
  o.n_threads = 1;
  o.n_ctx = 64;
  o.pin_threads = false;
  o.gpu = "cpu";
  o.packages_dir = g_packages_dir;
  o.max_queued = 1;
  o.memory_limit_bytes = 256ull << 20;
  return o;
}

void generate(GuildModel& model, std::span<const int32_t> prompt, float temperature) {
  std::string err;
  std::unique_ptr<GuildSession> s = GuildSession::create(model, 0, &err);
  if (!s) {
    FUZZ_LOG("session: %s", err.c_str());
    FUZZ_CHECK(err.find('\n') == std::string::npos, "session refused with a multi-line reason");
    return;
  }
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = 3;
  req.ignore_eog = true;
  req.sampling.temperature = temperature;
  req.sampling.top_k = temperature > 0 ? 5 : 0;
  req.sampling.top_p = temperature > 0 ? 0.9f : 1.0f;
  req.sampling.repeat_penalty = temperature > 0 ? 1.1f : 1.0f;
  req.sampling.seed = 7;
  const GenerateResult r = s->generate(req);
  for (int32_t t : r.tokens)
    FUZZ_CHECK(t >= 0 && t < model.hparams().n_vocab, "generated token %d of a %d-token vocabulary", t,
               model.hparams().n_vocab);
  FUZZ_LOG("generated %zu tokens (temperature %.1f)%s%s", r.tokens.size(), temperature,
           r.error.empty() ? "" : ": ", r.error.c_str());
  if (r.stop == StopReason::Error) FUZZ_CHECK(r.error.find('\n') == std::string::npos, "multi-line generation error");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/guild-fuzz-packages-XXXXXX";
  if (!::mkdtemp(pattern.data())) die("cannot create a packages directory under " + pattern);
  g_packages_dir = pattern;
  std::atexit(remove_packages_dir);
  packages::PackageStore store(g_packages_dir);
  // The GPU is never used here (gpu = cpu); the cuda package, where the build
  // has one, would only be hashed and opened on every load. (No cuda
  // package: nothing to disable, and the error is of no interest.)
  std::string ignored;
  (void)store.disable("cuda", &ignored);
  // Without a CPU package every load fails at stage 2 and nothing is fuzzed.
  const packages::PackageLoadResult r = packages::load_enabled_packages(store, "");
  std::string note;
  if (!r.error.empty()) die(r.error);
  if (!packages::pick_cpu_provider(r, nullptr, &note))
    die("no usable CPU kernel package (bundled dir '" + r.bundled_dir + "'): build guild_kernel_packages");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemoryFile file(data, size);
  std::string err;
  if (!gguf::ModelFiles::open(file.path(), &err)) {
    FUZZ_LOG("reader: %s", err.c_str());
    return 0;
  }

  LoadErrorKind kind = LoadErrorKind::None;
  std::unique_ptr<GuildModel> model = GuildModel::load(file.path(), load_options(), &err, &kind);
  if (!model) {
    FUZZ_LOG("load: %s", err.c_str());
    FUZZ_CHECK(!err.empty() && err.find('\n') == std::string::npos, "load refused without a one-line reason: %s",
               err.c_str());
    FUZZ_CHECK(kind != LoadErrorKind::None, "load failed with kind None: %s", err.c_str());
    // A file the reader accepted must not be blamed on I/O or packages.
    FUZZ_CHECK(kind == LoadErrorKind::Format || kind == LoadErrorKind::Unsupported ||
                   kind == LoadErrorKind::OutOfMemory,
               "load of a readable file failed with kind %d: %s", static_cast<int>(kind), err.c_str());
    return 0;
  }
  FUZZ_CHECK(model->vocab().n_tokens() == model->hparams().n_vocab, "vocabulary and embedding rows disagree");
  std::vector<int32_t> prompt = model->vocab().tokenize("<|im_start|>user\nHello, world!<|im_end|>\n", true, true);
  if (prompt.size() > 16) prompt.resize(16);
  if (prompt.empty()) prompt.push_back(0);
  generate(*model, prompt, 0.0f);
  generate(*model, prompt, 0.8f);
  return 0;
}
