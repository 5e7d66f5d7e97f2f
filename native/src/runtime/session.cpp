#include "runtime/session.h"

#include "models/hparam_limits.h"
#include "runtime/gpu_execution.h"
#include "runtime/session_memory.h"

#include <algorithm>
#include <chrono>

namespace guild {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
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

std::unique_ptr<GuildSession> GuildSession::create(GuildModel& model, int n_ctx, std::string* error,
                                                   const SessionShape& shape_in) {
  if (model.vocab_only()) {
    *error = model.path() + ": opened for its tokenizer only (vocab only): it cannot run a session";
    return nullptr;
  }
  std::unique_ptr<GuildSession> s(new GuildSession(model));
  const ModelHparams& hp = model.hparams();
  s->exec_ = model.execution_state();
  static std::atomic<uint64_t> next_session_id{1};
  s->id_ = next_session_id++;
  s->kernel_lease_ = Lease(model.kernels().name, "session " + std::to_string(s->id_) + " (model " +
                                                     model.display_name() + ")");
  s->n_ctx_ = n_ctx > 0 ? n_ctx : model.default_n_ctx();
  if (s->n_ctx_ > hparam_limits::kMaxContext) {
    *error = "context size " + std::to_string(s->n_ctx_) + " exceeds the limit of " +
             std::to_string(hparam_limits::kMaxContext) + " tokens";
    return nullptr;
  }
  s->max_batch_ = session_max_batch(s->n_ctx_, shape_in.max_batch);
  s->n_vocab_ = hp.n_vocab;
  const int scratch_tokens = session_scratch_tokens(s->n_ctx_, shape_in.max_batch);
  // Sliding-window layers keep only the rows they can attend to (and a history to cut back to).
  const std::vector<int> windows = model.recipe().attention_windows();
  SessionShape shape = shape_in;
  shape.windows = windows;
  GpuExecution* gpu = model.gpu();
  // Everything below is sized from the file's hyper-parameters and the
  // context asked: refuse what the machine cannot give before touching it.
  const SessionMemory need =
      estimate_session_memory(hp, s->n_ctx_, model.pool().size(), s->exec_->kv_type, gpu != nullptr, shape);
  if (!session_memory_fits(need, model.session_memory_limit(), error)) return nullptr;
  if (gpu && s->n_ctx_ > gpu->decoder().n_ctx()) {
    *error = "context size " + std::to_string(s->n_ctx_) + " exceeds the GPU KV cache of " +
             std::to_string(gpu->decoder().n_ctx()) + " tokens (load the model with a larger context)";
    return nullptr;
  }
  try {
    // With a GPU the KV cache and the activations live on the device (one set
    // per model, GpuExecution): the session keeps only its history and logits.
    if ((!gpu && !s->kv_.init(hp.n_layer, s->n_ctx_, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v,
                              s->exec_->kv_type, windows, scratch_tokens, shape.sliding_history)) ||
        (!gpu && !s->scratch_.init(hp, scratch_tokens, s->n_ctx_, model.pool().size())))
      throw std::bad_alloc();
    // The MTP drafter runs the nextn block where the trunk runs: on the CPU
    // executor, or on the device beside a GPU trunk (docs/SPECULATIVE.md).
    if (hp.n_nextn > 0 && !model.weights().nextn.empty() && !model.recipe().nextn.empty()) {
      if (!gpu) {
        s->mtp_ = std::make_unique<MtpDrafter>();
        if (!s->mtp_->init(hp, s->n_ctx_, scratch_tokens, s->exec_->kv_type)) throw std::bad_alloc();
      } else if (gpu->decoder().has_nextn()) {
        s->mtp_ = std::make_unique<MtpDrafter>();
        s->mtp_->init_gpu(hp, &gpu->decoder());
      }
    }
    s->logits_.resize(static_cast<size_t>(hp.n_vocab));
    s->window_logits_.resize(static_cast<size_t>(kMaxWindow) * hp.n_vocab);
    s->window_.reserve(kMaxWindow);
    s->history_.reserve(static_cast<size_t>(s->n_ctx_));
  } catch (const std::bad_alloc&) {
    *error = "out of memory allocating a context of " + std::to_string(s->n_ctx_) + " tokens";
    return nullptr;
  }
  return s;
}

void GuildSession::cancel() {
  cancel_.store(true, std::memory_order_relaxed);
  model_.queue().poke();
}

bool GuildSession::check_tokens(std::span<const int32_t> tokens, size_t base, std::string* error) const {
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab_) {
      *error = "token id " + std::to_string(t) + " is out of range (vocabulary has " + std::to_string(n_vocab_) + " tokens)";
      return false;
    }
  }
  if (base + tokens.size() > static_cast<size_t>(n_ctx_)) {
    *error = "context full: " + std::to_string(base + tokens.size()) + " tokens exceed the context of " +
             std::to_string(n_ctx_);
    return false;
  }
  return true;
}

bool GuildSession::forward_gpu(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel,
                               int32_t* argmax_rows, DrafterRows drafter_rows) {
  GpuExecution& g = *model_.gpu();
  // The device KV cache holds one session's history: if it is not ours (or
  // holds less of it), re-run our history first.
  size_t valid = g.kv_owner == id_ ? std::min(g.kv_tokens, history_.size()) : 0;
  // A cut further back than the sliding-window rings keep rows for: from the start.
  valid = static_cast<size_t>(g.decoder().resume_point(static_cast<int>(valid)));
  const int T = g.max_tokens();
  std::string err;
  // The device drafter's KV is lost with the trunk's: re-fed with the history it re-runs.
  const bool feed = mtp_ && drafter_rows == DrafterRows::Feed;
  if (mtp_ && valid < history_.size()) mtp_->truncate(static_cast<int>(valid));
  const DecoderContext cpu = cpu_context();  // not read by a GPU drafter
  while (valid < history_.size()) {
    if (poll_cancel && cancel_.load(std::memory_order_relaxed)) return false;
    const int n = static_cast<int>(std::min<size_t>(history_.size() - valid, static_cast<size_t>(T)));
    g.kv_owner = 0;  // a failed pass leaves the cache in no one's hands
    if (!g.forward(history_.data() + valid, n, static_cast<int>(valid), nullptr, false, &err)) return device_failed(err);
    if (model_file_changed()) return false;
    if (feed) mtp_->feed(cpu, history_.data() + valid, n, static_cast<int>(valid));
    valid += n;
    g.kv_owner = id_;
    g.kv_tokens = valid;
    stats_re_prefilled_ += static_cast<uint64_t>(n);
  }
  size_t done = 0;
  while (done < tokens.size()) {
    if (poll_cancel && cancel_.load(std::memory_order_relaxed)) return false;
    const int n = static_cast<int>(std::min<size_t>(tokens.size() - done, static_cast<size_t>(T)));
    const bool last_chunk = done + n == tokens.size();
    const bool argmax_only = argmax_rows && !all_logits;
    float* out = argmax_only ? nullptr : all_logits ? all_logits + static_cast<int64_t>(done) * n_vocab_ : logits_.data();
    g.kv_owner = 0;
    if (!g.forward(tokens.data() + done, n, static_cast<int>(history_.size()), out, all_logits != nullptr || argmax_only,
                   &err, argmax_only ? argmax_rows + done : nullptr))
      return device_failed(err);
    if (model_file_changed()) return false;
    if (feed) mtp_->feed(cpu, tokens.data() + done, n, static_cast<int>(history_.size()));
    history_.insert(history_.end(), tokens.begin() + done, tokens.begin() + done + n);
    g.kv_owner = id_;
    g.kv_tokens = history_.size();
    if (all_logits && last_chunk)
      std::copy(out + static_cast<int64_t>(n - 1) * n_vocab_, out + static_cast<int64_t>(n) * n_vocab_, logits_.begin());
    done += n;
  }
  return true;
}

bool GuildSession::hp_has_nextn() const {
  return model_.hparams().n_nextn > 0 && !model_.weights().nextn.empty();
}

bool GuildSession::device_failed(const std::string& error) {
  device_error_ = error.empty() ? "device error" : error;
  model_.mark_failed("a device error occurred: " + device_error_);
  return false;
}

bool GuildSession::model_file_changed() {
  if (!file_error_.empty()) return true;
  std::string err;
  if (model_.files_unchanged(&err)) return false;
  file_error_ = err;
  return true;
}

DecoderContext GuildSession::cpu_context() {
  const GuildModel& m = model_;
  return DecoderContext{m.hparams(), m.weights(), m.recipe(), m.kernels(), m.pool(), kv_, scratch_};
}

bool GuildSession::forward(std::span<const int32_t> tokens, float* all_logits, bool poll_cancel,
                           DrafterRows drafter_rows) {
  if (model_.gpu()) return forward_gpu(tokens, all_logits, poll_cancel, nullptr, drafter_rows);
  const DecoderContext ctx = cpu_context();
  float* hidden = mtp_ && drafter_rows != DrafterRows::None ? mtp_->hidden_rows() : nullptr;
  size_t done = 0;
  while (done < tokens.size()) {
    if (poll_cancel && cancel_.load(std::memory_order_relaxed)) return false;
    const int n = static_cast<int>(std::min<size_t>(tokens.size() - done, static_cast<size_t>(scratch_.max_tokens)));
    const bool last_chunk = done + n == tokens.size();
    float* out = all_logits ? all_logits + static_cast<int64_t>(done) * n_vocab_ : logits_.data();
    const int pos0 = static_cast<int>(history_.size());
    decoder_forward(ctx, tokens.data() + done, n, pos0, out, all_logits != nullptr, hidden);
    if (model_file_changed()) return false;
    history_.insert(history_.end(), tokens.begin() + done, tokens.begin() + done + n);
    if (hidden && drafter_rows == DrafterRows::Feed) mtp_->feed(ctx, tokens.data() + done, n, pos0);
    if (all_logits && last_chunk)
      std::copy(out + static_cast<int64_t>(n - 1) * n_vocab_, out + static_cast<int64_t>(n) * n_vocab_, logits_.begin());
    done += n;
  }
  return true;
}

void GuildSession::calibrate_windows(int32_t last) {
  WindowCosts c;
  const int base = n_past();
  const DecoderContext cpu = cpu_context();
  // Windows of real history tokens (their experts differ as drafts' would),
  // each size twice, the faster kept (noise only adds time).
  std::vector<int32_t> w;
  for (int T : {1, 2, 3, 4, 6, 8, 12, 16}) {
    if (base + T > n_ctx_ || T > kMaxWindow) break;
    w.assign(1, last);
    for (int i = 1; i < T; ++i) w.push_back(history_.empty() ? last : history_[(base - i + history_.size()) % history_.size()]);
    double best = 0.0;
    for (int rep = 0; rep < 2; ++rep) {
      const auto t0 = Clock::now();
      forward(w, window_logits_.data(), false, mtp_ ? DrafterRows::Hold : DrafterRows::None);
      const double ms = ms_since(t0);
      commit(base, 0);
      best = rep == 0 ? ms : std::min(best, ms);
    }
    c.verify_ms[static_cast<size_t>(T)] = best;
  }
  if (mtp_ && base + 3 <= n_ctx_) {
    DraftStep steps[3];
    const auto t0 = Clock::now();
    const int n = mtp_->draft(cpu, last, base, 3, 0.0f, nullptr, steps);
    if (n > 0) c.draft_step_ms = ms_since(t0) / n;
    mtp_->truncate(base);
  }
  c.valid = c.verify_ms[1] > 0;
  model_.set_window_costs(c);
}

void GuildSession::verify_window(std::span<const int32_t> window) {
  forward(window, window_logits_.data(), false);
}

bool GuildSession::verify_window_argmax(std::span<const int32_t> window, int32_t* argmax_rows) {
  return model_.gpu() && forward_gpu(window, nullptr, false, argmax_rows);
}

bool GuildSession::take_turn(const std::function<void(int)>& on_queue, uint64_t* ticket, GenerateResult* res) {
  *ticket = model_.queue().enqueue();
  if (*ticket == 0) {
    res->stop = StopReason::Error;
    res->error_kind = GenerateError::QueueFull;
    res->error = "queue full: too many requests are waiting for this model";
    return false;
  }
  if (!model_.queue().wait_turn(*ticket, cancel_, on_queue)) {
    res->stop = StopReason::Cancel;
    return false;
  }
  return true;
}

bool GuildSession::eval(std::span<const int32_t> tokens, bool all_rows, float* logits, std::string* error,
                        GenerateError* kind) {
  GenerateError ignored;
  if (!kind) kind = &ignored;
  *kind = GenerateError::None;
  auto fail = [&](GenerateError k, std::string msg) {
    *kind = k;
    *error = std::move(msg);
    return false;
  };
  if (tokens.empty()) return fail(GenerateError::InvalidArgument, "no tokens to evaluate");
  GenerateResult res;
  uint64_t ticket = 0;
  if (!take_turn(nullptr, &ticket, &res)) {
    cancel_.store(false);
    if (res.stop == StopReason::Cancel) return fail(GenerateError::None, "cancelled while queued");
    return fail(res.error_kind, res.error);
  }
  QueueTurn turn(model_.queue(), ticket);
  if (!model_.ready()) return fail(GenerateError::NotReady, "model is not ready: " + model_.not_ready_reason());
  if (!check_tokens(tokens, history_.size(), error))
    return fail(error->rfind("context full", 0) == 0 ? GenerateError::ContextFull : GenerateError::InvalidArgument, *error);
  device_error_.clear();
  file_error_.clear();
  if (model_file_changed()) return fail(GenerateError::ModelChanged, file_error_);
  if (!forward(tokens, all_rows ? logits : nullptr, false)) {
    if (!file_error_.empty()) return fail(GenerateError::ModelChanged, file_error_);
    if (!device_error_.empty())
      return fail(GenerateError::Device, "device failure: " + device_error_ + "; the model must be reloaded");
  }
  if (!all_rows) std::copy(logits_.begin(), logits_.end(), logits);
  return true;
}

GenerateResult GuildSession::generate(const GenerateRequest& req) {
  GenerateResult res;
  const auto t_start = Clock::now();
  // A cancel requested before our turn applies to this generation; the flag
  // is cleared when the generation ends, whichever way.
  struct ClearCancel { std::atomic<bool>& f; ~ClearCancel() { f.store(false); } } clear_cancel{cancel_};
  auto fail = [&res](GenerateError kind, std::string msg) {
    res.stop = StopReason::Error;
    res.error_kind = kind;
    res.error = std::move(msg);
    return res;
  };
  if (req.prompt.empty()) return fail(GenerateError::InvalidArgument, "empty prompt");
  if (req.max_new_tokens < 0) return fail(GenerateError::InvalidArgument, "max_new_tokens is negative");
  if (req.drafter.draft && (req.drafter.max_drafts < 0 || req.drafter.max_drafts >= kMaxWindow))
    return fail(GenerateError::InvalidArgument, "drafter proposes too many tokens per window");
  const SpeculativeParams& spec = req.speculative;
  if (spec.mode != DraftMode::None) {
    if (spec.max_window < 1 || spec.max_window > kMaxWindow)
      return fail(GenerateError::InvalidArgument,
                  "spec max window " + std::to_string(spec.max_window) + " is out of range (1.." +
                      std::to_string(kMaxWindow) + ")");
    if (!(spec.min_p >= 0.0f && spec.min_p <= 1.0f))
      return fail(GenerateError::InvalidArgument, "spec min p must be within [0, 1]");
    if (spec.mode == DraftMode::Mtp && !mtp_)
      return fail(GenerateError::InvalidArgument,
                  model_.gpu() && hp_has_nextn() ? "the GPU decoder was built without the model's MTP block"
                                                 : "the model has no MTP (nextn) block to draft with");
  }
  // The MTP block drafts when asked (or by default) and the caller gives no drafter.
  const bool use_mtp = !req.drafter.draft && spec.mode != DraftMode::None && mtp_ && spec.max_window > 1;
  {
    std::string err;
    if (!check_tokens(req.prompt, 0, &err))
      return fail(err.rfind("context full", 0) == 0 ? GenerateError::ContextFull : GenerateError::InvalidArgument, err);
  }

  uint64_t ticket = 0;
  if (!take_turn(req.on_queue, &ticket, &res)) return res;
  QueueTurn turn(model_.queue(), ticket);
  res.queue_ms = ms_since(t_start);
  // Fail-closed readiness: refuse on a model a previous failure left invalid;
  // clear it for the duration of our device work.
  if (!model_.ready()) return fail(GenerateError::NotReady, "model is not ready: " + model_.not_ready_reason());
  file_error_.clear();
  if (model_file_changed()) return fail(GenerateError::ModelChanged, file_error_);
  model_.begin_device_work();

  const Vocab& vocab = model_.vocab();

  // Prefix reuse: keep the cached KV of the longest common prefix, but always
  // leave the prompt's last token to be fed by the decode loop (seed §3).
  size_t reuse = 0;
  const size_t max_reuse = req.prompt.size() - 1;
  while (reuse < max_reuse && reuse < history_.size() && history_[reuse] == req.prompt[reuse]) ++reuse;
  if (mtp_) {
    // The drafter's cache mirrors the trunk's: cut it with the history, and
    // re-run the trunk from where the drafter can be fed without a gap.
    mtp_->truncate(static_cast<int>(reuse));
    if (use_mtp) reuse = static_cast<size_t>(mtp_->resume_point(static_cast<int>(reuse)));
  }
  // A cut further back than sliding-window layers keep rows for: run the
  // prompt again from the start.
  if (!model_.gpu() && static_cast<size_t>(kv_.resume_point(static_cast<int>(reuse))) != reuse) {
    reuse = 0;
    if (mtp_) mtp_->truncate(0);
  }
  history_.resize(reuse);
  res.n_reused = static_cast<int>(reuse);

  const auto t_prefill = Clock::now();
  std::span<const int32_t> to_prefill = req.prompt.subspan(reuse, req.prompt.size() - 1 - reuse);
  res.n_prompt = static_cast<int>(to_prefill.size()) + 1;
  device_error_.clear();
  if (!forward(to_prefill, nullptr, true, use_mtp ? DrafterRows::Feed : DrafterRows::None)) {
    if (!file_error_.empty()) return fail(GenerateError::ModelChanged, file_error_);
    if (!device_error_.empty())
      return fail(GenerateError::Device, "device failure during prefill (" + device_error_ + "); the model must be reloaded");
    res.stop = StopReason::Cancel;
    res.prompt_ms = ms_since(t_prefill);
    model_.end_device_work_ok();
    return res;
  }
  if (model_.take_injected_fault()) {
    model_.mark_failed("a device error occurred during generation (injected by a test)");
    return fail(GenerateError::Device, "device failure during generation; the model must be reloaded");
  }

  std::vector<int32_t> recent(req.prompt.begin(), req.prompt.end());
  recent.reserve(recent.size() + static_cast<size_t>(req.max_new_tokens));
  Sampler sampler(req.sampling, n_vocab_);
  int32_t last = req.prompt.back();
  Clock::time_point t_first{};
  int32_t drafts[kMaxWindow];
  DraftStep draft_steps[kMaxWindow];
  int32_t window_argmax[kMaxWindow];
  const DecoderContext cpu = cpu_context();
  if (req.drafter.draft) res.drafter = "caller";
  else if (use_mtp) res.drafter = "mtp";
  if (use_mtp && spec.by_cost && !model_.window_costs().valid) calibrate_windows(last);
  const WindowCosts* costs = use_mtp && spec.by_cost ? &model_.window_costs() : nullptr;
  const bool device_greedy = model_.gpu() && sampler.plain_argmax();
  res.stop = StopReason::Length;
  bool done = res.tokens.size() >= static_cast<size_t>(req.max_new_tokens);
  while (!done) {
    if (cancel_.load(std::memory_order_relaxed)) { res.stop = StopReason::Cancel; break; }
    const size_t room = static_cast<size_t>(n_ctx_) - history_.size();
    if (room == 0) { res.stop = StopReason::Context; break; }
    // Window: the last accepted token plus up to T-1 drafts (T = 1 without a drafter).
    // A window of 1 + d rows yields at most d + 1 tokens: no draft past what
    // may still be generated or past the context.
    int n_drafts = 0;
    const size_t still = static_cast<size_t>(req.max_new_tokens) - res.tokens.size();
    const int base = static_cast<int>(history_.size());
    if (req.drafter.draft) {
      const int max_d = static_cast<int>(std::min<size_t>({static_cast<size_t>(req.drafter.max_drafts), room - 1, still - 1}));
      if (max_d > 0) n_drafts = std::clamp(req.drafter.draft(req.drafter.ctx, history_, last, max_d, drafts), 0, max_d);
    } else if (use_mtp) {
      const int max_d = static_cast<int>(std::min<size_t>({static_cast<size_t>(spec.max_window - 1), room - 1, still - 1}));
      n_drafts = mtp_->draft(cpu, last, base, max_d, spec.min_p, costs, draft_steps);
      for (int i = 0; i < n_drafts; ++i) drafts[i] = draft_steps[i].token;
    }
    window_.assign(1, last);
    window_.insert(window_.end(), drafts, drafts + n_drafts);
    // Greedy on the GPU: the device's argmax of each row is the token; only
    // those ids come back (no logits copy, no host-side scan of the vocabulary).
    if (device_greedy) verify_window_argmax(window_, window_argmax);
    else forward(window_, window_logits_.data(), false, use_mtp ? DrafterRows::Hold : DrafterRows::None);
    ++res.n_windows;
    // A pass that read a rewritten file is garbage: nothing of it is emitted.
    if (model_file_changed()) return fail(GenerateError::ModelChanged, file_error_);
    if (!device_error_.empty())
      return fail(GenerateError::Device, "device failure during decode (" + device_error_ + "); the model must be reloaded");
    res.n_drafted += n_drafts;
    if (res.tokens.empty()) res.prompt_ms = ms_since(t_prefill);

    // Accept the target's token after each window position while the draft
    // there agrees with it: the longest prefix equal to greedy decode.
    int accepted = 0;
    const int accepted_before = res.n_accepted;
    for (int i = 0; i <= n_drafts && !done; ++i) {
      float* row = window_logits_.data() + static_cast<size_t>(i) * n_vocab_;
      // Row i < n_drafts is checked against draft i: exact for greedy, the
      // speculative-sampling rule otherwise (the output distribution stays).
      const int32_t tok = device_greedy   ? window_argmax[i]
                          : i < n_drafts ? sampler.sample_against_draft(row, recent, drafts[i])
                                         : sampler.sample(row, recent);
      ++accepted;
      if (res.tokens.empty()) { t_first = Clock::now(); res.ttft_ms = ms_since(t_start); }
      if (!req.ignore_eog && vocab.is_eog(tok)) { res.stop = StopReason::Eos; done = true; break; }
      res.tokens.push_back(tok);
      recent.push_back(tok);
      last = tok;
      if (req.on_token && !req.on_token(tok, vocab.token_to_piece(tok, false))) { res.stop = StopReason::Cancel; done = true; break; }
      if (res.tokens.size() >= static_cast<size_t>(req.max_new_tokens)) { done = true; break; }
      if (i < n_drafts && drafts[i] != tok) break;  // draft i rejected
      if (i < n_drafts) ++res.n_accepted;
    }
    // Keep the window rows whose inputs were right: the last accepted token
    // and the accepted drafts. Rejected drafts' KV rows are dropped.
    commit(base, accepted);
    if (use_mtp) mtp_->feed(cpu, window_.data(), accepted, base);
    if (req.on_window)
      req.on_window(std::span<const int32_t>(drafts, static_cast<size_t>(n_drafts)), res.n_accepted - accepted_before);
  }
  if (t_first != Clock::time_point{}) res.decode_ms = ms_since(t_first);
  model_.end_device_work_ok();
  return res;
}

}  // namespace guild
