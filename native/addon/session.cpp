#include "session.h"

#include <cstring>
#include <limits>
#include <utility>

#include "abort_signal.h"

namespace guild_addon {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

const char* StopReasonName(guild_stop_reason r) {
  switch (r) {
    case GUILD_STOP_EOS: return "eos";
    case GUILD_STOP_LENGTH: return "length";
    case GUILD_STOP_CONTEXT: return "context";
    case GUILD_STOP_CANCEL: return "cancel";
    case GUILD_STOP_ERROR: return "error";
  }
  return "error";
}

// Marks the session busy for one operation; released on the JS thread when the
// operation's promise settles (or at once if the operation never starts).
class BusyClaim {
 public:
  BusyClaim(Napi::Env env, SessionPtr session, std::shared_ptr<std::atomic<bool>> cancel_flag)
      : session_(std::move(session)) {
    std::lock_guard<std::mutex> lock(session_->mu);
    if (session_->busy) {
      throw Napi::Error::New(env, "session is busy: another generate() or eval() is still running");
    }
    session_->busy = true;
    session_->cancel_flag = std::move(cancel_flag);
  }
  ~BusyClaim() { Release(); }
  BusyClaim(const BusyClaim&) = delete;
  BusyClaim& operator=(const BusyClaim&) = delete;

  void Release() {
    if (!session_) return;
    std::lock_guard<std::mutex> lock(session_->mu);
    session_->busy = false;
    session_->in_generate = false;
    session_->cancel_flag.reset();
    session_.reset();
  }

 private:
  SessionPtr session_;
};

// Tokens produced on the generating thread and not yet handed to JS. Shared
// with queued thread-safe calls; holds no Node-API values.
struct TokenQueue {
  std::mutex mu;
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;
  bool scheduled = false;     // a delivery call is queued
  bool failed = false;        // onTokens/onQueue threw: deliver nothing more, stop generating
  bool settled = false;       // the promise settled: late queue-position calls are dropped
  std::string callback_error;
  std::shared_ptr<std::atomic<bool>> cancel;  // the generation's cancel flag
};

class GenerateWorker : public PromiseWorker {
 public:
  GenerateWorker(Napi::Env env, SessionPtr session, std::vector<int32_t> prompt)
      : PromiseWorker(env, "guild:generate"),
        session_(std::move(session)),
        prompt_(std::move(prompt)),
        cancel_(std::make_shared<std::atomic<bool>>(false)),
        params_(guild_generate_params_default()) {
    queue_->cancel = cancel_;
  }

  void Configure(const Napi::Object& options, const Napi::Value& on_tokens, const Napi::Value& signal) {
    Napi::Env env = Env();
    guild_sampling_params& s = params_.sampling;
    Napi::Value v;
    if (!(v = options.Get("maxNewTokens")).IsUndefined()) params_.max_new_tokens = ArgInt32(v, "options.maxNewTokens", 0, kInt32Max);
    if (!(v = options.Get("temperature")).IsUndefined()) s.temperature = static_cast<float>(ArgNumber(v, "options.temperature"));
    if (!(v = options.Get("topK")).IsUndefined()) s.top_k = ArgInt32(v, "options.topK", 0, kInt32Max);
    if (!(v = options.Get("topP")).IsUndefined()) s.top_p = static_cast<float>(ArgNumber(v, "options.topP"));
    if (!(v = options.Get("minP")).IsUndefined()) s.min_p = static_cast<float>(ArgNumber(v, "options.minP"));
    if (!(v = options.Get("repeatPenalty")).IsUndefined()) s.repeat_penalty = static_cast<float>(ArgNumber(v, "options.repeatPenalty"));
    if (!(v = options.Get("repeatLastN")).IsUndefined()) s.repeat_last_n = ArgInt32(v, "options.repeatLastN", 0, kInt32Max);
    if (!(v = options.Get("seed")).IsUndefined()) s.seed = ArgSeed(v);
    if (!(v = options.Get("draft")).IsUndefined()) {
      const std::string mode = v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
      if (mode == "none") params_.draft = GUILD_DRAFT_NONE;
      else if (mode == "auto") params_.draft = GUILD_DRAFT_AUTO;
      else if (mode == "mtp") params_.draft = GUILD_DRAFT_MTP;
      else throw Napi::TypeError::New(env, "options.draft must be \"none\", \"auto\" or \"mtp\"");
    }
    if (!(v = options.Get("specMax")).IsUndefined()) params_.spec_max = ArgInt32(v, "options.specMax", 1, 16);
    if (!(v = options.Get("specMinP")).IsUndefined()) params_.spec_min_p = static_cast<float>(ArgNumber(v, "options.specMinP"));
    if (!(v = options.Get("specByCost")).IsUndefined()) {
      if (!v.IsBoolean()) throw Napi::TypeError::New(env, "options.specByCost must be a boolean");
      params_.spec_by_cost = v.As<Napi::Boolean>().Value() ? 1 : 0;
    }
    if (!(params_.spec_min_p >= 0 && params_.spec_min_p <= 1)) throw Napi::RangeError::New(env, "options.specMinP must be in [0, 1]");
    if (s.temperature < 0) throw Napi::RangeError::New(env, "options.temperature must be >= 0");
    if (!(s.top_p > 0 && s.top_p <= 1)) throw Napi::RangeError::New(env, "options.topP must be in (0, 1]");
    if (!(s.min_p >= 0 && s.min_p <= 1)) throw Napi::RangeError::New(env, "options.minP must be in [0, 1]");
    if (!(s.repeat_penalty > 0)) throw Napi::RangeError::New(env, "options.repeatPenalty must be > 0");
    if (!on_tokens.IsFunction()) throw Napi::TypeError::New(env, "onTokens must be a function");
    Napi::Value on_queue = options.Get("onQueue");
    bool want_queue = !on_queue.IsUndefined() && !on_queue.IsNull();
    if (want_queue && !on_queue.IsFunction()) throw Napi::TypeError::New(env, "options.onQueue must be a function");

    claim_ = std::make_unique<BusyClaim>(env, session_, cancel_);
    SessionPtr session = session_;
    std::shared_ptr<std::atomic<bool>> flag = cancel_;
    abort_.Attach(signal, [session, flag] { session->Cancel(flag); });
    // Last: nothing after this may throw, or the thread-safe function would leak.
    on_tokens_ = Napi::Persistent(on_tokens.As<Napi::Function>());
    tsfn_ = Napi::ThreadSafeFunction::New(env, on_tokens.As<Napi::Function>(), "guild:tokens", 0, 1);
    if (want_queue) {
      queue_tsfn_ = Napi::ThreadSafeFunction::New(env, on_queue.As<Napi::Function>(), "guild:queue", 0, 1);
      has_queue_tsfn_ = true;
    }
  }

 protected:
  void Run() override {
    bool pre_cancelled;
    {
      std::lock_guard<std::mutex> lock(session_->mu);
      pre_cancelled = cancel_->load();
      session_->in_generate = !pre_cancelled;
    }
    result_ = guild_generate_result{};
    result_.struct_size = sizeof(guild_generate_result);
    if (pre_cancelled) {  // aborted before it started: nothing ran
      result_.stop_reason = GUILD_STOP_CANCEL;
      return;
    }
    params_.prompt = prompt_.data();
    params_.n_prompt = static_cast<int32_t>(prompt_.size());
    params_.on_token = &GenerateWorker::OnToken;
    params_.on_queue = has_queue_tsfn_ ? &GenerateWorker::OnQueue : nullptr;
    params_.user = this;

    char* error = nullptr;
    guild_status status = guild_generate(session_->session, &params_, &result_, &error);
    {
      std::lock_guard<std::mutex> lock(session_->mu);
      session_->in_generate = false;
    }
    std::string message = TakeString(error);
    if (status == GUILD_ERR_CANCELLED) {
      result_.stop_reason = GUILD_STOP_CANCEL;
      return;
    }
    if (status != GUILD_OK) {
      Fail(message.empty() ? std::string("generation failed (") + guild_status_name(status) + ")" : message, status);
    } else if (result_.stop_reason == GUILD_STOP_ERROR) {
      Fail(message.empty() ? "generation failed" : message, GUILD_ERR_INTERNAL);
    }
  }

  void Finish(Napi::Env env) override {
    abort_.Detach();
    Deliver(env, on_tokens_.Value(), *queue_);  // every token reaches JS before the promise settles
    {
      std::lock_guard<std::mutex> lock(queue_->mu);
      queue_->settled = true;
    }
    tsfn_.Release();
    if (has_queue_tsfn_) {
      queue_tsfn_.Release();
      has_queue_tsfn_ = false;
    }
    if (claim_) claim_->Release();
  }

  Napi::Value Result(Napi::Env env) override {
    {
      std::lock_guard<std::mutex> lock(queue_->mu);
      if (queue_->failed) throw Napi::Error::New(env, queue_->callback_error);
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("stopReason", StopReasonName(result_.stop_reason));
    out.Set("nPrompt", result_.n_prompt);
    out.Set("nReused", result_.n_reused);
    out.Set("nGenerated", result_.n_generated);
    out.Set("promptMs", result_.prompt_ms);
    out.Set("decodeMs", result_.decode_ms);
    out.Set("ttftMs", result_.ttft_ms);
    out.Set("queueMs", result_.queue_ms);
    out.Set("nDrafted", result_.n_drafted);
    out.Set("nAccepted", result_.n_accepted);
    out.Set("nWindows", result_.n_windows);
    out.Set("draftedByMtp", result_.drafted_by_mtp != 0);
    return out;
  }

 private:
  static uint64_t ArgSeed(const Napi::Value& v) {
    if (v.IsBigInt()) {
      bool lossless = false;
      uint64_t seed = v.As<Napi::BigInt>().Uint64Value(&lossless);
      if (!lossless) throw Napi::RangeError::New(v.Env(), "options.seed must fit in 64 bits unsigned");
      return seed;
    }
    double d = ArgNumber(v, "options.seed");
    if (d < 0 || d > 9007199254740991.0 || static_cast<double>(static_cast<uint64_t>(d)) != d) {
      throw Napi::RangeError::New(v.Env(), "options.seed must be a non-negative safe integer or a bigint");
    }
    return static_cast<uint64_t>(d);
  }

  // Generating thread: queue the token and make sure one delivery is pending.
  static int32_t OnToken(int32_t token, const char* piece, int32_t piece_len, void* user) {
    auto* self = static_cast<GenerateWorker*>(user);
    bool schedule = false;
    {
      std::lock_guard<std::mutex> lock(self->queue_->mu);
      self->queue_->ids.push_back(token);
      self->queue_->pieces.emplace_back(piece != nullptr && piece_len > 0 ? std::string(piece, piece_len) : std::string());
      if (!self->queue_->scheduled) self->queue_->scheduled = schedule = true;
    }
    if (schedule) {
      std::shared_ptr<TokenQueue> queue = self->queue_;
      napi_status st = self->tsfn_.NonBlockingCall([queue](Napi::Env env, Napi::Function fn) {
        if (env != nullptr && !fn.IsEmpty()) Deliver(env, fn, *queue);
      });
      if (st != napi_ok) {  // Finish() delivers what is left
        std::lock_guard<std::mutex> lock(self->queue_->mu);
        self->queue_->scheduled = false;
      }
    }
    return self->cancel_->load() ? 1 : 0;
  }

  // Waiting thread: the number of requests ahead of this one (0 when it starts).
  static void OnQueue(int32_t position, void* user) {
    auto* self = static_cast<GenerateWorker*>(user);
    std::shared_ptr<TokenQueue> queue = self->queue_;
    self->queue_tsfn_.NonBlockingCall([queue, position](Napi::Env env, Napi::Function fn) {
      if (env == nullptr || fn.IsEmpty()) return;
      {
        std::lock_guard<std::mutex> lock(queue->mu);
        if (queue->settled || queue->failed) return;
      }
      Napi::HandleScope scope(env);
      try {
        fn.Call({Napi::Number::New(env, position)});
      } catch (const Napi::Error& e) {
        std::lock_guard<std::mutex> lock(queue->mu);
        queue->failed = true;
        queue->callback_error = "onQueue threw: " + e.Message();
        if (queue->cancel) queue->cancel->store(true);
      }
    });
  }

  // JS thread: hands every queued token to onTokens(ids, pieces).
  static void Deliver(Napi::Env env, Napi::Function fn, TokenQueue& queue) {
    std::vector<int32_t> ids;
    std::vector<std::string> pieces;
    {
      std::lock_guard<std::mutex> lock(queue.mu);
      queue.scheduled = false;
      if (queue.failed || queue.ids.empty()) return;
      ids.swap(queue.ids);
      pieces.swap(queue.pieces);
    }
    Napi::HandleScope scope(env);
    try {
      Napi::Int32Array js_ids = Napi::Int32Array::New(env, ids.size());
      std::memcpy(js_ids.Data(), ids.data(), ids.size() * sizeof(int32_t));
      Napi::Array js_pieces = Napi::Array::New(env, pieces.size());
      for (size_t i = 0; i < pieces.size(); ++i) {
        js_pieces.Set(static_cast<uint32_t>(i), Napi::Buffer<char>::Copy(env, pieces[i].data(), pieces[i].size()));
      }
      fn.Call({js_ids, js_pieces});
    } catch (const Napi::Error& e) {
      std::lock_guard<std::mutex> lock(queue.mu);
      queue.failed = true;
      queue.callback_error = "onTokens threw: " + e.Message();
      if (queue.cancel) queue.cancel->store(true);  // the token callback returns nonzero from now on
    }
  }

  SessionPtr session_;
  std::vector<int32_t> prompt_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  guild_generate_params params_;
  guild_generate_result result_{};
  std::shared_ptr<TokenQueue> queue_ = std::make_shared<TokenQueue>();
  std::unique_ptr<BusyClaim> claim_;
  AbortListener abort_;
  Napi::FunctionReference on_tokens_;
  Napi::ThreadSafeFunction tsfn_;
  Napi::ThreadSafeFunction queue_tsfn_;
  bool has_queue_tsfn_ = false;
};

class EvalWorker : public PromiseWorker {
 public:
  EvalWorker(Napi::Env env, SessionPtr session, std::vector<int32_t> tokens, bool all_rows)
      : PromiseWorker(env, "guild:eval"), session_(std::move(session)), tokens_(std::move(tokens)), all_rows_(all_rows) {}

  // Allocates the result on the JS thread; the pool thread writes into it.
  void Configure() {
    Napi::Env env = Env();
    size_t n_vocab = static_cast<size_t>(guild_model_n_vocab(session_->model->model));
    size_t rows = all_rows_ ? tokens_.size() : 1;
    constexpr size_t kMaxElements = size_t{1} << 32;  // 16 GiB of floats: a sanity bound, not a promise
    if (n_vocab == 0 || rows > kMaxElements / n_vocab) {
      throw Napi::RangeError::New(env, "logits for " + std::to_string(rows) + " rows x " + std::to_string(n_vocab) +
                                           " do not fit one Float32Array");
    }
    Napi::Float32Array logits = Napi::Float32Array::New(env, rows * n_vocab);
    data_ = logits.Data();
    logits_ = Napi::Persistent(logits);
    claim_ = std::make_unique<BusyClaim>(env, session_, nullptr);
  }

 protected:
  void Run() override {
    char* error = nullptr;
    guild_status status = guild_eval(session_->session, tokens_.data(), static_cast<int32_t>(tokens_.size()),
                                     all_rows_ ? 1 : 0, data_, &error);
    std::string message = TakeString(error);
    if (status != GUILD_OK) {
      Fail(message.empty() ? std::string("eval failed (") + guild_status_name(status) + ")" : message, status);
    }
  }

  void Finish(Napi::Env) override {
    if (claim_) claim_->Release();
  }

  Napi::Value Result(Napi::Env) override { return logits_.Value(); }

 private:
  SessionPtr session_;
  std::vector<int32_t> tokens_;
  bool all_rows_;
  float* data_ = nullptr;
  Napi::Reference<Napi::Float32Array> logits_;
  std::unique_ptr<BusyClaim> claim_;
};

}  // namespace

// ---- AddonSession --------------------------------------------------------------------

Napi::Function AddonSession::Define(Napi::Env env) {
  return DefineClass(env, "Session",
                     {
                         InstanceMethod<&AddonSession::Generate>("generate"),
                         InstanceMethod<&AddonSession::Eval>("eval"),
                         InstanceMethod<&AddonSession::Reset>("reset"),
                         InstanceMethod<&AddonSession::Cancel>("cancel"),
                         InstanceMethod<&AddonSession::Dispose>("dispose"),
                         InstanceAccessor<&AddonSession::GetDisposed>("disposed"),
                         InstanceAccessor<&AddonSession::GetBusy>("busy"),
                     });
}

Napi::Object AddonSession::NewInstance(Napi::Env env, SessionPtr handle) {
  AddonData& data = GetAddonData(env);
  Napi::Object obj = data.session_constructor.New({data.construct_token.Value()});
  AddonSession::Unwrap(obj)->handle_ = std::move(handle);
  return obj;
}

AddonSession::AddonSession(const Napi::CallbackInfo& info) : Napi::ObjectWrap<AddonSession>(info) {
  if (info.Length() < 1 || !IsConstructToken(info.Env(), info[0])) {
    throw Napi::TypeError::New(info.Env(), "Session cannot be constructed directly; use model.createSession()");
  }
}

const SessionPtr& AddonSession::Handle(Napi::Env env) const {
  if (!handle_) throw Napi::Error::New(env, "session is disposed");
  return handle_;
}

Napi::Value AddonSession::Generate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const SessionPtr& session = Handle(env);
  std::vector<int32_t> prompt = ArgTokens(info[0], "prompt", guild_model_n_vocab(session->model->model));
  if (prompt.empty()) throw Napi::TypeError::New(env, "prompt must hold at least one token");
  if (prompt.size() > static_cast<size_t>(kInt32Max)) throw Napi::RangeError::New(env, "prompt is too long");
  Napi::Object options = ArgOptions(info[1], "options");
  auto* worker = new GenerateWorker(env, session, std::move(prompt));
  try {
    worker->Configure(options, info[2], info[3]);
  } catch (...) {
    delete worker;  // never queued; its BusyClaim (if any) is released
    throw;
  }
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value AddonSession::Eval(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const SessionPtr& session = Handle(env);
  std::vector<int32_t> tokens = ArgTokens(info[0], "tokens", guild_model_n_vocab(session->model->model));
  if (tokens.empty()) throw Napi::TypeError::New(env, "tokens must hold at least one token");
  if (tokens.size() > static_cast<size_t>(kInt32Max)) throw Napi::RangeError::New(env, "too many tokens");
  bool all_rows = ArgBool(info[1], "allRows", false);
  auto* worker = new EvalWorker(env, session, std::move(tokens), all_rows);
  try {
    worker->Configure();
  } catch (...) {
    delete worker;
    throw;
  }
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value AddonSession::Reset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const SessionPtr& session = Handle(env);
  std::lock_guard<std::mutex> lock(session->mu);
  if (session->busy) throw Napi::Error::New(env, "session is busy: cannot reset while generate() or eval() runs");
  guild_session_reset(session->session);
  return env.Undefined();
}

Napi::Value AddonSession::Cancel(const Napi::CallbackInfo& info) {
  if (handle_) {
    std::shared_ptr<std::atomic<bool>> flag;
    {
      std::lock_guard<std::mutex> lock(handle_->mu);
      flag = handle_->cancel_flag;
    }
    handle_->Cancel(flag);
  }
  return info.Env().Undefined();
}

Napi::Value AddonSession::Dispose(const Napi::CallbackInfo& info) {
  Cancel(info);      // a running generation stops; its worker keeps the native session until it ends
  handle_.reset();
  return info.Env().Undefined();
}

Napi::Value AddonSession::GetDisposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), !handle_);
}

Napi::Value AddonSession::GetBusy(const Napi::CallbackInfo& info) {
  if (!handle_) return Napi::Boolean::New(info.Env(), false);
  std::lock_guard<std::mutex> lock(handle_->mu);
  return Napi::Boolean::New(info.Env(), handle_->busy);
}

}  // namespace guild_addon
