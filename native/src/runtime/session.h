// GuildSession: a handle on one model with its own KV cache and token history
// (seed §2). Requests queue on the model's GenerationQueue (one generation at
// a time). A prompt that starts with the cached history reuses that prefix.
// Decode runs speculative windows: the last accepted token plus up to T-1
// drafts; the verifier runs the window, the longest prefix equal to the
// target's choices is accepted, and commit() drops the rejected suffix.
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
#include "runtime/mtp_drafter.h"
#include "runtime/sampler.h"
#include "runtime/session_memory.h"

namespace guild {

enum class StopReason { Eos, Length, Context, Cancel, Error };
const char* stop_reason_name(StopReason r);

// ModelChanged: the model file was rewritten or cut short on disk since the
// load (the model is marked not ready: reload it).
enum class GenerateError { None, InvalidArgument, ContextFull, QueueFull, NotReady, Device, ModelChanged };

// A source of draft tokens for speculative windows. Plain function pointer +
// context (no virtual dispatch in the decode loop). draft() writes up to
// max_drafts proposals for the tokens following `last` and returns how many.
struct DraftSource {
  int (*draft)(void* ctx, std::span<const int32_t> history, int32_t last, int max_drafts, int32_t* out) = nullptr;
  void* ctx = nullptr;
  int max_drafts = 0;  // T - 1
};

// Model-drafted windows. Auto: the model's MTP block drafts when it has one
// (on the CPU), else T = 1; Mtp: the same, an error without one.
enum class DraftMode { None, Auto, Mtp };
struct SpeculativeParams {
  DraftMode mode = DraftMode::None;
  int max_window = 4;   // S: the last accepted token + up to S - 1 drafts (1..kMaxWindow)
  float min_p = 0.0f;   // the window grows while the drafter's top-1 probability stays >= this
  // And while the measured window costs say one more draft raises the
  // expected tokens per ms (runtime/window_costs.h); off: confidence only
  // (llama.cpp's draft-mtp rule).
  bool by_cost = true;
};

struct GenerateRequest {
  std::span<const int32_t> prompt;
  int max_new_tokens = 256;
  SamplingParams sampling;
  bool ignore_eog = false;  // benchmarks: run max_new_tokens steps regardless
  DraftSource drafter;      // a caller's drafter (tests); set, it is used instead of speculative.mode
  SpeculativeParams speculative;
  // Called per generated token with its piece bytes; return false to stop.
  std::function<bool(int32_t token, const std::string& piece)> on_token;
  // Called while queued with the number of requests ahead (0 = started).
  std::function<void(int position)> on_queue;
  // Called after each verified window with its drafts and how many of them
  // were accepted (benchmarks and tests).
  std::function<void(std::span<const int32_t> drafts, int n_accepted)> on_window;
};

struct GenerateResult {
  StopReason stop = StopReason::Length;
  GenerateError error_kind = GenerateError::None;
  std::vector<int32_t> tokens;
  int n_prompt = 0;      // prompt tokens actually prefilled
  int n_reused = 0;      // prompt tokens served from the cache
  int n_drafted = 0;     // draft tokens proposed
  int n_accepted = 0;    // draft tokens accepted
  int n_windows = 0;     // verifier passes of the decode (tokens per window = tokens / windows)
  const char* drafter = "none";  // "mtp" or "caller" when windows were drafted
  double queue_ms = 0;   // time spent waiting for the model
  double prompt_ms = 0;  // prefill wall time
  double decode_ms = 0;  // first to last generated token
  double ttft_ms = 0;    // request start to first token
  std::string error;
};

class GuildSession {
 public:
  // Null + error when the context is out of range, when what the session
  // would allocate (runtime/session_memory.h) exceeds what the machine can
  // give, or when the allocation fails.
  static std::unique_ptr<GuildSession> create(GuildModel& model, int n_ctx, std::string* error,
                                              const SessionShape& shape = {});

  GuildModel& model() const { return model_; }
  uint64_t id() const { return id_; }
  int n_ctx() const { return n_ctx_; }
  int n_past() const { return static_cast<int>(history_.size()); }
  const std::vector<int32_t>& history() const { return history_; }
  const KvCache& kv() const { return kv_; }
  const DecoderScratch& scratch() const { return scratch_; }
  void reset() {
    history_.clear();
    if (mtp_) mtp_->truncate(0);
  }
  // The model's MTP block can draft this session's windows (a CPU session of
  // a model with a nextn block).
  bool has_mtp_drafter() const { return mtp_ != nullptr; }

  // Appends tokens (prefill) and writes logits (all rows, or the last).
  // Queues like a generation. Returns false with *error on invalid ids, a full
  // context or queue, or a model that is not ready.
  // *kind (if given) says which failure it was.
  bool eval(std::span<const int32_t> tokens, bool all_rows, float* logits, std::string* error,
            GenerateError* kind = nullptr);

  GenerateResult generate(const GenerateRequest& req);

  // Cancels the running generation (within one decode step or one prefill
  // chunk) or leaves the queue. Thread-safe.
  void cancel();

  // The verifier's pieces, public for tests: run a window of tokens at the end
  // of the history (all rows of logits into window_logits), then keep only
  // the first `keep` of them.
  void verify_window(std::span<const int32_t> window);
  // The same on the GPU for greedy decode: each row's argmax (first maximum)
  // into argmax_rows, no logits copied to the host. False on a device error.
  bool verify_window_argmax(std::span<const int32_t> window, int32_t* argmax_rows);
  void commit(int base, int keep) {
    history_.resize(static_cast<size_t>(base + keep));
    if (mtp_) mtp_->truncate(base + keep);
  }
  const float* window_logits(int row) const { return window_logits_.data() + static_cast<size_t>(row) * n_vocab_; }

 private:
  explicit GuildSession(GuildModel& model) : model_(model) {}
  bool check_tokens(std::span<const int32_t> tokens, size_t base, std::string* error) const;
  // What a CPU pass gives the MTP drafter: nothing, its h rows fed chunk by
  // chunk (prefill), or its h rows held for a feed after the commit (window).
  enum class DrafterRows { None, Feed, Hold };
  // Runs tokens through the model in batches of at most max_batch_; logits of
  // the last token go to logits_ and, when all_logits is set, every row there.
  bool forward(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel,
               DrafterRows drafter_rows = DrafterRows::None);
  DecoderContext cpu_context();
  // Measures the verifier's cost of windows of 1..16 rows and one drafter
  // step at the current position (everything rolled back) into the model's
  // WindowCosts. `last`: the token the next window starts with.
  void calibrate_windows(int32_t last);
  // Waits for this session's turn; fills res on failure.
  bool take_turn(const std::function<void(int)>& on_queue, uint64_t* ticket, GenerateResult* res);

  GuildModel& model_;
  std::shared_ptr<const ModelExecutionState> exec_;
  Lease kernel_lease_;
  uint64_t id_ = 0;
  int n_ctx_ = 0;
  int max_batch_ = 0;
  int n_vocab_ = 0;
  // argmax_rows (with all_logits null): every row's first maximum from the
  // device instead of logits (greedy decode: no logits cross to the host).
  bool forward_gpu(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel, int32_t* argmax_rows = nullptr,
                   DrafterRows drafter_rows = DrafterRows::None);
  bool hp_has_nextn() const;
  // Records a device error, marks the model failed (fail-closed); returns false.
  bool device_failed(const std::string& error);
  // True (and file_error_ set) once the model file changed on disk: what
  // the last pass read may be garbage; the model is marked failed.
  bool model_file_changed();
  std::string device_error_;         // set by a failed GPU pass
  std::string file_error_;           // set by model_file_changed()
  uint64_t stats_re_prefilled_ = 0;  // history tokens re-run because another session held the GPU KV cache
  KvCache kv_;
  DecoderScratch scratch_;
  std::vector<int32_t> history_;
  std::vector<float> logits_;         // [n_vocab] last row
  std::vector<float> window_logits_;  // [kMaxWindow][n_vocab]
  std::vector<int32_t> window_;       // scratch: the window's tokens
  std::unique_ptr<MtpDrafter> mtp_;   // the model's nextn block with its own KV (CPU sessions)
  std::atomic<bool> cancel_{false};
};

inline constexpr int kMaxWindow = 16;  // T: last accepted token + up to 15 drafts

}  // namespace guild
