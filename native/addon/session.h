// The JS `Session` object: one guild_session (KV cache + history) and the
// workers that generate from it and evaluate logits with it.
#pragma once

#include <napi.h>

#include "common.h"

namespace guild_addon {

class AddonSession : public Napi::ObjectWrap<AddonSession> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, SessionPtr handle);

  explicit AddonSession(const Napi::CallbackInfo& info);

 private:
  const SessionPtr& Handle(Napi::Env env) const;

  // generate(prompt: Int32Array, options (sampling, maxNewTokens, onQueue(position)),
  //          onTokens(ids: Int32Array, pieces: Buffer[]), signal?)
  //   -> Promise<{stopReason, nPrompt, nReused, nGenerated, promptMs, decodeMs, ttftMs,
  //               queueMs, nDrafted, nAccepted}>
  Napi::Value Generate(const Napi::CallbackInfo& info);
  // eval(tokens: Int32Array, allRows: boolean) -> Promise<Float32Array>
  Napi::Value Eval(const Napi::CallbackInfo& info);
  Napi::Value Reset(const Napi::CallbackInfo& info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value GetDisposed(const Napi::CallbackInfo& info);
  Napi::Value GetBusy(const Napi::CallbackInfo& info);

  SessionPtr handle_;
};

}  // namespace guild_addon
