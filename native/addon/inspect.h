// inspect(path) -> Promise<string>: guild_inspect_json on a pool thread.
#pragma once

#include <napi.h>

namespace guild_addon {

Napi::Value Inspect(const Napi::CallbackInfo& info);

}  // namespace guild_addon
