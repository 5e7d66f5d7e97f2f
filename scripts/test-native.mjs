#!/usr/bin/env node
// The native test suite: configure + build build/native-tests (Release, Ninja,
// ccache when installed) and run ctest. Extra CMake definitions can be passed
// through GUILD_NATIVE_TEST_CMAKE_ARGS (space-separated), the build folder
// through GUILD_NATIVE_TEST_DIR.
import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = path.resolve(root, process.env.GUILD_NATIVE_TEST_DIR ?? "build/native-tests");
const jobs = String(availableParallelism());
const extra = (process.env.GUILD_NATIVE_TEST_CMAKE_ARGS ?? "").split(/\s+/).filter(Boolean);

function step(cmd, args) {
  console.log(`+ ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.error) {
    console.error(`guild: cannot run ${cmd}: ${r.error.message}`);
    process.exit(1);
  }
  if (r.status !== 0) process.exit(r.status ?? 1);
}

step("cmake", ["-S", root, "-B", dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGUILD_BUILD_TESTS=ON", ...extra]);
step("cmake", ["--build", dir, "--parallel", jobs]);
step("ctest", ["--test-dir", dir, "--output-on-failure", "--parallel", jobs]);
