// GuildSession: a handle on one model with its own KV cache and token history
// (seed §2). Generation is serialised per model by the model's generation
// mutex. A request's prompt that starts with the cached history reuses it.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/decoder_forward.h"
#include "runtime/execution_state.h"
#include "runtime/kv_cache.h"
#include "runtime/leases.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace guild {

enum class StopReason { Eos, Length, Context, Cancel, Error };
const char* stop_reason_name(StopReason r);

struct GenerateRequest {
  std::span<const int32_t> prompt;
  int max_new_tokens = 256;
  SamplingParams sampling;
  bool ignore_eog = false;  // benchmarks: run max_new_tokens steps regardless
  // Called per generated token with its piece bytes; return false to stop.
  std::function<bool(int32_t token, const std::string& piece)> on_token;
};

struct GenerateResult {
  StopReason stop = StopReason::Length;
  std::vector<int32_t> tokens;
  int n_prompt = 0;      // prompt tokens actually prefilled
  int n_reused = 0;      // prompt tokens served from the cache
  double prompt_ms = 0;  // prefill wall time
  double decode_ms = 0;  // first to last generated token
  double ttft_ms = 0;    // request start to first token
  std::string error;
};

class GuildSession {
 public:
  // Null + error when the context cannot be allocated.
  static std::unique_ptr<GuildSession> create(GuildModel& model, int n_ctx, std::string* error);

  GuildModel& model() const { return model_; }
  int n_ctx() const { return n_ctx_; }
  int n_past() const { return static_cast<int>(history_.size()); }
  const std::vector<int32_t>& history() const { return history_; }
  void reset() { history_.clear(); }

  // Appends tokens (prefill) and writes logits (all rows, or the last).
  // Returns false with *error on invalid ids or a full context.
  bool eval(std::span<const int32_t> tokens, bool all_rows, float* logits, std::string* error);

  GenerateResult generate(const GenerateRequest& req);

  void cancel() { cancel_.store(true, std::memory_order_relaxed); }

 private:
  explicit GuildSession(GuildModel& model) : model_(model) {}
  bool check_tokens(std::span<const int32_t> tokens, std::string* error) const;
  // Runs tokens through the model in batches; logits of the last token go to
  // `last_logits` and, when all_rows, every row to `all_logits`.
  bool forward(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel);

  GuildModel& model_;
  std::shared_ptr<const ModelExecutionState> exec_;
  Lease kernel_lease_;
  int n_ctx_ = 0;
  int max_batch_ = 0;
  KvCache kv_;
  DecoderScratch scratch_;
  std::vector<int32_t> history_;
  std::vector<float> logits_;  // [n_vocab] last row
  std::atomic<bool> cancel_{false};
};

}  // namespace guild
