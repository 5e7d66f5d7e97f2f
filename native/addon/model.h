// The JS `Model` object: a loaded guild_model plus its tokenizer, and the
// workers that load a model, check whether one would load, and create
// sessions from it.
#pragma once

#include <napi.h>

#include "common.h"

namespace guild_addon {

class AddonModel : public Napi::ObjectWrap<AddonModel> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Object NewInstance(Napi::Env env, ModelPtr handle);

  explicit AddonModel(const Napi::CallbackInfo& info);

 private:
  // Throws "model is disposed" once dispose() has run.
  const ModelPtr& Handle(Napi::Env env) const;

  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Profile(const Napi::CallbackInfo& info);
  Napi::Value GetReady(const Napi::CallbackInfo& info);
  Napi::Value GetQueueLength(const Napi::CallbackInfo& info);
  Napi::Value GetVocabSize(const Napi::CallbackInfo& info);
  Napi::Value GetTrainContextSize(const Napi::CallbackInfo& info);
  Napi::Value GetBosToken(const Napi::CallbackInfo& info);
  Napi::Value GetEosToken(const Napi::CallbackInfo& info);
  Napi::Value GetDisposed(const Napi::CallbackInfo& info);
  Napi::Value IsEog(const Napi::CallbackInfo& info);
  Napi::Value ChatTemplate(const Napi::CallbackInfo& info);
  Napi::Value Tokenize(const Napi::CallbackInfo& info);
  Napi::Value TokenToPiece(const Napi::CallbackInfo& info);
  Napi::Value Detokenize(const Napi::CallbackInfo& info);
  Napi::Value CreateSession(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  ModelPtr handle_;
};

// loadModel(path, options?, onProgress?, signal?) -> Promise<Model>
//   options: {threads?, contextSize?, kvType?, packagesDir?, gpu?, ..., vocabOnly?};
//   vocabOnly opens the tokenizer only (no weights, no kernel packages); packagesDir is
//   the user's kernel packages directory (default $GUILD_PACKAGES_DIR, else
//   the user data dir); the bundled packages are searched too.
Napi::Value LoadModel(const Napi::CallbackInfo& info);

// checkModel(path, options?) -> Promise<string>: the pre-flight check
//   (guild_model_check) with loadModel's options; resolves with its JSON verdict
//   ("guild.load-check/1": ok, or the load's error and stage, plus the estimate).
Napi::Value CheckModel(const Napi::CallbackInfo& info);

}  // namespace guild_addon
