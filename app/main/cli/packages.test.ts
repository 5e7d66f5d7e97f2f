// guild packages: list/pack/install/enable/disable/uninstall through the CLI,
// its exit codes and one-line errors, and the done-when checks: on a fresh
// user folder `list` shows the bundled packages; with GUILD_PACKAGES_DIR set,
// disabling cpu-avx2 makes the next `guild run` load cpu-generic and the
// greedy output is unchanged; with no usable CPU package `guild run
// --packages-dir DIR` fails in one line naming DIR. A package whose library
// crashes, exits or hangs while checked fails `install` in one line (the CLI
// neither dies nor hangs); a corrupt state file fails `list` in one line
// naming it until `reset-state` sets it aside.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { errorLines, runCli } from "../../test/cli.js";
import { haveFixtures, modelPath } from "../../test/fixtures.js";
import { stagingLeftovers, testPackageLibsSkipReason, writeTestArchive } from "../../test/test-package-libs.js";
import { embeddedModelPath, projectRoot } from "../paths.js";
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
  bundledDir: string | null;
  packages: {
    name: string; version: string | null; source: string; enabled: boolean; compatible: boolean; reason: string | null; pinnedBy: string[];
  }[];
}

// One user folder on its own: no bundled packages (docs/PACKAGES.md). The
// tests of the bundled layer pass `asAUser` and find them as a user would
// (an undefined value leaves the variable out of the CLI's environment).
const isolated: NodeJS.ProcessEnv = { GUILD_BUNDLED_PACKAGES_DIR: "" };
const asAUser: NodeJS.ProcessEnv = { GUILD_BUNDLED_PACKAGES_DIR: undefined };

function ok(args: string[], env: NodeJS.ProcessEnv = isolated): string {
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
    expect(text).toMatch(/cpu-generic\s+1\.0\.0\s+user\s+enabled\s+compatible/);
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
    expect(ok(["list"], { ...isolated, GUILD_PACKAGES_DIR: dir })).toMatch(new RegExp(`no kernel packages in ${dir}`));
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
        { env: { ...isolated, GUILD_PACKAGES_DIR: dir } },
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

  it.skipIf(testPackageLibsSkipReason !== "")("install of a library that crashes, exits or hangs when checked fails in one line", () => {
    const dir = path.join(work, "probe");
    const cases: [string, RegExp][] = [
      ["test-query-segv", /the package library crashed while being checked \(SIGSEGV\)$/],
      ["test-ctor-exit", /the package library ended the check with exit status 7$/],
      ["test-ctor-loop", /the package library did not answer within 10 s while being checked \(stopped\)$/],
    ];
    for (const [name, message] of cases) {
      const archive = writeTestArchive(work, name);
      const started = Date.now();
      const r = runCli(["packages", "install", archive, "--packages-dir", dir], { env: isolated });
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(r.status).toBe(1);
      const lines = errorLines(r.stderr);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^guild: error: .*${name}\\.gkpkg: package ${name} 1\\.0\\.0 cannot be installed: lib${name}\\.so: `));
      expect(lines[0]).toMatch(message);
      expect(stagingLeftovers(dir)).toEqual([]);
    }
    expect((JSON.parse(ok(["list", "--json", "--packages-dir", dir])) as ListJson).packages).toEqual([]);
  });

  it("a corrupt state file fails list in one line naming it; reset-state sets it aside", () => {
    const dir = path.join(work, "state");
    const archive = path.join(work, "cpu-generic-state.gkpkg");
    ok(["pack", path.join(builtDir, "cpu-generic"), "--out", archive]);
    ok(["install", archive, "--packages-dir", dir]);
    ok(["disable", "cpu-generic", "--packages-dir", dir]);
    const stateFile = path.join(dir, "state.json");
    writeFileSync(stateFile, "{\"schema\": \"guild.packages-state/1\", \"packages\": {\"cpu-gen");
    for (const args of [["list"], ["enable", "cpu-generic"]]) {
      const r = runCli(["packages", ...args, "--packages-dir", dir], { env: isolated });
      expect(r.status).toBe(1);
      expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/reset-state`$/)]);
      expect(r.stderr).toContain(`guild: error: ${stateFile} is corrupt (`);
    }
    const reset = JSON.parse(ok(["reset-state", "--json", "--packages-dir", dir])) as { ok: boolean; action: string; movedTo: string };
    expect(reset).toMatchObject({ ok: true, action: "reset-state" });
    expect(reset.movedTo.startsWith(`${stateFile}.set-aside-`)).toBe(true);
    expect(readFileSync(reset.movedTo, "utf8")).toContain("cpu-gen");
    const list = JSON.parse(ok(["list", "--json", "--packages-dir", dir])) as ListJson;
    expect(list.packages.map((p) => [p.name, p.enabled])).toEqual([["cpu-generic", true]]);
    expect(ok(["reset-state", "--packages-dir", dir])).toBe(`no package state file in ${dir}; nothing to reset\n`);
  });

  it("a fresh user folder lists the bundled packages found next to the addon", () => {
    const dir = path.join(work, "fresh");
    const list = JSON.parse(ok(["list", "--json", "--packages-dir", dir], asAUser)) as ListJson;
    expect(list).toMatchObject({ dir, exists: false });
    expect(list.bundledDir).not.toBeNull();
    expect(list.packages.map((p) => p.name)).toEqual(expect.arrayContaining(["cpu-generic", "cpu-avx2"]));
    for (const p of list.packages) expect(p.source).toBe("bundled");
    expect(list.packages.find((p) => p.name === "cpu-avx2")!.compatible).toBe(hasAvx2);
    expect(existsSync(dir)).toBe(false); // listing creates nothing
    expect(ok(["list", "--packages-dir", dir], asAUser)).toMatch(/cpu-generic\s+1\.0\.0\s+bundled\s+enabled\s+compatible/);
    const r = runCli(["packages", "uninstall", "cpu-generic", "--packages-dir", dir], { env: asAUser });
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/^guild: error: cpu-generic is bundled .*disable it instead$/)]);
  });

  it("run --packages-dir: no usable CPU package fails in one line naming the folder; enabling one is enough", () => {
    const dir = path.join(work, "none-usable");
    const names = (JSON.parse(ok(["list", "--json", "--packages-dir", dir], asAUser)) as ListJson).packages.map((p) => p.name);
    for (const name of names) ok(["disable", name, "--packages-dir", dir], asAUser);
    const run = () => runCli(
      ["run", "--model", embeddedModelPath(), "--prompt-tokens", "1,2,3", "--n-predict", "2", "--temperature", "0", "--threads", "2", "--json", "--packages-dir", dir],
      { env: { ...asAUser, GUILD_PACKAGES_DIR: path.join(work, "not-this-one") } },
    );
    let r = run();
    expect(r.status).toBe(1);
    const lines = errorLines(r.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`no usable CPU kernel package in ${dir}`);
    expect(lines[0]).toMatch(/cpu-generic: disabled/);
    ok(["enable", "cpu-generic", "--packages-dir", dir], asAUser);
    r = run();
    expect(r.status, r.stderr).toBe(0);
    const profile = JSON.parse(r.stdout.split("\n")[0]!) as { profile?: { stages: { name: string; detail: Record<string, unknown> }[] } };
    const stage = profile.profile?.stages.find((s) => s.name === "packages");
    expect(stage?.detail["cpu_kernels"]).toBe("cpu-generic");
    expect(stage?.detail["dir"]).toBe(dir);
  });
});
