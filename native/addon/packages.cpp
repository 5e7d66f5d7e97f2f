#include "packages.h"

#include <functional>
#include <string>
#include <utility>

#include "common.h"

namespace guild_addon {
namespace {

struct OpResult {
  guild_status status = GUILD_OK;
  std::string error;
  std::string name;
  std::string path;  // reset-state: where the state file was set aside
  std::string json;
  bool is_list = false;
};

// Runs one package operation on a pool thread; resolves with its result.
class PackageWorker : public PromiseWorker {
 public:
  PackageWorker(Napi::Env env, std::function<OpResult()> op)
      : PromiseWorker(env, "guild:packages"), op_(std::move(op)) {}

 protected:
  void Run() override { result_ = op_(); }
  Napi::Value Result(Napi::Env env) override {
    if (result_.is_list) return Napi::String::New(env, result_.json);
    Napi::Object o = Napi::Object::New(env);
    o.Set("status", guild_status_name(result_.status));
    if (result_.status != GUILD_OK) o.Set("error", result_.error.empty() ? std::string(guild_status_name(result_.status)) : result_.error);
    if (!result_.name.empty()) o.Set("name", result_.name);
    if (!result_.path.empty()) o.Set("path", result_.path);
    return o;
  }

 private:
  std::function<OpResult()> op_;
  OpResult result_;
};

std::string CheckedString(const Napi::Value& v, const char* what, bool allow_empty) {
  std::string s = ArgString(v, what);
  if (!allow_empty && s.empty()) throw Napi::TypeError::New(v.Env(), std::string(what) + " must not be empty");
  if (s.find('\0') != std::string::npos) throw Napi::TypeError::New(v.Env(), std::string(what) + " must not contain NUL");
  return s;
}

// dir argument: undefined/null = the default directory.
std::string DirArg(const Napi::Value& v) {
  if (v.IsUndefined() || v.IsNull()) return "";
  return CheckedString(v, "dir", true);
}

Napi::Value Queue(Napi::Env env, std::function<OpResult()> op) {
  auto* w = new PackageWorker(env, std::move(op));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

const char* DirPtr(const std::string& dir) { return dir.empty() ? nullptr : dir.c_str(); }

OpResult FromStatus(guild_status st, char* error) {
  OpResult r;
  r.status = st;
  r.error = TakeString(error);
  return r;
}

Napi::Value DefaultDir(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), TakeString(guild_packages_default_dir()));
}

Napi::Value List(const Napi::CallbackInfo& info) {
  std::string dir = DirArg(info[0]);
  return Queue(info.Env(), [dir]() {
    OpResult r;
    r.is_list = true;
    char* json = guild_packages_list_json(DirPtr(dir));
    r.json = json ? TakeString(json) : "{\"schema\":\"guild.packages-list/1\",\"packages\":[]}";
    return r;
  });
}

using NameOp = guild_status (*)(const char*, const char*, char**);

template <NameOp Fn>
Napi::Value ByName(const Napi::CallbackInfo& info) {
  std::string dir = DirArg(info[0]);
  std::string name = CheckedString(info[1], "name", false);
  return Queue(info.Env(), [dir, name]() {
    char* error = nullptr;
    const guild_status st = Fn(DirPtr(dir), name.c_str(), &error);
    return FromStatus(st, error);
  });
}

Napi::Value Install(const Napi::CallbackInfo& info) {
  std::string dir = DirArg(info[0]);
  std::string file = CheckedString(info[1], "file", false);
  return Queue(info.Env(), [dir, file]() {
    char* error = nullptr;
    char* name = nullptr;
    const guild_status st = guild_package_install(DirPtr(dir), file.c_str(), &name, &error);
    OpResult r = FromStatus(st, error);
    r.name = TakeString(name);
    return r;
  });
}

Napi::Value Pin(const Napi::CallbackInfo& info) {
  std::string dir = DirArg(info[0]);
  std::string model = CheckedString(info[1], "model", false);
  std::string name = CheckedString(info[2], "name", false);
  std::string version = info[3].IsUndefined() || info[3].IsNull() ? "" : CheckedString(info[3], "version", true);
  return Queue(info.Env(), [dir, model, name, version]() {
    char* error = nullptr;
    const guild_status st = guild_package_pin(DirPtr(dir), model.c_str(), name.c_str(), version.c_str(), &error);
    return FromStatus(st, error);
  });
}

Napi::Value ResetState(const Napi::CallbackInfo& info) {
  std::string dir = DirArg(info[0]);
  return Queue(info.Env(), [dir]() {
    char* error = nullptr;
    char* moved_to = nullptr;
    const guild_status st = guild_packages_reset_state(DirPtr(dir), &moved_to, &error);
    OpResult r = FromStatus(st, error);
    r.path = TakeString(moved_to);
    return r;
  });
}

Napi::Value Pack(const Napi::CallbackInfo& info) {
  std::string pkg_dir = CheckedString(info[0], "packageDir", false);
  std::string out = CheckedString(info[1], "outFile", false);
  return Queue(info.Env(), [pkg_dir, out]() {
    char* error = nullptr;
    const guild_status st = guild_package_pack(pkg_dir.c_str(), out.c_str(), &error);
    return FromStatus(st, error);
  });
}

}  // namespace

void RegisterPackages(Napi::Env env, Napi::Object exports) {
  exports.Set("packagesDefaultDir", Napi::Function::New<DefaultDir>(env, "packagesDefaultDir"));
  exports.Set("packagesList", Napi::Function::New<List>(env, "packagesList"));
  exports.Set("packageEnable", Napi::Function::New<ByName<guild_package_enable>>(env, "packageEnable"));
  exports.Set("packageDisable", Napi::Function::New<ByName<guild_package_disable>>(env, "packageDisable"));
  exports.Set("packageUninstall", Napi::Function::New<ByName<guild_package_uninstall>>(env, "packageUninstall"));
  exports.Set("packageInstall", Napi::Function::New<Install>(env, "packageInstall"));
  exports.Set("packagePin", Napi::Function::New<Pin>(env, "packagePin"));
  exports.Set("packagePack", Napi::Function::New<Pack>(env, "packagePack"));
  exports.Set("packagesResetState", Napi::Function::New<ResetState>(env, "packagesResetState"));
}

}  // namespace guild_addon
