// guild packages: list/pack/install/enable/disable/uninstall through the CLI,
// its exit codes and one-line errors, and the done-when check: with
// GUILD_PACKAGES_DIR set, disabling cpu-avx2 makes the next `guild run` load
// cpu-generic and the greedy output is unchanged.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { errorLines, runCli } from "../../test/cli.js";
import { haveFixtures, modelPath } from "../../test/fixtures.js";
import { projectRoot } from "../paths.js";
import { loadNative } from "../runtime/native.js";

const builtDir = process.env["GUILD_BUILT_PACKAGES"] ?? path.join(projectRoot(), "build", "packages");
const hasPackages = existsSync(path.join(builtDir, "cpu-generic", "cpu-generic.gkmetadata"));
const addonHasPackages = (() => {
  try {
    return typeof (loadNative() as unknown as { packagesList?: unknown }).packagesList === "function";
  } catch {
    return false;
  }
})();
const skip = !hasPackages || !addonHasPackages;
const cpuFlags = existsSync("/proc/cpuinfo") ? readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m)?.[1]?.trim().split(/\s+/) ?? [] : [];
const hasAvx2 = ["avx2", "fma", "f16c"].every((f) => cpuFlags.includes(f));

const work = mkdtempSync(path.join(tmpdir(), "guild-pkg-cli-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface ListJson {
  dir: string;
  exists: boolean;
  packages: { name: string; version: string | null; enabled: boolean; compatible: boolean; reason: string | null; pinnedBy: string[] }[];
}

function ok(args: string[], env: NodeJS.ProcessEnv = {}): string {
  const r = runCli(["packages", ...args], { env });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return r.stdout;
}

describe.skipIf(skip)("guild packages", () => {
  it("list --json shows the built-in packages with this machine's compatibility", () => {
    const list = JSON.parse(ok(["list", "--json", "--packages-dir", builtDir])) as ListJson;
    expect(list.exists).toBe(true);
    const names = list.packages.map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(["cpu-generic", "cpu-avx2"]));
    const generic = list.packages.find((p) => p.name === "cpu-generic")!;
    expect(generic).toMatchObject({ version: "1.0.0", enabled: true, compatible: true, reason: null, pinnedBy: [] });
    expect(list.packages.find((p) => p.name === "cpu-avx2")!.compatible).toBe(hasAvx2);
    const text = ok(["list", "--packages-dir", builtDir]);
    expect(text).toMatch(/cpu-generic\s+1\.0\.0\s+enabled\s+compatible/);
  });

  it("pack → install → disable → enable → uninstall", () => {
    const dir = path.join(work, "cycle");
    const archive = path.join(work, "cpu-generic.gkpkg");
    expect(ok(["pack", path.join(builtDir, "cpu-generic"), "--out", archive])).toMatch(/^packed /);
    expect(JSON.parse(ok(["install", archive, "--packages-dir", dir, "--json"]))).toMatchObject({ ok: true, action: "install", name: "cpu-generic" });
    expect(ok(["disable", "cpu-generic", "--packages-dir", dir])).toBe(`disabled cpu-generic in ${dir}\n`);
    let list = JSON.parse(ok(["list", "--json", "--packages-dir", dir])) as ListJson;
    expect(list.packages.map((p) => [p.name, p.enabled])).toEqual([["cpu-generic", false]]);
    ok(["enable", "cpu-generic", "--packages-dir", dir]);
    ok(["uninstall", "cpu-generic", "--packages-dir", dir]);
    list = JSON.parse(ok(["list", "--json", "--packages-dir", dir])) as ListJson;
    expect(list.packages).toEqual([]);
    // GUILD_PACKAGES_DIR is the default directory.
    expect(ok(["list"], { GUILD_PACKAGES_DIR: dir })).toMatch(new RegExp(`no kernel packages in ${dir}`));
  });

  it("fails with one clear line: unknown package, corrupt archive, bad usage", () => {
    const dir = path.join(work, "errors");
    let r = runCli(["packages", "disable", "cpu-nope", "--packages-dir", dir]);
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/^guild: error: no package cpu-nope/)]);
    const junk = path.join(work, "junk.gkpkg");
    writeFileSync(junk, "GUILDPKG but not really");
    r = runCli(["packages", "install", junk, "--packages-dir", dir]);
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/^guild: error: .*junk\.gkpkg: (not a \.gkpkg|corrupt)/)]);
    r = runCli(["packages", "frobnicate"]);
    expect(r.status).toBe(2);
    r = runCli(["packages", "enable"]);
    expect(r.status).toBe(2);
    r = runCli(["packages", "pack", builtDir]);
    expect(r.status).toBe(2);
  });

  it.skipIf(!haveFixtures || !hasAvx2)("disabling cpu-avx2 makes the next run use cpu-generic with unchanged output", () => {
    const dir = path.join(work, "run");
    for (const name of ["cpu-generic", "cpu-avx2"]) {
      const archive = path.join(work, `${name}-run.gkpkg`);
      ok(["pack", path.join(builtDir, name), "--out", archive]);
      ok(["install", archive, "--packages-dir", dir]);
    }
    const run = (): number[] => {
      const r = runCli(
        ["run", "--model", modelPath("qwen3moe-a-Q8_0.gguf"), "--prompt-tokens", "2501,872,198,1639,266,374,279,2062", "--n-predict", "12", "--temperature", "0", "--threads", "2", "--json"],
        { env: { GUILD_PACKAGES_DIR: dir } },
      );
      expect(r.status).toBe(0);
      const done = r.stdout.split("\n").filter((l) => l.includes('"event":"done"'))[0]!;
      return (JSON.parse(done) as { tokens: number[] }).tokens;
    };
    const withAvx2 = run();
    ok(["disable", "cpu-avx2", "--packages-dir", dir]);
    const withGeneric = run();
    expect(withAvx2.length).toBe(12);
    expect(withGeneric).toEqual(withAvx2);
  });
});
