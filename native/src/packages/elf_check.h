// Install-time sanity of a package library, from its bytes only (nothing is
// loaded or run): an ELF shared object for the machine this runtime runs on
// that, where it has a dynamic symbol table, defines both provider symbols.
// docs/PACKAGES.md, "Install checks".
#pragma once
#include <string>
#include <string_view>

namespace guild::packages {

// "" when the bytes pass; else one line that says why not, e.g. "cannot be
// opened as a shared library: not an ELF file" or "not a Guild kernel
// provider (missing guild_kernel_provider_query)".
std::string elf_library_problem(std::string_view bytes);

}  // namespace guild::packages
