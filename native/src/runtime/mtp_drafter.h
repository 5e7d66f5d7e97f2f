// A session's MTP ("nextn") drafter (seed §3: speculative windows). The
// model's nextn block keeps its own one-layer KV cache that mirrors the
// trunk's history: position p holds the row (token_p, h_{p-1}), h being the
// trunk's output_norm(final residual) at a position (zeros before the first).
// Drafting after the last accepted token x at position p runs (x, h_{p-1}) at
// p and takes the head's argmax; each further draft runs (draft, the block's
// own output row) at the next position. Draft rows past p are scratch: the
// rows the verifier accepts are fed again with the trunk's h. The first row
// equals the verified row at p, so it is kept.
//
// State between windows: rows [0, fed) valid, and the h of position fed - 1
// held (h_pos == fed - 1; at fed 0 that h is zeros). Anything else (a request
// that did not feed it, a failure inside a window) is repaired by the session
// re-running the trunk from where the drafter can resume (resume_point()).
#pragma once
#include <cstdint>
#include <vector>

#include "gpu/gpu_backend.h"
#include "models/decoder_forward.h"
#include "runtime/kv_cache.h"
#include "runtime/window_costs.h"

namespace guild {

struct DraftStep {
  int32_t token = 0;
  float p_top1 = 0.0f;  // the head's softmax probability of the draft
};

class MtpDrafter {
 public:
  // Bytes init() allocates (KV of the block + h rows + one logits row).
  static uint64_t bytes(const ModelHparams& hp, int n_ctx, int max_tokens, KvType kv_type);
  bool init(const ModelHparams& hp, int n_ctx, int max_tokens, KvType kv_type);
  // A GPU session's drafter: the block, its KV and the h rows live on the
  // device (gpu::Decoder::nextn_*, which must have the block); the trunk
  // contexts passed below are not used. A device error stops drafting and
  // leaves the state to be repaired as after a gap (resume_point()).
  void init_gpu(const ModelHparams& hp, gpu::Decoder* device);

  // Where the trunk writes a pass's h rows ([max_tokens][n_embd]; CPU only:
  // a GPU trunk keeps them on the device).
  float* hidden_rows() { return h_.data() + n_embd_; }

  // The trunk's history is cut to n_past: forget rows from there on.
  void truncate(int n_past);
  // The first position the trunk must (re-)run from, given that it keeps
  // n_reuse cached positions, for the drafter to be fed without a gap.
  int resume_point(int n_reuse) const;

  // After the trunk ran tokens[0..n) at pos0.. with their h rows in
  // hidden_rows(): feeds the rows not fed yet (needs resume_point() <= pos0).
  void feed(const DecoderContext& trunk, const int32_t* tokens, int n, int pos0);

  // Drafts up to max tokens following `last` at position pos (needs
  // fed == pos): stops before a draft whose probability is below min_p and,
  // with costs, where one more draft would lower the expected tokens per ms
  // (window_grows). Returns the number written to out.
  int draft(const DecoderContext& trunk, int32_t last, int pos, int max, float min_p, const WindowCosts* costs,
            DraftStep* out);

  int fed() const { return fed_; }

 private:
  DecoderContext context(const DecoderContext& trunk) {
    return DecoderContext{trunk.hp, trunk.w, trunk.recipe, trunk.kernels, trunk.pool, kv_, trunk.s};
  }
  void hold_h(int pos, int row);  // h_pos_ = pos, row 0 of the h rows = row `row` (-1: zeros)
  // The block over rows of the h table from h_row (CPU or device).
  void run_rows(const DecoderContext& trunk, const int32_t* tokens, int h_row, int n, int pos0);

  gpu::Decoder* device_ = nullptr;  // a GPU session's decoder (its nextn_* block), else null

  KvCache kv_;
  int n_embd_ = 0, n_vocab_ = 0;
  int fed_ = 0;
  int h_pos_ = -1;             // position of the h in row 0 of h_ (-1: zeros, for position 0)
  std::vector<float> h_;       // [1 + max_tokens][n_embd]: row 0 the held h, then a pass's rows
  std::vector<float> step_h_;  // [n_embd] the block's output row of the last draft step
  std::vector<float> logits_;  // [n_vocab] the head's row of the last draft step
};

}  // namespace guild
