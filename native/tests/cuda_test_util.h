// Helpers shared by the GPU tests (test_cuda_decoder, test_cuda_hybrid, test_cuda_peers):
// fixture JSON, the GPU skip, argmax / top-1 margin of a logits row, greedy generation.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "check.h"
#include "core/json.h"
#include "cuda/cuda_decoder.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace cuda_test {

inline guild::json::Value load_json(const std::string& path) {
  std::string err;
  auto v = guild::json::parse(check::read_file(path), &err);
  return v ? *v : guild::json::Value();
}

inline std::vector<int32_t> ids_of(const guild::json::Value& arr) {
  std::vector<int32_t> out;
  for (const auto& x : arr.as_array()) out.push_back(static_cast<int32_t>(x.as_int()));
  return out;
}

// Skips the whole test program (exit 77) without a usable CUDA device.
inline void need_gpu() {
  std::string why;
  if (!guild::cuda::cuda_available(&why)) check::skip_all(why);
}

inline int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// Top-1 minus top-2 logit.
inline float margin(const float* v, int n) {
  float a = -INFINITY, b = -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (v[i] > a) { b = a; a = v[i]; }
    else if (v[i] > b) b = v[i];
  }
  return a - b;
}

// Greedy generation of `steps` tokens after `prompt` in a fresh session.
inline std::vector<int32_t> greedy(guild::GuildModel& m, const std::vector<int32_t>& prompt, int steps) {
  std::string err;
  auto s = guild::GuildSession::create(m, 512, &err);
  if (!s) {
    CHECK_MSG(false, "session: %s", err.c_str());
    return {};
  }
  guild::GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = steps;
  req.sampling.temperature = 0.0f;
  req.ignore_eog = true;
  guild::GenerateResult r = s->generate(req);
  CHECK_MSG(r.stop != guild::StopReason::Error, "generate: %s", r.error.c_str());
  return r.tokens;
}

// A reference greedy run step by step: its tokens, and how many of them
// another placement must reproduce — up to the first step whose top-1 margin
// is below tol (there activation rounding may legitimately flip the choice).
struct GreedyReference {
  std::vector<int32_t> tokens;
  size_t must = 0;
};
inline GreedyReference greedy_reference(guild::GuildModel& m, const std::vector<int32_t>& prompt, int steps, double tol) {
  GreedyReference r;
  r.must = static_cast<size_t>(steps);
  std::string err;
  auto s = guild::GuildSession::create(m, 512, &err);
  const int n_vocab = m.hparams().n_vocab;
  std::vector<float> lg(static_cast<size_t>(n_vocab));
  if (!s || !s->eval(prompt, false, lg.data(), &err)) {
    CHECK_MSG(false, "reference: %s", err.c_str());
    return r;
  }
  for (int i = 0; i < steps; ++i) {
    const int32_t tok = argmax(lg.data(), n_vocab);
    if (r.must == static_cast<size_t>(steps) && margin(lg.data(), n_vocab) < tol) r.must = static_cast<size_t>(i);
    r.tokens.push_back(tok);
    if (!s->eval(std::span<const int32_t>(&tok, 1), false, lg.data(), &err)) {
      CHECK_MSG(false, "reference step: %s", err.c_str());
      break;
    }
  }
  return r;
}

}  // namespace cuda_test
