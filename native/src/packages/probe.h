// The install-time check of a package library's provider ABI, in a child
// process: guild-package-probe (tool/guild_package_probe.cpp) dlopens the
// library, calls query() and prints the facts as JSON; this side spawns it
// (posix_spawn: no fork of a threaded process), bounds its time and output,
// and turns its crash, exit, hang or garbage into one line. The library's code
// (its ELF constructors included) therefore never runs in the process that
// installs it. docs/PACKAGES.md, "Install checks".
#pragma once
#include <string>

#include "packages/provider_check.h"

namespace guild::packages {

inline constexpr const char* kProbeExecutableName = "guild-package-probe";
inline constexpr int kProbeTimeoutMs = 10000;
inline constexpr size_t kProbeMaxOutput = 64 * 1024;
// The answer's schema, the probe's first line of output.
inline constexpr const char* kProbeSchema = "guild.package-probe/1";

// The probe executable: $GUILD_PACKAGE_PROBE when set (an empty value means
// none, as in a runtime shipped without it), else guild-package-probe next to
// the binary holding the runtime (the packaged app: resources/native/, next to
// guild_addon.node; a build tree: next to build/Release/guild_addon.node),
// else the one of the build tree this runtime was compiled in (tests and
// tools). "" when there is none; *looked then says where it was looked for.
std::string package_probe_path(std::string* looked = nullptr);

// Runs `probe` on `library_path` (absolute). True and *facts when it
// answered; else false and *error, one line: "the package library crashed
// while being checked (SIGSEGV)", "… did not answer within 10 s", the
// probe's own answer ("not a Guild kernel provider (missing …)"), …
bool probe_library(const std::string& probe, const std::string& library_path, int timeout_ms, ProviderFacts* facts,
                   std::string* error);

}  // namespace guild::packages
