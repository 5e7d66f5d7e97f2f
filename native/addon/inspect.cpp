#include "inspect.h"

#include <utility>

#include "common.h"

namespace guild_addon {
namespace {

class InspectWorker : public PromiseWorker {
 public:
  InspectWorker(Napi::Env env, std::string path) : PromiseWorker(env, "guild:inspect"), path_(std::move(path)) {}

 protected:
  void Run() override {
    char* error = nullptr;
    char* json = guild_inspect_json(path_.c_str(), &error);
    std::string message = TakeString(error);
    if (json == nullptr) {
      Fail(message.empty() ? path_ + ": cannot inspect the file" : message);
      return;
    }
    json_ = TakeString(json);
  }

  Napi::Value Result(Napi::Env env) override { return Napi::String::New(env, json_); }

 private:
  std::string path_;
  std::string json_;
};

}  // namespace

Napi::Value Inspect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string path = ArgString(info[0], "path");
  if (path.empty()) throw Napi::TypeError::New(env, "path must not be empty");
  if (path.find('\0') != std::string::npos) throw Napi::TypeError::New(env, "path must not contain NUL");
  auto* worker = new InspectWorker(env, std::move(path));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace guild_addon
