// Connects a JS AbortSignal to native cancellation: when the signal fires,
// `on_abort` runs on the JS thread (it sets an atomic flag that native loops poll).
#pragma once

#include <napi.h>

#include <functional>

namespace guild_addon {

class AbortListener {
 public:
  AbortListener() = default;
  AbortListener(const AbortListener&) = delete;
  AbortListener& operator=(const AbortListener&) = delete;

  // `signal` may be undefined/null (no-op). An already aborted signal calls
  // `on_abort` at once. Throws a TypeError for anything that is not AbortSignal-like.
  void Attach(Napi::Value signal, std::function<void()> on_abort);
  // Removes the listener (JS thread). Safe to call more than once.
  void Detach();

 private:
  Napi::ObjectReference signal_;
  Napi::FunctionReference listener_;
};

}  // namespace guild_addon
