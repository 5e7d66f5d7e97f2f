#include "abort_signal.h"

#include <memory>
#include <utility>

namespace guild_addon {

void AbortListener::Attach(Napi::Value value, std::function<void()> on_abort) {
  Napi::Env env = value.Env();
  if (value.IsUndefined() || value.IsNull()) return;
  if (!value.IsObject()) throw Napi::TypeError::New(env, "signal must be an AbortSignal");
  Napi::Object signal = value.As<Napi::Object>();
  Napi::Value add = signal.Get("addEventListener");
  if (!add.IsFunction() || !signal.Get("removeEventListener").IsFunction()) {
    throw Napi::TypeError::New(env, "signal must be an AbortSignal");
  }
  if (signal.Get("aborted").ToBoolean().Value()) {
    on_abort();
    return;
  }
  auto callback = std::make_shared<std::function<void()>>(std::move(on_abort));
  Napi::Function listener = Napi::Function::New(
      env, [callback](const Napi::CallbackInfo&) { (*callback)(); }, "onGuildAbort");
  Napi::Object listen_options = Napi::Object::New(env);
  listen_options.Set("once", true);
  add.As<Napi::Function>().Call(signal, {Napi::String::New(env, "abort"), listener, listen_options});
  signal_ = Napi::Persistent(signal);
  listener_ = Napi::Persistent(listener);
}

void AbortListener::Detach() {
  if (signal_.IsEmpty() || listener_.IsEmpty()) return;
  Napi::Env env = signal_.Env();
  Napi::HandleScope scope(env);
  try {
    Napi::Object signal = signal_.Value();
    Napi::Value remove = signal.Get("removeEventListener");
    if (remove.IsFunction()) {
      remove.As<Napi::Function>().Call(signal, {Napi::String::New(env, "abort"), listener_.Value()});
    }
  } catch (const Napi::Error&) {
    // A signal whose removeEventListener throws only keeps a stale listener.
  }
  signal_.Reset();
  listener_.Reset();
}

}  // namespace guild_addon
