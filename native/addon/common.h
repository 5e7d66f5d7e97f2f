// Shared pieces of the addon: owned native handles, the promise-returning
// worker base, argument validation, and per-environment class constructors.
#pragma once

#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "guild/guild.h"

namespace guild_addon {

// Takes ownership of a library-allocated string (null becomes "").
std::string TakeString(char* s);

// A loaded model. Shared by the JS Model object, every session made from it and
// every worker that uses it, so guild_model_free runs after the last user.
struct ModelHandle {
  explicit ModelHandle(guild_model* m) : model(m) {}
  ~ModelHandle() {
    if (model != nullptr) guild_model_free(model);
  }
  ModelHandle(const ModelHandle&) = delete;
  ModelHandle& operator=(const ModelHandle&) = delete;

  guild_model* const model;
};
using ModelPtr = std::shared_ptr<ModelHandle>;

// A session plus the state that makes cancellation safe: `busy` allows one
// operation at a time; `cancel_flag` belongs to the running generation (null
// when none); `in_generate` is true only while guild_generate runs, so that
// guild_session_cancel never reaches a later generation.
struct SessionHandle {
  SessionHandle(ModelPtr m, guild_session* s) : model(std::move(m)), session(s) {}
  ~SessionHandle() {
    if (session != nullptr) guild_session_free(session);  // before `model` is released
  }
  SessionHandle(const SessionHandle&) = delete;
  SessionHandle& operator=(const SessionHandle&) = delete;

  const ModelPtr model;
  guild_session* const session;

  std::mutex mu;
  bool busy = false;
  bool in_generate = false;
  std::shared_ptr<std::atomic<bool>> cancel_flag;

  // Thread-safe: cancels the generation that owns `flag`, if it is still running.
  void Cancel(const std::shared_ptr<std::atomic<bool>>& flag);
};
using SessionPtr = std::shared_ptr<SessionHandle>;

// Base for every worker: holds the promise, runs Run() on a pool thread with
// every exception turned into a rejection, and rejects with an Error whose
// `code` is the guild_status name when one is known.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, const char* resource_name);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  virtual void Run() = 0;
  // Builds the resolution value on the JS thread.
  virtual Napi::Value Result(Napi::Env env) = 0;
  // JS-thread cleanup that runs before the promise settles (either way).
  virtual void Finish(Napi::Env env) {}

  // Rejects with `message`; `status` (when not GUILD_OK) becomes the error's `code`.
  void Fail(const std::string& message, guild_status status = GUILD_OK);

 private:
  void Execute() final;
  void OnOK() final;
  void OnError(const Napi::Error& error) final;
  void Reject(Napi::Env env, const std::string& message);

  Napi::Promise::Deferred deferred_;
  guild_status status_ = GUILD_OK;
};

// Per-environment data (Electron can create several environments).
struct AddonData {
  Napi::FunctionReference model_constructor;
  Napi::FunctionReference session_constructor;
  Napi::Reference<Napi::Value> construct_token;  // only native code can make Model/Session
};
AddonData& GetAddonData(Napi::Env env);
bool IsConstructToken(Napi::Env env, const Napi::Value& value);

// Argument helpers: each throws a TypeError/RangeError naming `what`.
std::string ArgString(const Napi::Value& v, const char* what);
bool ArgBool(const Napi::Value& v, const char* what, bool fallback);
int32_t ArgInt32(const Napi::Value& v, const char* what, int32_t min, int32_t max);
double ArgNumber(const Napi::Value& v, const char* what);
// Copies an Int32Array's ids, checking each is in [0, n_vocab).
std::vector<int32_t> ArgTokens(const Napi::Value& v, const char* what, int32_t n_vocab);
// Reads an optional option field (undefined when missing); `options` may be undefined.
Napi::Value OptionField(const Napi::Value& options, const char* name);
Napi::Object ArgOptions(const Napi::Value& v, const char* what);

}  // namespace guild_addon
