#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace guild {

int32_t argmax_lowest_id(const float* logits, int32_t n_vocab) {
  // NaN never wins (as on the GPU, argmax_rows): 0 when every logit is NaN.
  int32_t best = -1;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
  return best < 0 ? 0 : best;
}

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab) : p_(p), n_vocab_(n_vocab) {
  uint64_t s = p.seed;
  for (auto& st : state_) st = splitmix64(s);
  ids_.reserve(static_cast<size_t>(n_vocab));
  probs_.reserve(static_cast<size_t>(n_vocab));
}

double Sampler::next_uniform() {
  // xoshiro256** step
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return static_cast<double>(result >> 11) * (1.0 / 9007199254740992.0);
}

void Sampler::apply_repeat_penalty(float* logits, std::span<const int32_t> recent) {
  if (p_.repeat_penalty == 1.0f || p_.repeat_last_n == 0) return;
  const size_t window = p_.repeat_last_n < 0 ? recent.size()
                                             : std::min(recent.size(), static_cast<size_t>(p_.repeat_last_n));
  // Penalise each distinct recent token once (a token seen twice is not
  // penalised twice): divide positive logits, multiply negative ones.
  ids_.clear();
  for (size_t i = recent.size() - window; i < recent.size(); ++i) {
    const int32_t t = recent[i];
    if (t < 0 || t >= n_vocab_) continue;
    if (std::find(ids_.begin(), ids_.end(), t) != ids_.end()) continue;
    ids_.push_back(t);
    logits[t] = logits[t] > 0 ? logits[t] / p_.repeat_penalty : logits[t] * p_.repeat_penalty;
  }
}

size_t Sampler::candidates(float* logits, std::span<const int32_t> recent) {
  apply_repeat_penalty(logits, recent);
  // Candidates sorted by logit (descending, ties by id).
  ids_.resize(static_cast<size_t>(n_vocab_));
  for (int32_t i = 0; i < n_vocab_; ++i) ids_[i] = i;
  auto by_logit = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t n = ids_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(ids_.begin(), ids_.begin() + p_.top_k, ids_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  } else {
    std::sort(ids_.begin(), ids_.end(), by_logit);
  }
  // Softmax over the candidates (at temperature 1 for the p-filters, as llama.cpp orders them).
  probs_.resize(n);
  const float max_l = logits[ids_[0]];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) { probs_[i] = std::exp(logits[ids_[i]] - max_l); sum += probs_[i]; }
  for (size_t i = 0; i < n; ++i) probs_[i] = static_cast<float>(probs_[i] / sum);
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs_[i];
      if (cum >= p_.top_p) { keep = i + 1; break; }
    }
    n = std::max<size_t>(1, keep);
  }
  if (p_.min_p > 0.0f) {
    const float floor_p = probs_[0] * p_.min_p;
    size_t keep = 1;
    while (keep < n && probs_[keep] >= floor_p) ++keep;
    n = keep;
  }
  // Temperature: the weights the draw uses.
  for (size_t i = 0; i < n; ++i) probs_[i] = static_cast<float>(std::exp((logits[ids_[i]] - max_l) / p_.temperature));
  return n;
}

int32_t Sampler::sample(float* logits, std::span<const int32_t> recent) {
  if (p_.temperature <= 0.0f) {
    apply_repeat_penalty(logits, recent);
    return argmax_lowest_id(logits, n_vocab_);
  }
  const size_t n = candidates(logits, recent);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  const double r = next_uniform() * total;
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += probs_[i];
    if (r < acc) return ids_[i];
  }
  return ids_[n - 1];
}

int32_t Sampler::sample_against_draft(float* logits, std::span<const int32_t> recent, int32_t draft) {
  // Greedy: the target's choice is deterministic; the draft is right or not.
  if (p_.temperature <= 0.0f) return sample(logits, recent);
  const size_t n = candidates(logits, recent);
  double total = 0.0, p_draft = 0.0;
  for (size_t i = 0; i < n; ++i) {
    total += probs_[i];
    if (ids_[i] == draft) p_draft = probs_[i];
  }
  // Keep the draft with probability p(draft) (min(1, p/q) with q = 1).
  if (p_draft > 0.0 && next_uniform() * total < p_draft) return draft;
  // Rejected: draw from p with the draft removed, max(0, p - q) renormalised.
  const double rest = total - p_draft;
  if (!(rest > 0.0)) return draft;  // p(draft) = 1 up to rounding: nothing else to draw
  const double r = next_uniform() * rest;
  double acc = 0.0;
  size_t last_other = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ids_[i] == draft) continue;
    last_other = i;
    acc += probs_[i];
    if (r < acc) return ids_[i];
  }
  return ids_[last_other];
}

}  // namespace guild
