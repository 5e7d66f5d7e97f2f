#!/usr/bin/env node
// The native test suite: configure + build build/native-tests (Release, Ninja,
// ccache when installed) and run ctest. Extra CMake definitions can be passed
// through GUILD_NATIVE_TEST_CMAKE_ARGS (space-separated), the build folder
// through GUILD_NATIVE_TEST_DIR.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
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

// ctest shows no output for skipped tests: print each one's reason (the
// "SKIPPED: ..." line it wrote, e.g. the GPU tests on a machine without a GPU).
const log = path.join(dir, "Testing", "Temporary", "LastTest.log");
if (existsSync(log)) {
  let current = "";
  for (const line of readFileSync(log, "utf8").split("\n")) {
    const testing = /^\d+\/\d+ Testing: (\S+)/.exec(line);
    if (testing) current = testing[1];
    else if (line.startsWith("SKIPPED:")) console.log(`skipped ${current}: ${line.slice("SKIPPED:".length).trim()}`);
  }
}
