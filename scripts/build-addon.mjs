#!/usr/bin/env node
// Builds the native addon (build/Release/guild_addon.node) with cmake-js:
// Release, Ninja, ccache when installed (the top-level CMakeLists picks it up),
// Node-API headers from the node-api-headers package (package.json's
// "binary.napi_versions" tells cmake-js so), so nothing is downloaded.
// Runs as the package's `install` script, i.e. during `npm ci`. The cuda
// kernel package is built next to the CPU ones when nvcc is found (GUILD_CUDA=1
// requires it, GUILD_CUDA=0 skips it), for GUILD_CUDA_ARCHS (default "80;90").
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cmakeJs = path.join(root, "node_modules", "cmake-js", "bin", "cmake-js");

if (process.env.GUILD_SKIP_ADDON_BUILD === "1") {
  console.log("guild: GUILD_SKIP_ADDON_BUILD=1, not building the native addon");
  process.exit(0);
}

// `configure` first so the -D options below apply to an existing build folder
// too (cmake-js `build` alone reuses the cached configuration).
const cmakeJsArgs = (command) => [
  cmakeJs,
  command,
  "--directory", root,
  "--out", path.join(root, "build"),
  "--config", "Release",
  "--generator", "Ninja",
  "--parallel", String(availableParallelism()),
  "--target", "guild_addon",
  "--CDGUILD_BUILD_TESTS=OFF",
  "--CDGUILD_BUILD_TOOLS=OFF",
  // The GPU package (docs/CUDA.md): AUTO = when CMake finds nvcc. GUILD_CUDA_ARCHS picks the
  // compute capabilities (default "80;90": A100 and H100/H200; CI builds "90" only).
  `--CDGUILD_CUDA=${process.env.GUILD_CUDA === "1" ? "ON" : process.env.GUILD_CUDA === "0" ? "OFF" : "AUTO"}`,
  `--CDGUILD_CUDA_ARCHS=${process.env.GUILD_CUDA_ARCHS ?? "80;90"}`,
];
for (const command of ["configure", "build"]) {
  const result = spawnSync(process.execPath, cmakeJsArgs(command), { cwd: root, stdio: "inherit" });
  if (result.error) {
    console.error(`guild: cannot run cmake-js: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0) process.exit(result.status ?? 1);
}
