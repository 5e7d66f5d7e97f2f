// Where the binary that holds this runtime is (the addon, libguild or an
// executable): the bundled packages and the package probe are found next to
// it (docs/PACKAGES.md, "Where packages are found").
#pragma once
#include <filesystem>

namespace guild::packages {

// The file of the binary this code is linked into, or an empty path when it
// cannot be told.
std::filesystem::path runtime_binary_path();

}  // namespace guild::packages
