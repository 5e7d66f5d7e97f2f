// Kernel packages (docs/PACKAGES.md) for JS. Every operation resolves (never
// rejects for a package problem) with {status, error?, name?}; status is the
// guild_status name ("ok", "busy", "not_found", "format", "unsupported", ...).
//   packagesDefaultDir() -> string
//   packagesList(dir?) -> Promise<string>            (guild.packages-list/1 JSON)
//   packageEnable(dir?, name) / packageDisable(dir?, name) / packageUninstall(dir?, name)
//   packageInstall(dir?, file) -> Promise<{status, error?, name?}>
//   packagePin(dir?, model, name, version?) / packagePack(packageDir, outFile)
//   packagesResetState(dir?) -> Promise<{status, error?, path?}>  (path: where state.json was set aside)
#pragma once

#include <napi.h>

namespace guild_addon {

void RegisterPackages(Napi::Env env, Napi::Object exports);

}  // namespace guild_addon
