// The runtime's A/B knobs: every setting a measurement flips to compare one
// implementation with another, declared once (kTuningKnobs), read from the
// environment in one place (the first tuning() call) and settable by
// guild-bench's --tuning flag before a load. Defaults are what ships; the
// knobs exist for profiling and A/B runs, not for users.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace guild {

struct Tuning {
  bool cuda_graphs = true;        // decode steps replayed from captured CUDA graphs
  bool cuda_fused = true;         // fused norm+router, attention+qkv_post, GLU experts on the GPU
  bool cuda_pdl = true;           // programmatic dependent launch (sm_90+)
  bool gemm_direct = true;        // the GPU GEMM's direct fragment loads (off: the tile path for every type)
  bool pool_hold = true;          // the CPU expert pool spins between GPU steps instead of sleeping
  bool pin_experts = true;        // host expert stacks page-locked (off: streamed through the staging ring)
  int staging_ring_mib = -1;      // the pinned staging ring (MiB; 0 off: pageable copies; -1: 256)
  int prefill_stream_min = -1;    // prefill steps of >= N tokens stream uncached experts (0 never; -1: measured rule)
  int gpu_host_choices = -1;      // CPU choices the GPU takes per token in hybrid decode (-1: measured rule)
  std::string force_kernels;      // a CPU kernel package by name instead of the best one ("" = best)
};

// One knob: its name in --tuning and in messages, its environment variable,
// and what it does (the docs' table is this list).
struct TuningKnob {
  const char* name;
  const char* env;
  const char* what;
};
std::span<const TuningKnob> tuning_knobs();

// The process's settings: the environment's (read once), or set_tuning()'s.
const Tuning& tuning();
// Replaces them (a tool's flags, before any load; not for use during one).
void set_tuning(const Tuning& t);

// Applies "name=value[,name=value...]" (names of tuning_knobs(); booleans
// 0/1) to *t. False with a one-line message naming the knob on a bad entry.
bool parse_tuning(const std::string& text, Tuning* t, std::string* error);
// The knobs that differ from the defaults, as "name=value,..." ("" = none):
// what a benchmark's output records beside its numbers.
std::string tuning_summary(const Tuning& t);

}  // namespace guild
