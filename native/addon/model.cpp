#include "model.h"

#include <cstring>
#include <limits>
#include <utility>

#include "abort_signal.h"
#include "session.h"

namespace guild_addon {
namespace {

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

// State shared between the load worker, its progress callbacks (on the loading
// thread and, queued, on the JS thread) and the abort listener. No Node-API
// values live here: its last owner may be dropped on any thread.
struct LoadState {
  std::atomic<bool> abort{false};
  std::mutex mu;
  std::vector<std::pair<std::string, double>> events;  // progress not yet handed to JS
  bool scheduled = false;                              // a delivery call is queued
  std::string callback_error;                          // message of an exception thrown by onProgress
};

// JS thread: hands queued progress events to onProgress(stage, fraction), in order.
void DeliverProgress(Napi::Env env, Napi::Function fn, LoadState& state) {
  std::vector<std::pair<std::string, double>> events;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.scheduled = false;
    if (!state.callback_error.empty()) return;
    events.swap(state.events);
  }
  Napi::HandleScope scope(env);
  for (const auto& [stage, fraction] : events) {
    try {
      fn.Call({Napi::String::New(env, stage), Napi::Number::New(env, fraction)});
    } catch (const Napi::Error& e) {
      std::lock_guard<std::mutex> lock(state.mu);
      state.callback_error = "onProgress threw: " + e.Message();
      state.abort.store(true);
      return;
    }
  }
}

// The options object of loadModel and checkModel: read (and checked) on the
// JS thread, turned into guild_load_params on the worker thread. One reader,
// so that a check is asked exactly what the load will be.
class LoadOptionsArg {
 public:
  void Read(Napi::Env env, const Napi::Object& options) {
    Napi::Value threads = options.Get("threads");
    if (!threads.IsUndefined()) n_threads_ = ArgInt32(threads, "options.threads", 0, 4096);
    Napi::Value ctx = options.Get("contextSize");
    if (!ctx.IsUndefined()) n_ctx_ = ArgInt32(ctx, "options.contextSize", 0, kInt32Max);
    Napi::Value kv = options.Get("kvType");
    if (!kv.IsUndefined()) {
      kv_type_ = ArgString(kv, "options.kvType");
      has_kv_type_ = true;
    }
    // The kernel packages directory for stage 2 (docs/PACKAGES.md); absent or
    // null: $GUILD_PACKAGES_DIR, else the user's. The bundled packages are
    // searched as well either way.
    Napi::Value packages_dir = options.Get("packagesDir");
    if (!packages_dir.IsUndefined() && !packages_dir.IsNull()) {
      packages_dir_ = ArgString(packages_dir, "options.packagesDir");
      if (packages_dir_.empty()) throw Napi::TypeError::New(env, "options.packagesDir must not be empty");
      has_packages_dir_ = true;
    }
    // GPU use (docs/CUDA.md): "auto" | "cpu" | "cuda:N"; a device memory budget in bytes;
    // every routed expert on the CPU.
    Napi::Value gpu = options.Get("gpu");
    if (!gpu.IsUndefined() && !gpu.IsNull()) {
      gpu_ = ArgString(gpu, "options.gpu");
      if (gpu_ != "auto" && gpu_ != "cpu" && gpu_.rfind("cuda:", 0) != 0)
        throw Napi::TypeError::New(env, "options.gpu must be \"auto\", \"cpu\" or \"cuda:N\"");
      has_gpu_ = true;
    }
    Napi::Value budget = options.Get("gpuBudgetBytes");
    if (!budget.IsUndefined() && !budget.IsNull()) {
      if (!budget.IsNumber()) throw Napi::TypeError::New(env, "options.gpuBudgetBytes must be a number");
      gpu_budget_ = budget.As<Napi::Number>().DoubleValue();
      if (!(gpu_budget_ > 0) || gpu_budget_ > 1e15)
        throw Napi::RangeError::New(env, "options.gpuBudgetBytes must be a positive number of bytes");
    }
    Napi::Value experts_cpu = options.Get("expertsOnCpu");
    if (!experts_cpu.IsUndefined() && !experts_cpu.IsNull()) {
      if (!experts_cpu.IsBoolean()) throw Napi::TypeError::New(env, "options.expertsOnCpu must be a boolean");
      experts_on_cpu_ = experts_cpu.As<Napi::Boolean>().Value();
    }
    // Peer GPUs of a hybrid model: "cuda:N" entries separated by commas ("" = none), and the
    // device memory of each one's expert cache in bytes.
    Napi::Value peers = options.Get("gpuPeers");
    if (!peers.IsUndefined() && !peers.IsNull()) {
      gpu_peers_ = ArgString(peers, "options.gpuPeers");
      for (size_t at = 0; at < gpu_peers_.size();) {
        size_t comma = gpu_peers_.find(',', at);
        if (comma == std::string::npos) comma = gpu_peers_.size();
        if (gpu_peers_.compare(at, 5, "cuda:") != 0 || comma - at <= 5)
          throw Napi::TypeError::New(env, "options.gpuPeers must be \"cuda:N\" entries separated by commas");
        at = comma + 1;
        if (at == gpu_peers_.size())  // a trailing comma
          throw Napi::TypeError::New(env, "options.gpuPeers must be \"cuda:N\" entries separated by commas");
      }
      has_gpu_peers_ = true;
    }
    Napi::Value peer_budget = options.Get("gpuPeerBudgetBytes");
    if (!peer_budget.IsUndefined() && !peer_budget.IsNull()) {
      if (!peer_budget.IsNumber()) throw Napi::TypeError::New(env, "options.gpuPeerBudgetBytes must be a number");
      gpu_peer_budget_ = peer_budget.As<Napi::Number>().DoubleValue();
      if (!(gpu_peer_budget_ > 0) || gpu_peer_budget_ > 1e15)
        throw Napi::RangeError::New(env, "options.gpuPeerBudgetBytes must be a positive number of bytes");
    }
    // Tokenizer only (guild tokenize / detokenize, vocab-only GGUF files).
    Napi::Value vocab_only = options.Get("vocabOnly");
    if (!vocab_only.IsUndefined() && !vocab_only.IsNull()) {
      if (!vocab_only.IsBoolean()) throw Napi::TypeError::New(env, "options.vocabOnly must be a boolean");
      vocab_only_ = vocab_only.As<Napi::Boolean>().Value();
    }
  }

  // Pointers into this object: valid while it lives.
  guild_load_params Params() const {
    guild_load_params params = guild_load_params_default();
    if (n_threads_ >= 0) params.n_threads = n_threads_;
    if (n_ctx_ >= 0) params.n_ctx = n_ctx_;
    if (has_kv_type_) params.kv_type = kv_type_.c_str();
    if (has_packages_dir_) params.packages_dir = packages_dir_.c_str();
    if (has_gpu_) params.gpu = gpu_.c_str();
    params.gpu_budget_bytes = gpu_budget_;
    params.experts_on_cpu = experts_on_cpu_ ? 1 : 0;
    if (has_gpu_peers_) params.gpu_peers = gpu_peers_.c_str();
    params.gpu_peer_budget_bytes = gpu_peer_budget_;
    params.vocab_only = vocab_only_ ? 1 : 0;
    return params;
  }

 private:
  int32_t n_threads_ = -1;
  int32_t n_ctx_ = -1;
  std::string kv_type_;
  bool has_kv_type_ = false;
  std::string packages_dir_;
  bool has_packages_dir_ = false;
  std::string gpu_;
  bool has_gpu_ = false;
  double gpu_budget_ = 0;  // <= 0: the C ABI default (free memory less 1 GiB)
  bool experts_on_cpu_ = false;
  std::string gpu_peers_;
  bool has_gpu_peers_ = false;
  double gpu_peer_budget_ = 0;  // <= 0: the C ABI default (each peer's free memory less 1 GiB)
  bool vocab_only_ = false;
};

class LoadModelWorker : public PromiseWorker {
 public:
  LoadModelWorker(Napi::Env env, std::string path) : PromiseWorker(env, "guild:loadModel"), path_(std::move(path)) {}

  void Configure(const Napi::Object& options, const Napi::Value& on_progress, const Napi::Value& signal) {
    options_.Read(Env(), options);
    bool want_progress = !on_progress.IsUndefined() && !on_progress.IsNull();
    if (want_progress && !on_progress.IsFunction()) throw Napi::TypeError::New(Env(), "onProgress must be a function");
    auto state = state_;
    abort_.Attach(signal, [state] { state->abort.store(true); });
    // Last: nothing after this may throw, or the thread-safe function would leak.
    if (want_progress) {
      on_progress_ = Napi::Persistent(on_progress.As<Napi::Function>());
      progress_ = Napi::ThreadSafeFunction::New(Env(), on_progress.As<Napi::Function>(), "guild:loadProgress", 0, 1);
      has_progress_ = true;
    }
  }

 protected:
  void Run() override {
    if (state_->abort.load()) {
      Fail("model load was aborted", GUILD_ERR_CANCELLED);
      return;
    }
    guild_load_params params = options_.Params();
    params.progress = &LoadModelWorker::OnProgress;
    params.progress_user = this;

    char* error = nullptr;
    guild_model* model = guild_model_load(path_.c_str(), &params, &error);
    std::string message = TakeString(error);
    if (model == nullptr) {
      if (state_->abort.load()) {
        std::lock_guard<std::mutex> lock(state_->mu);
        Fail(!state_->callback_error.empty() ? state_->callback_error
                                              : (message.empty() ? "model load was aborted" : message),
             GUILD_ERR_CANCELLED);
      } else {
        Fail(message.empty() ? path_ + ": failed to load the model" : message);
      }
      return;
    }
    model_ = std::make_shared<ModelHandle>(model);
    if (state_->abort.load()) {  // aborted after the last progress poll: honour it
      model_.reset();
      Fail("model load was aborted", GUILD_ERR_CANCELLED);
    }
  }

  void Finish(Napi::Env env) override {
    if (has_progress_) {
      DeliverProgress(env, on_progress_.Value(), *state_);  // all progress reaches JS before the promise settles
      progress_.Release();
      has_progress_ = false;
    }
    abort_.Detach();  // after the drain: onProgress may abort
  }

  Napi::Value Result(Napi::Env env) override {
    if (state_->abort.load()) {  // aborted after the load finished but before it was delivered
      model_.reset();
      std::lock_guard<std::mutex> lock(state_->mu);
      Napi::Error error = Napi::Error::New(
          env, state_->callback_error.empty() ? "model load was aborted" : state_->callback_error);
      error.Set("code", Napi::String::New(env, guild_status_name(GUILD_ERR_CANCELLED)));
      throw error;
    }
    return AddonModel::NewInstance(env, model_);
  }

 private:
  // Runs on the loading thread. Returning nonzero cancels the load.
  static int32_t OnProgress(const char* stage, double fraction, void* user) {
    auto* self = static_cast<LoadModelWorker*>(user);
    LoadState& state = *self->state_;
    if (self->has_progress_) {
      bool schedule = false;
      {
        std::lock_guard<std::mutex> lock(state.mu);
        state.events.emplace_back(stage != nullptr ? stage : "", fraction);
        if (!state.scheduled) state.scheduled = schedule = true;
      }
      if (schedule) {
        std::shared_ptr<LoadState> shared = self->state_;
        napi_status st = self->progress_.NonBlockingCall([shared](Napi::Env env, Napi::Function fn) {
          if (env != nullptr && !fn.IsEmpty()) DeliverProgress(env, fn, *shared);
        });
        if (st != napi_ok) {  // Finish() delivers what is left
          std::lock_guard<std::mutex> lock(state.mu);
          state.scheduled = false;
        }
      }
    }
    return state.abort.load() ? 1 : 0;
  }

  std::string path_;
  LoadOptionsArg options_;
  std::shared_ptr<LoadState> state_ = std::make_shared<LoadState>();
  Napi::FunctionReference on_progress_;
  Napi::ThreadSafeFunction progress_;
  bool has_progress_ = false;
  AbortListener abort_;
  ModelPtr model_;
};

// checkModel: guild_model_check off the JS thread; resolves with its JSON
// verdict (a refusal is a verdict, not a rejection).
class CheckModelWorker : public PromiseWorker {
 public:
  CheckModelWorker(Napi::Env env, std::string path) : PromiseWorker(env, "guild:checkModel"), path_(std::move(path)) {}
  void Configure(const Napi::Object& options) { options_.Read(Env(), options); }

 protected:
  void Run() override {
    const guild_load_params params = options_.Params();
    char* json = nullptr;
    char* error = nullptr;
    const guild_status status = guild_model_check(path_.c_str(), &params, &json, &error);
    std::string message = TakeString(error);
    if (status != GUILD_OK || json == nullptr) {
      TakeString(json);
      Fail(message.empty() ? path_ + ": the pre-flight check failed" : message, status == GUILD_OK ? GUILD_ERR_INTERNAL : status);
      return;
    }
    json_ = TakeString(json);
  }

  Napi::Value Result(Napi::Env env) override { return Napi::String::New(env, json_); }

 private:
  std::string path_;
  LoadOptionsArg options_;
  std::string json_;
};

class CreateSessionWorker : public PromiseWorker {
 public:
  CreateSessionWorker(Napi::Env env, ModelPtr model, int32_t n_ctx)
      : PromiseWorker(env, "guild:createSession"), model_(std::move(model)), n_ctx_(n_ctx) {}

 protected:
  void Run() override {
    char* error = nullptr;
    guild_session* session = guild_session_create(model_->model, n_ctx_, &error);
    std::string message = TakeString(error);
    if (session == nullptr) {
      Fail(message.empty() ? "failed to create a session" : message);
      return;
    }
    session_ = std::make_shared<SessionHandle>(model_, session);
  }

  Napi::Value Result(Napi::Env env) override { return AddonSession::NewInstance(env, session_); }

 private:
  ModelPtr model_;
  int32_t n_ctx_;
  SessionPtr session_;
};

// Text arguments may be strings or raw UTF-8 bytes (Buffer / Uint8Array).
std::string ArgText(const Napi::Value& v, const char* what) {
  if (v.IsString()) return v.As<Napi::String>().Utf8Value();
  if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
    Napi::Uint8Array bytes = v.As<Napi::Uint8Array>();
    return std::string(reinterpret_cast<const char*>(bytes.Data()), bytes.ElementLength());
  }
  throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a string or a Uint8Array");
}

}  // namespace

// ---- AddonModel ------------------------------------------------------------------

Napi::Function AddonModel::Define(Napi::Env env) {
  return DefineClass(env, "Model",
                     {
                         InstanceMethod<&AddonModel::Info>("info"),
                         InstanceMethod<&AddonModel::Profile>("profile"),
                         InstanceAccessor<&AddonModel::GetReady>("ready"),
                         InstanceAccessor<&AddonModel::GetQueueLength>("queueLength"),
                         InstanceAccessor<&AddonModel::GetVocabSize>("vocabSize"),
                         InstanceAccessor<&AddonModel::GetTrainContextSize>("trainContextSize"),
                         InstanceAccessor<&AddonModel::GetBosToken>("bosToken"),
                         InstanceAccessor<&AddonModel::GetEosToken>("eosToken"),
                         InstanceAccessor<&AddonModel::GetDisposed>("disposed"),
                         InstanceMethod<&AddonModel::IsEog>("isEog"),
                         InstanceMethod<&AddonModel::ChatTemplate>("chatTemplate"),
                         InstanceMethod<&AddonModel::Tokenize>("tokenize"),
                         InstanceMethod<&AddonModel::TokenToPiece>("tokenToPiece"),
                         InstanceMethod<&AddonModel::Detokenize>("detokenize"),
                         InstanceMethod<&AddonModel::CreateSession>("createSession"),
                         InstanceMethod<&AddonModel::Dispose>("dispose"),
                     });
}

Napi::Object AddonModel::NewInstance(Napi::Env env, ModelPtr handle) {
  AddonData& data = GetAddonData(env);
  Napi::Object obj = data.model_constructor.New({data.construct_token.Value()});
  AddonModel::Unwrap(obj)->handle_ = std::move(handle);
  return obj;
}

AddonModel::AddonModel(const Napi::CallbackInfo& info) : Napi::ObjectWrap<AddonModel>(info) {
  if (info.Length() < 1 || !IsConstructToken(info.Env(), info[0])) {
    throw Napi::TypeError::New(info.Env(), "Model cannot be constructed directly; use loadModel()");
  }
}

const ModelPtr& AddonModel::Handle(Napi::Env env) const {
  if (!handle_) throw Napi::Error::New(env, "model is disposed");
  return handle_;
}

Napi::Value AddonModel::Info(const Napi::CallbackInfo& info) {
  char* json = guild_model_info_json(Handle(info.Env())->model);
  if (json == nullptr) throw Napi::Error::New(info.Env(), "guild_model_info_json failed");
  return Napi::String::New(info.Env(), TakeString(json));
}

Napi::Value AddonModel::Profile(const Napi::CallbackInfo& info) {
  char* json = guild_model_profile_json(Handle(info.Env())->model);
  if (json == nullptr) throw Napi::Error::New(info.Env(), "guild_model_profile_json failed");
  return Napi::String::New(info.Env(), TakeString(json));
}

Napi::Value AddonModel::GetReady(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), guild_model_ready(Handle(info.Env())->model) != 0);
}

Napi::Value AddonModel::GetQueueLength(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_model_queue_length(Handle(info.Env())->model));
}

Napi::Value AddonModel::GetVocabSize(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_model_n_vocab(Handle(info.Env())->model));
}

Napi::Value AddonModel::GetTrainContextSize(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_model_n_ctx_train(Handle(info.Env())->model));
}

Napi::Value AddonModel::GetBosToken(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_token_bos(Handle(info.Env())->model));
}

Napi::Value AddonModel::GetEosToken(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_token_eos(Handle(info.Env())->model));
}

Napi::Value AddonModel::GetDisposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), !handle_);
}

Napi::Value AddonModel::IsEog(const Napi::CallbackInfo& info) {
  guild_model* model = Handle(info.Env())->model;
  int32_t token = ArgInt32(info[0], "token", std::numeric_limits<int32_t>::min(), kInt32Max);
  if (token < 0 || token >= guild_model_n_vocab(model)) return Napi::Boolean::New(info.Env(), false);
  return Napi::Boolean::New(info.Env(), guild_token_is_eog(model, token) != 0);
}

Napi::Value AddonModel::ChatTemplate(const Napi::CallbackInfo& info) {
  char* tmpl = guild_model_chat_template(Handle(info.Env())->model);
  if (tmpl == nullptr) return info.Env().Null();
  return Napi::String::New(info.Env(), TakeString(tmpl));
}

// tokenize(text, addSpecial, parseSpecial) -> Int32Array
Napi::Value AddonModel::Tokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  guild_model* model = Handle(env)->model;
  std::string text = ArgText(info[0], "text");
  bool add_special = ArgBool(info[1], "addSpecial", false);
  bool parse_special = ArgBool(info[2], "parseSpecial", false);
  if (text.size() > static_cast<size_t>(kInt32Max) / 2) throw Napi::RangeError::New(env, "text is too long");

  std::vector<int32_t> tokens(text.size() + 8);
  int32_t n = guild_tokenize(model, text.data(), text.size(), add_special, parse_special, tokens.data(),
                             static_cast<int32_t>(tokens.size()));
  if (n > static_cast<int32_t>(tokens.size())) {
    tokens.resize(static_cast<size_t>(n));
    int32_t again = guild_tokenize(model, text.data(), text.size(), add_special, parse_special, tokens.data(), n);
    if (again != n) throw Napi::Error::New(env, "tokenize returned an inconsistent token count");
  }
  if (n < 0) throw Napi::Error::New(env, "tokenize failed: invalid arguments");
  Napi::Int32Array out = Napi::Int32Array::New(env, static_cast<size_t>(n));
  if (n > 0) std::memcpy(out.Data(), tokens.data(), static_cast<size_t>(n) * sizeof(int32_t));
  return out;
}

// tokenToPiece(token, renderSpecial) -> Buffer
Napi::Value AddonModel::TokenToPiece(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  guild_model* model = Handle(env)->model;
  int32_t n_vocab = guild_model_n_vocab(model);
  int32_t token = ArgInt32(info[0], "token", std::numeric_limits<int32_t>::min(), kInt32Max);
  if (token < 0 || token >= n_vocab) {
    throw Napi::RangeError::New(env, std::to_string(token) + " is not a token id (n_vocab " + std::to_string(n_vocab) + ")");
  }
  bool render_special = ArgBool(info[1], "renderSpecial", true);
  std::vector<char> buf(64);
  int32_t n = guild_token_to_piece(model, token, render_special, buf.data(), static_cast<int32_t>(buf.size()));
  if (n > static_cast<int32_t>(buf.size())) {
    buf.resize(static_cast<size_t>(n));
    n = guild_token_to_piece(model, token, render_special, buf.data(), n);
  }
  if (n < 0 || n > static_cast<int32_t>(buf.size())) {
    throw Napi::Error::New(env, "token_to_piece failed for token " + std::to_string(token));
  }
  return Napi::Buffer<char>::Copy(env, buf.data(), static_cast<size_t>(n));
}

// detokenize(tokens: Int32Array, removeSpecial, unparseSpecial) -> Buffer
Napi::Value AddonModel::Detokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  guild_model* model = Handle(env)->model;
  std::vector<int32_t> tokens = ArgTokens(info[0], "tokens", guild_model_n_vocab(model));
  bool remove_special = ArgBool(info[1], "removeSpecial", false);
  bool unparse_special = ArgBool(info[2], "unparseSpecial", true);
  if (tokens.empty()) return Napi::Buffer<char>::New(env, 0);
  if (tokens.size() > static_cast<size_t>(kInt32Max)) throw Napi::RangeError::New(env, "too many tokens");
  size_t len = 0;
  char* text = guild_detokenize(model, tokens.data(), static_cast<int32_t>(tokens.size()), remove_special,
                                unparse_special, &len);
  if (text == nullptr) throw Napi::Error::New(env, "detokenize failed");
  Napi::Buffer<char> out = Napi::Buffer<char>::Copy(env, text, len);
  guild_string_free(text);
  return out;
}

// createSession(contextSize) -> Promise<Session>
Napi::Value AddonModel::CreateSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ModelPtr& model = Handle(env);
  int32_t n_ctx = info[0].IsUndefined() ? 0 : ArgInt32(info[0], "contextSize", 0, kInt32Max);
  auto* worker = new CreateSessionWorker(env, model, n_ctx);
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

Napi::Value AddonModel::Dispose(const Napi::CallbackInfo& info) {
  handle_.reset();  // sessions and running workers keep the native model until they end
  return info.Env().Undefined();
}

// ---- loadModel -----------------------------------------------------------------------

// The model path argument of loadModel / checkModel: a non-empty string without NUL.
static std::string ModelPathArg(Napi::Env env, const Napi::Value& value) {
  std::string path = ArgString(value, "path");
  if (path.empty()) throw Napi::TypeError::New(env, "path must not be empty");
  if (path.find('\0') != std::string::npos) throw Napi::TypeError::New(env, "path must not contain NUL");
  return path;
}

Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = ModelPathArg(env, info[0]);
  Napi::Object options = ArgOptions(info[1], "options");
  auto* worker = new LoadModelWorker(env, path);
  try {
    worker->Configure(options, info[2], info[3]);
  } catch (...) {
    delete worker;  // never queued
    throw;
  }
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// ---- checkModel ----------------------------------------------------------------------

Napi::Value CheckModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string path = ModelPathArg(env, info[0]);
  Napi::Object options = ArgOptions(info[1], "options");
  auto* worker = new CheckModelWorker(env, path);
  try {
    worker->Configure(options);
  } catch (...) {
    delete worker;  // never queued
    throw;
  }
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace guild_addon
