#include "runtime/mtp_drafter.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampler.h"

namespace guild {

uint64_t MtpDrafter::bytes(const ModelHparams& hp, int n_ctx, int max_tokens, KvType kv_type) {
  const uint64_t elem = kv_type == KvType::F16 ? 2 : 4;
  const uint64_t kv_row = static_cast<uint64_t>(hp.n_head_kv) * (static_cast<uint64_t>(hp.head_dim_k) + hp.head_dim_v);
  const uint64_t kv = static_cast<uint64_t>(n_ctx) * kv_row * elem;
  const uint64_t rows = (static_cast<uint64_t>(max_tokens) + 2) * static_cast<uint64_t>(hp.n_embd);
  return kv + (rows + static_cast<uint64_t>(hp.n_vocab)) * sizeof(float);
}

bool MtpDrafter::init(const ModelHparams& hp, int n_ctx, int max_tokens, KvType kv_type) {
  n_embd_ = hp.n_embd;
  n_vocab_ = hp.n_vocab;
  if (!kv_.init(1, n_ctx, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v, kv_type)) return false;
  try {
    h_.assign((static_cast<size_t>(max_tokens) + 1) * hp.n_embd, 0.0f);
    step_h_.assign(static_cast<size_t>(hp.n_embd), 0.0f);
    logits_.assign(static_cast<size_t>(hp.n_vocab), 0.0f);
  } catch (const std::bad_alloc&) {
    return false;
  }
  fed_ = 0;
  h_pos_ = -1;
  return true;
}

void MtpDrafter::init_gpu(const ModelHparams& hp, gpu::Decoder* device) {
  device_ = device;
  n_embd_ = hp.n_embd;
  n_vocab_ = hp.n_vocab;
  fed_ = 0;
  hold_h(-1, -1);
}

void MtpDrafter::hold_h(int pos, int row) {
  if (device_) {
    std::string err;
    if (row != 0 && !device_->nextn_hold(row, &err)) pos = -2;  // no valid h held: resume_point repairs
  } else if (row < 0) {
    std::fill(h_.begin(), h_.begin() + n_embd_, 0.0f);
  } else if (row > 0) {
    const float* r = h_.data() + static_cast<size_t>(row) * n_embd_;
    std::copy(r, r + n_embd_, h_.begin());
  }
  h_pos_ = pos;
}

void MtpDrafter::run_rows(const DecoderContext& trunk, const int32_t* tokens, int h_row, int n, int pos0) {
  if (device_) {
    std::string err;
    if (!device_->nextn_feed(tokens, h_row, n, pos0, &err)) {
      // The block's rows from pos0 on are not written: they are not fed.
      fed_ = std::min(fed_, pos0);
      h_pos_ = -2;
    }
    return;
  }
  const DecoderContext c = context(trunk);
  nextn_forward(c, tokens, h_.data() + static_cast<size_t>(h_row) * n_embd_, n, pos0, nullptr, nullptr);
}

void MtpDrafter::truncate(int n_past) {
  if (fed_ <= n_past) return;
  fed_ = std::max(0, n_past);
  if (fed_ == 0) {
    hold_h(-1, -1);  // zeros: the h before the first position
  } else if (h_pos_ != fed_ - 1) {
    h_pos_ = -2;  // the held h is of a position that is gone
  }
}

int MtpDrafter::resume_point(int n_reuse) const {
  const int fed = std::min(fed_, n_reuse);
  if (fed == fed_ && h_pos_ == fed_ - 1) return fed;  // rows and h line up: go on from there
  // Re-running the last kept position gives its h; its row is already fed.
  return std::max(0, fed - 1);
}

void MtpDrafter::feed(const DecoderContext& trunk, const int32_t* tokens, int n, int pos0) {
  const int j0 = fed_ - pos0;
  if (n <= 0 || j0 < 0 || (j0 == 0 && h_pos_ != pos0 - 1)) {
    // A gap: the trunk ran rows the drafter cannot be fed for. Keep what is
    // valid; the next request resumes from there (resume_point()).
    truncate(std::min(fed_, pos0));
    if (h_pos_ != fed_ - 1) h_pos_ = -2;
    return;
  }
  if (j0 < n) {
    // Row j carries h_{pos0+j-1}: row 0 of the h rows (held) then the pass's rows.
    run_rows(trunk, tokens + j0, j0, n - j0, pos0 + j0);
    if (h_pos_ == -2) return;  // a device error: nothing more is fed
  }
  if (j0 <= n) {
    fed_ = pos0 + n;
    hold_h(pos0 + n - 1, n);
  }
}

int MtpDrafter::draft(const DecoderContext& trunk, int32_t last, int pos, int max, float min_p, const WindowCosts* costs,
                      DraftStep* out) {
  if (max <= 0 || fed_ != pos || h_pos_ != pos - 1) return 0;
  int n = 0;
  int32_t token = last;
  double yield = 1.0, all_accepted = 1.0;  // E(n) and Π p of the drafts so far
  for (int i = 0; i < max; ++i) {
    // Before paying for another step: would it pay if as confident as the last?
    if (costs && n > 0 && !window_grows(*costs, n, yield, all_accepted * out[n - 1].p_top1)) break;
    // Row i: (token, h) at pos + i; row 0 is the verified row at pos as well.
    int32_t best = 0;
    float p = 0.0f;
    if (device_) {
      // The device's block, head, argmax and softmax top-1 (only two numbers come back).
      std::string err;
      if (!device_->nextn_step(token, i > 0, pos + i, &best, &p, &err)) {
        if (i == 0) h_pos_ = -2;  // row pos may be half written: not fed
        break;
      }
      if (i == 0) fed_ = pos + 1;
    } else {
      const DecoderContext c = context(trunk);
      const float* h_prev = i == 0 ? h_.data() : step_h_.data();
      nextn_forward(c, &token, h_prev, 1, pos + i, logits_.data(), step_h_.data());
      if (i == 0) fed_ = pos + 1;
      best = argmax_lowest_id(logits_.data(), n_vocab_);
      double sum = 0.0;
      const float top = logits_[best];
      for (int v = 0; v < n_vocab_; ++v) sum += std::exp(static_cast<double>(logits_[v]) - top);
      p = sum > 0.0 && std::isfinite(top) ? static_cast<float>(1.0 / sum) : 0.0f;
    }
    if (p < min_p) break;
    if (costs && !window_grows(*costs, n, yield, all_accepted * p)) break;
    all_accepted *= p;
    yield += all_accepted;
    out[n++] = DraftStep{best, p};
    token = best;
  }
  return n;
}

}  // namespace guild
