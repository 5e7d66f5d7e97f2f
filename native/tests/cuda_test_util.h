// Helpers shared by the GPU tests (test_cuda_decoder, test_cuda_hybrid):
// fixture JSON, the GPU skip, and argmax / top-1 margin of a logits row.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "check.h"
#include "core/json.h"
#include "cuda/cuda_decoder.h"

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

}  // namespace cuda_test
