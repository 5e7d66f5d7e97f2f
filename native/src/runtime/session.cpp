#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace guild {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr int kMaxBatch = 512;  // tokens per forward call during prefill
}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::Length: return "length";
    case StopReason::Context: return "context";
    case StopReason::Cancel: return "cancel";
    case StopReason::Error: return "error";
  }
  return "error";
}

std::unique_ptr<GuildSession> GuildSession::create(GuildModel& model, int n_ctx, std::string* error) {
  std::unique_ptr<GuildSession> s(new GuildSession(model));
  const ModelHparams& hp = model.hparams();
  s->exec_ = model.execution_state();
  ScopedModelExecution scope(s->exec_.get());
  static std::atomic<uint64_t> next_session_id{1};
  s->kernel_lease_ = Lease(model.kernels().name, "session " + std::to_string(next_session_id++) + " (model " +
                                                     model.display_name() + ")");
  s->n_ctx_ = n_ctx > 0 ? n_ctx : model.default_n_ctx();
  if (s->n_ctx_ > (1 << 22)) { *error = "context size " + std::to_string(s->n_ctx_) + " is too large"; return nullptr; }
  s->max_batch_ = std::min(kMaxBatch, s->n_ctx_);
  if (!s->kv_.init(hp.n_layer, s->n_ctx_, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v,
                   s->exec_->kv_type) ||
      !s->scratch_.init(hp, s->max_batch_, s->n_ctx_, model.pool().size())) {
    *error = "out of memory allocating a context of " + std::to_string(s->n_ctx_) + " tokens";
    return nullptr;
  }
  s->logits_.resize(static_cast<size_t>(hp.n_vocab));
  s->history_.reserve(static_cast<size_t>(s->n_ctx_));
  return s;
}

bool GuildSession::check_tokens(std::span<const int32_t> tokens, std::string* error) const {
  const int32_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      *error = "token id " + std::to_string(t) + " is out of range (vocabulary has " + std::to_string(n_vocab) + " tokens)";
      return false;
    }
  }
  if (history_.size() + tokens.size() > static_cast<size_t>(n_ctx_)) {
    *error = "context full: " + std::to_string(history_.size() + tokens.size()) + " tokens exceed the context of " +
             std::to_string(n_ctx_);
    return false;
  }
  return true;
}

bool GuildSession::forward(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel) {
  const GuildModel& m = model_;
  DecoderContext ctx{m.hparams(), m.weights(), m.kernels(), m.pool(), kv_, scratch_};
  const int64_t n_vocab = m.hparams().n_vocab;
  size_t done = 0;
  while (done < tokens.size()) {
    if (poll_cancel && cancel_.load(std::memory_order_relaxed)) return false;
    const int n = static_cast<int>(std::min<size_t>(tokens.size() - done, static_cast<size_t>(max_batch_)));
    const bool last_chunk = done + n == tokens.size();
    float* out = all_logits ? all_logits + static_cast<int64_t>(done) * n_vocab : logits_.data();
    decoder_forward(ctx, tokens.data() + done, n, static_cast<int>(history_.size()), out, all_logits != nullptr);
    history_.insert(history_.end(), tokens.begin() + done, tokens.begin() + done + n);
    if (all_logits && last_chunk)
      std::copy(out + static_cast<int64_t>(n - 1) * n_vocab, out + static_cast<int64_t>(n) * n_vocab, logits_.begin());
    done += n;
  }
  return true;
}

bool GuildSession::eval(std::span<const int32_t> tokens, bool all_rows, float* logits, std::string* error) {
  if (tokens.empty()) { *error = "no tokens to evaluate"; return false; }
  std::lock_guard<std::mutex> lock(model_.generation_mutex());
  if (!check_tokens(tokens, error)) return false;
  ScopedModelExecution scope(exec_.get());
  forward(tokens, all_rows ? logits : nullptr, false);
  if (!all_rows) std::copy(logits_.begin(), logits_.end(), logits);
  return true;
}

GenerateResult GuildSession::generate(const GenerateRequest& req) {
  GenerateResult res;
  const auto t_start = Clock::now();
  std::lock_guard<std::mutex> lock(model_.generation_mutex());
  // A cancel requested before the lock was ours applies to this generation;
  // the flag is cleared when the generation ends.
  struct ClearCancel { std::atomic<bool>& f; ~ClearCancel() { f.store(false); } } clear_cancel{cancel_};
  ScopedModelExecution scope(exec_.get());
  const Vocab& vocab = model_.vocab();
  const int32_t n_vocab = model_.hparams().n_vocab;

  if (req.prompt.empty()) { res.stop = StopReason::Error; res.error = "empty prompt"; return res; }
  {
    std::vector<int32_t> none;
    history_.swap(none);  // validate against an empty context: the prompt replaces history
    std::string err;
    const bool ok = check_tokens(req.prompt, &err);
    history_.swap(none);
    if (!ok) { res.stop = StopReason::Error; res.error = err; return res; }
  }

  // Prefix reuse: keep the cached KV of the longest common prefix, but always
  // leave the prompt's last token to be fed by the decode loop (seed §3).
  size_t reuse = 0;
  const size_t max_reuse = req.prompt.size() - 1;
  while (reuse < max_reuse && reuse < history_.size() && history_[reuse] == req.prompt[reuse]) ++reuse;
  history_.resize(reuse);
  res.n_reused = static_cast<int>(reuse);

  const auto t_prefill = Clock::now();
  std::span<const int32_t> to_prefill = req.prompt.subspan(reuse, req.prompt.size() - 1 - reuse);
  res.n_prompt = static_cast<int>(to_prefill.size()) + 1;
  if (!forward(to_prefill, nullptr, true)) { res.stop = StopReason::Cancel; res.prompt_ms = ms_since(t_prefill); return res; }

  std::vector<int32_t> recent(req.prompt.begin(), req.prompt.end());
  Sampler sampler(req.sampling, n_vocab);
  int32_t next_input = req.prompt.back();
  Clock::time_point t_first{};
  res.stop = StopReason::Length;
  for (int step = 0; step < req.max_new_tokens; ++step) {
    if (cancel_.load(std::memory_order_relaxed)) { res.stop = StopReason::Cancel; break; }
    if (history_.size() >= static_cast<size_t>(n_ctx_)) { res.stop = StopReason::Context; break; }
    // A window of T = 1 (no drafter yet): run the last accepted token.
    forward(std::span<const int32_t>(&next_input, 1), nullptr, false);
    if (step == 0) res.prompt_ms = ms_since(t_prefill);
    const int32_t tok = sampler.sample(logits_.data(), recent);
    if (step == 0) { t_first = Clock::now(); res.ttft_ms = ms_since(t_start); }
    if (!req.ignore_eog && vocab.is_eog(tok)) { res.stop = StopReason::Eos; break; }
    res.tokens.push_back(tok);
    recent.push_back(tok);
    next_input = tok;
    if (req.on_token && !req.on_token(tok, vocab.token_to_piece(tok, false))) { res.stop = StopReason::Cancel; break; }
  }
  if (t_first != Clock::time_point{}) res.decode_ms = ms_since(t_first);
  return res;
}

}  // namespace guild
