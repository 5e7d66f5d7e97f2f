#include "packages/runtime_location.h"

#include <dlfcn.h>

namespace guild::packages {
namespace fs = std::filesystem;

fs::path runtime_binary_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&runtime_binary_path), &info) != 0 && info.dli_fname && *info.dli_fname) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(info.dli_fname, ec), ec);
    if (!ec && fs::is_regular_file(p, ec)) return p;
  }
  // dladdr names the main program by argv[0], which may not resolve: ask the kernel.
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

}  // namespace guild::packages
