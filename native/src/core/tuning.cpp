#include "core/tuning.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>

namespace guild {
namespace {

constexpr TuningKnob kKnobs[] = {
    {"cuda_graphs", "GUILD_CUDA_GRAPHS", "0: decode steps launched kernel by kernel (a profiler sees each)"},
    {"cuda_fused", "GUILD_CUDA_FUSED", "0: the GPU's fused kernels split into their parts"},
    {"cuda_pdl", "GUILD_CUDA_PDL", "0: no programmatic dependent launch"},
    {"gemm_direct", "GUILD_GEMM_DIRECT", "0: every type through the GEMM's tile path"},
    {"pool_hold", "GUILD_POOL_HOLD", "0: the CPU expert pool sleeps between GPU steps"},
    {"pin_experts", "GUILD_PIN_EXPERTS", "0: host expert stacks stay pageable (copies go through the staging ring)"},
    {"staging_ring_mib", "GUILD_STAGING_RING_MIB", "N: the pinned staging ring's size in MiB (0: the driver's pageable copies)"},
    {"prefill_stream_min", "GUILD_PREFILL_STREAM_MIN", "N: prefill steps of at least N tokens stream uncached experts (0: never)"},
    {"gpu_host_choices", "GUILD_GPU_HOST_CHOICES", "N: CPU expert choices the GPU takes per token in hybrid decode"},
    {"force_kernels", "GUILD_FORCE_KERNELS", "NAME: this CPU kernel package instead of the best one"},
};

bool parse_int(const std::string& v, int lo, int hi, int* out) {
  if (v.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || n < lo || n > hi) return false;
  *out = static_cast<int>(n);
  return true;
}

// Sets one knob from its text; false when the value does not parse.
bool set_knob(Tuning* t, const std::string& name, const std::string& v) {
  auto flag = [&](bool* b) {
    if (v != "0" && v != "1") return false;
    *b = v == "1";
    return true;
  };
  if (name == "cuda_graphs") return flag(&t->cuda_graphs);
  if (name == "cuda_fused") return flag(&t->cuda_fused);
  if (name == "cuda_pdl") return flag(&t->cuda_pdl);
  if (name == "gemm_direct") return flag(&t->gemm_direct);
  if (name == "pool_hold") return flag(&t->pool_hold);
  if (name == "pin_experts") return flag(&t->pin_experts);
  if (name == "staging_ring_mib") return parse_int(v, 0, 1 << 16, &t->staging_ring_mib);
  if (name == "prefill_stream_min") return parse_int(v, 0, 1 << 20, &t->prefill_stream_min);
  if (name == "gpu_host_choices") return parse_int(v, 0, 1 << 10, &t->gpu_host_choices);
  if (name == "force_kernels") {
    t->force_kernels = v;
    return true;
  }
  return false;
}

Tuning from_environment() {
  Tuning t;
  for (const TuningKnob& k : kKnobs) {
    const char* v = std::getenv(k.env);
    // A value that does not parse leaves the default (the environment is not
    // a user interface: guild-bench's --tuning reports bad entries).
    if (v != nullptr && *v != '\0') set_knob(&t, k.name, v);
  }
  return t;
}

std::mutex g_mu;
Tuning* g_tuning = nullptr;

}  // namespace

std::span<const TuningKnob> tuning_knobs() { return kKnobs; }

const Tuning& tuning() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_tuning == nullptr) g_tuning = new Tuning(from_environment());  // lives for the process
  return *g_tuning;
}

void set_tuning(const Tuning& t) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_tuning == nullptr) g_tuning = new Tuning(t);
  else *g_tuning = t;
}

bool parse_tuning(const std::string& text, Tuning* t, std::string* error) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    bool known = false;
    for (const TuningKnob& k : kKnobs) known = known || name == k.name;
    if (!known) {
      std::string names;
      for (const TuningKnob& k : kKnobs) names += (names.empty() ? "" : ", ") + std::string(k.name);
      *error = "unknown tuning knob '" + name + "' (known: " + names + ")";
      return false;
    }
    if (eq == std::string::npos || !set_knob(t, name, item.substr(eq + 1))) {
      *error = "tuning knob '" + name + "': bad value in '" + item + "'";
      return false;
    }
  }
  return true;
}

std::string tuning_summary(const Tuning& t) {
  const Tuning d;
  std::string s;
  auto add = [&s](const char* name, const std::string& v) { s += (s.empty() ? "" : ",") + std::string(name) + "=" + v; };
  auto b = [](bool x) { return std::string(x ? "1" : "0"); };
  if (t.cuda_graphs != d.cuda_graphs) add("cuda_graphs", b(t.cuda_graphs));
  if (t.cuda_fused != d.cuda_fused) add("cuda_fused", b(t.cuda_fused));
  if (t.cuda_pdl != d.cuda_pdl) add("cuda_pdl", b(t.cuda_pdl));
  if (t.gemm_direct != d.gemm_direct) add("gemm_direct", b(t.gemm_direct));
  if (t.pool_hold != d.pool_hold) add("pool_hold", b(t.pool_hold));
  if (t.pin_experts != d.pin_experts) add("pin_experts", b(t.pin_experts));
  if (t.staging_ring_mib != d.staging_ring_mib) add("staging_ring_mib", std::to_string(t.staging_ring_mib));
  if (t.prefill_stream_min != d.prefill_stream_min) add("prefill_stream_min", std::to_string(t.prefill_stream_min));
  if (t.gpu_host_choices != d.gpu_host_choices) add("gpu_host_choices", std::to_string(t.gpu_host_choices));
  if (t.force_kernels != d.force_kernels) add("force_kernels", t.force_kernels);
  return s;
}

}  // namespace guild
