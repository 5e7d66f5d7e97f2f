// Module entry point: registers the Model and Session classes and the free
// functions. Everything here is Node-API only (no V8/libuv headers), so the same
// binary loads in Node and in Electron's main process.
#include <napi.h>

#include "common.h"
#include "inspect.h"
#include "model.h"
#include "packages.h"
#include "session.h"

namespace guild_addon {

Napi::Object Init(Napi::Env env, Napi::Object exports);

namespace {

Napi::Value AbiVersion(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), guild_abi_version());
}

// leases() -> JSON string: which holder pins which kernel provider.
Napi::Value Leases(const Napi::CallbackInfo& info) {
  char* json = guild_leases_json();
  if (json == nullptr) throw Napi::Error::New(info.Env(), "guild_leases_json failed");
  return Napi::String::New(info.Env(), TakeString(json));
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* data = new AddonData();
  env.SetInstanceData<AddonData>(data);  // deleted with the environment
  data->construct_token = Napi::Persistent(static_cast<Napi::Value>(Napi::Object::New(env)));

  Napi::Function model = AddonModel::Define(env);
  Napi::Function session = AddonSession::Define(env);
  data->model_constructor = Napi::Persistent(model);
  data->session_constructor = Napi::Persistent(session);

  exports.Set("Model", model);
  exports.Set("Session", session);
  exports.Set("loadModel", Napi::Function::New<LoadModel>(env, "loadModel"));
  exports.Set("checkModel", Napi::Function::New<CheckModel>(env, "checkModel"));
  exports.Set("inspect", Napi::Function::New<Inspect>(env, "inspect"));
  exports.Set("abiVersion", Napi::Function::New<AbiVersion>(env, "abiVersion"));
  exports.Set("leases", Napi::Function::New<Leases>(env, "leases"));
  exports.Set("compiledAbiVersion", Napi::Number::New(env, GUILD_ABI_VERSION));
  RegisterPackages(env, exports);
  return exports;
}

}  // namespace guild_addon

static Napi::Object InitGuildAddon(Napi::Env env, Napi::Object exports) { return guild_addon::Init(env, exports); }

NODE_API_MODULE(guild_addon, InitGuildAddon)
