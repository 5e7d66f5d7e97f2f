#include "common.h"

#include <cmath>
#include <exception>
#include <limits>
#include <new>

namespace guild_addon {

std::string TakeString(char* s) {
  if (s == nullptr) return {};
  std::string out(s);
  guild_string_free(s);
  return out;
}

void SessionHandle::Cancel(const std::shared_ptr<std::atomic<bool>>& flag) {
  if (!flag) return;
  flag->store(true);
  std::lock_guard<std::mutex> lock(mu);
  if (in_generate && cancel_flag == flag) guild_session_cancel(session);
}

// ---- PromiseWorker ----------------------------------------------------------

PromiseWorker::PromiseWorker(Napi::Env env, const char* resource_name)
    : Napi::AsyncWorker(env, resource_name), deferred_(Napi::Promise::Deferred::New(env)) {}

void PromiseWorker::Fail(const std::string& message, guild_status status) {
  status_ = status;
  if (!message.empty()) {
    SetError(message);
  } else if (status != GUILD_OK) {
    SetError(std::string("native operation failed (") + guild_status_name(status) + ")");
  } else {
    SetError("native operation failed");
  }
}

void PromiseWorker::Execute() {
  try {
    Run();
  } catch (const std::bad_alloc&) {
    Fail("out of memory", GUILD_ERR_OUT_OF_MEMORY);
  } catch (const std::exception& e) {
    Fail(e.what(), GUILD_ERR_INTERNAL);
  } catch (...) {
    Fail("unknown native error", GUILD_ERR_INTERNAL);
  }
}

void PromiseWorker::Reject(Napi::Env env, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  if (status_ != GUILD_OK) error.Set("code", Napi::String::New(env, guild_status_name(status_)));
  deferred_.Reject(error.Value());
}

void PromiseWorker::OnOK() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  try {
    Finish(env);
    deferred_.Resolve(Result(env));
  } catch (const Napi::Error& e) {
    deferred_.Reject(e.Value());
  } catch (const std::exception& e) {
    Reject(env, e.what());
  }
}

void PromiseWorker::OnError(const Napi::Error& error) {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  std::string message = error.Message();
  try {
    Finish(env);
  } catch (...) {
    // Cleanup problems must not hide the operation's own error.
  }
  Reject(env, message);
}

// ---- per-environment data ------------------------------------------------------

AddonData& GetAddonData(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

bool IsConstructToken(Napi::Env env, const Napi::Value& value) {
  AddonData& data = GetAddonData(env);
  return !data.construct_token.IsEmpty() && value.StrictEquals(data.construct_token.Value());
}

// ---- argument helpers --------------------------------------------------------------

std::string ArgString(const Napi::Value& v, const char* what) {
  if (!v.IsString()) throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

bool ArgBool(const Napi::Value& v, const char* what, bool fallback) {
  if (v.IsUndefined()) return fallback;
  if (!v.IsBoolean()) throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

double ArgNumber(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d)) throw Napi::RangeError::New(v.Env(), std::string(what) + " must be finite");
  return d;
}

int32_t ArgInt32(const Napi::Value& v, const char* what, int32_t min, int32_t max) {
  double d = ArgNumber(v, what);
  if (std::floor(d) != d) throw Napi::RangeError::New(v.Env(), std::string(what) + " must be an integer");
  if (d < min || d > max) {
    throw Napi::RangeError::New(v.Env(), std::string(what) + " must be in [" + std::to_string(min) + ", " +
                                             std::to_string(max) + "]");
  }
  return static_cast<int32_t>(d);
}

std::vector<int32_t> ArgTokens(const Napi::Value& v, const char* what, int32_t n_vocab) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throw Napi::TypeError::New(v.Env(), std::string(what) + " must be an Int32Array");
  }
  Napi::Int32Array arr = v.As<Napi::Int32Array>();
  std::vector<int32_t> out(arr.Data(), arr.Data() + arr.ElementLength());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0 || out[i] >= n_vocab) {
      throw Napi::RangeError::New(v.Env(), std::string(what) + "[" + std::to_string(i) + "] = " +
                                               std::to_string(out[i]) + " is not a token id (n_vocab " +
                                               std::to_string(n_vocab) + ")");
    }
  }
  return out;
}

Napi::Object ArgOptions(const Napi::Value& v, const char* what) {
  if (v.IsUndefined() || v.IsNull()) return Napi::Object::New(v.Env());
  if (!v.IsObject()) throw Napi::TypeError::New(v.Env(), std::string(what) + " must be an object");
  return v.As<Napi::Object>();
}

Napi::Value OptionField(const Napi::Value& options, const char* name) {
  if (!options.IsObject()) return options.Env().Undefined();
  return options.As<Napi::Object>().Get(name);
}

}  // namespace guild_addon
