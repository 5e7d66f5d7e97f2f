// The identity fields every kernel package reports in its provider info
// (docs/PACKAGES.md): struct size, ABI version, and the name, version and
// description its build sets (GUILD_PROVIDER_NAME / _VERSION / _DESCRIPTION).
#pragma once
#include "packages/provider_abi.h"

#if !defined(GUILD_PROVIDER_NAME) || !defined(GUILD_PROVIDER_VERSION)
#error "GUILD_PROVIDER_NAME and GUILD_PROVIDER_VERSION must be defined"
#endif

namespace guild::packages {

inline guild_kernel_provider_info provider_identity() {
  guild_kernel_provider_info info{};
  info.struct_size = sizeof(guild_kernel_provider_info);
  info.abi_version = GUILD_KERNEL_PROVIDER_ABI_VERSION;
  info.name = GUILD_PROVIDER_NAME;
  info.version = GUILD_PROVIDER_VERSION;
  info.description = GUILD_PROVIDER_DESCRIPTION;
  return info;
}

}  // namespace guild::packages
