// Token sampling from one row of logits. Greedy (temperature 0) picks the
// highest logit, ties going to the lowest id. Otherwise the chain is
// repetition penalty → top-k → top-p → min-p → temperature → draw, with a
// seeded generator of our own so results repeat across platforms.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace guild {

struct SamplingParams {
  float temperature = 0.0f;
  int32_t top_k = 0;        // 0 = off
  float top_p = 1.0f;       // 1 = off
  float min_p = 0.0f;       // 0 = off
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  uint64_t seed = 0;
};

int32_t argmax_lowest_id(const float* logits, int32_t n_vocab);

class Sampler {
 public:
  Sampler(const SamplingParams& p, int32_t n_vocab);
  // recent: the tokens the repetition penalty looks at (prompt + generated).
  // logits may be modified (penalty applied in place).
  int32_t sample(float* logits, std::span<const int32_t> recent);
  // Speculative sampling against a deterministic drafter (its draft is its
  // argmax: a point mass): the draft is kept with the probability this row's
  // distribution gives it, else a token is drawn from that distribution with
  // the draft taken out. Either way the result is distributed as sample()'s,
  // so drafting never changes what is generated, only how fast. The caller
  // compares the result with the draft to know whether it was accepted.
  int32_t sample_against_draft(float* logits, std::span<const int32_t> recent, int32_t draft);
  // True when sample() is the first maximum of the logits as they are
  // (greedy, no repetition penalty): a device's argmax gives the same token.
  bool plain_argmax() const { return p_.temperature <= 0.0f && p_.repeat_penalty == 1.0f; }

 private:
  double next_uniform();  // [0, 1)
  // The penalised, filtered, tempered candidates of a row: ids_[0..n) with
  // unnormalised weights probs_[0..n); returns n (>= 1). Temperature > 0 only.
  size_t candidates(float* logits, std::span<const int32_t> recent);
  void apply_repeat_penalty(float* logits, std::span<const int32_t> recent);
  SamplingParams p_;
  int32_t n_vocab_;
  uint64_t state_[4];
  std::vector<int32_t> ids_;      // candidate scratch, sized once
  std::vector<float> probs_;
};

}  // namespace guild
