// PackageService on the built-in kernel packages of a native build
// (GUILD_BUILT_PACKAGES, default build/packages): install → enable → disable
// → uninstall; a package leased by a loaded model or live session cannot be
// disabled (the error names the holder); bad archives are errors as values;
// disabling cpu-avx2 makes the next load use cpu-generic with the same output;
// the bundled packages (found next to the addon) are listed and can be
// disabled through the user's folder but not uninstalled. Install checks run
// a package's code only in a child process (a crashing or exiting library is
// an error value, this process never ran it); a corrupt state file or a
// .leases that is not a directory is an error, never "all enabled", and
// reset-state sets the file aside.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { runCli } from "../../test/cli.js";
import { fixturesSkipReason, haveFixtures, modelPath, readExpectedJson } from "../../test/fixtures.js";
import { constructorRanIn, stagingLeftovers, testPackageLibsSkipReason, writeTestArchive } from "../../test/test-package-libs.js";
import { projectRoot } from "../paths.js";
import { GuildModel } from "../runtime/model.js";
import { loadNative } from "../runtime/native.js";
import { PackageService } from "./package-service.js";

const builtDir = process.env["GUILD_BUILT_PACKAGES"] ?? path.join(projectRoot(), "build", "packages");
const hasPackages = existsSync(path.join(builtDir, "cpu-generic", "cpu-generic.gkmetadata"));
const addonHasPackages = (() => {
  try {
    return typeof (loadNative() as unknown as { packagesList?: unknown }).packagesList === "function";
  } catch {
    return false;
  }
})();
const skipReason = !hasPackages
  ? `built kernel packages not found in ${builtDir} (set GUILD_BUILT_PACKAGES)`
  : !addonHasPackages
    ? "the native addon has no kernel package support (rebuild it or set GUILD_ADDON_PATH)"
    : "";
if (skipReason) console.warn(`guild tests: skipping package tests: ${skipReason}`);

const cpuFlags = existsSync("/proc/cpuinfo") ? new Set(readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m)?.[1]?.trim().split(/\s+/) ?? []) : new Set<string>();
const hasAvx2 = cpuFlags.has("avx2") && cpuFlags.has("fma") && cpuFlags.has("f16c");

const work = mkdtempSync(path.join(tmpdir(), "guild-pkg-svc-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// Most tests here check one user folder on its own, so the runtime's bundled
// packages (docs/PACKAGES.md) are turned off while they run, for this process
// and the CLIs it starts (and restored after: a worker process may run other
// test files next); the bundled-layer test turns them back on.
const savedBundled = process.env["GUILD_BUNDLED_PACKAGES_DIR"];
beforeAll(() => {
  process.env["GUILD_BUNDLED_PACKAGES_DIR"] = "";
});
afterAll(() => {
  if (savedBundled === undefined) delete process.env["GUILD_BUNDLED_PACKAGES_DIR"];
  else process.env["GUILD_BUNDLED_PACKAGES_DIR"] = savedBundled;
});

/** Runs fn with the bundled packages found as a user would find them (next to the addon). */
async function withBundledPackages<T>(fn: () => Promise<T>): Promise<T> {
  delete process.env["GUILD_BUNDLED_PACKAGES_DIR"];
  try {
    return await fn();
  } finally {
    process.env["GUILD_BUNDLED_PACKAGES_DIR"] = "";
  }
}

/** A .gkpkg built by hand (docs/PACKAGES.md layout), so tests can craft bad ones. */
function makeArchive(manifest: string, library: Buffer): Buffer {
  const m = Buffer.from(manifest, "utf8");
  const header = Buffer.alloc(24);
  header.write("GUILDPKG", 0, "latin1");
  header.writeUInt32LE(1, 8);
  header.writeUInt32LE(m.length, 12);
  header.writeBigUInt64LE(BigInt(library.length), 16);
  const body = Buffer.concat([header, m, library]);
  return Buffer.concat([body, createHash("sha256").update(body).digest()]);
}

function builtManifest(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(builtDir, name, `${name}.gkmetadata`), "utf8")) as Record<string, unknown>;
}
function builtLibrary(name: string): Buffer {
  return readFileSync(path.join(builtDir, name, `lib${name}.so`));
}

describe.skipIf(skipReason !== "")("PackageService", () => {
  it("lists the built-in packages with the right compatibility for this machine", async () => {
    const list = await new PackageService({ dir: builtDir }).list();
    expect(list.ok).toBe(true);
    if (!list.ok) return;
    const byName = new Map(list.value.packages.map((p) => [p.name, p]));
    expect(byName.get("cpu-generic")?.compatible).toBe(true);
    expect(byName.get("cpu-avx2")?.compatible).toBe(hasAvx2);
    if (!hasAvx2) expect(byName.get("cpu-avx2")?.reason).toMatch(/which this CPU lacks/);
    const avx512 = byName.get("cpu-avx512");
    if (avx512 && !avx512.compatible) expect(avx512.reason).toMatch(/which this CPU lacks/);
  });

  it("install → enable → disable → uninstall", async () => {
    const svc = new PackageService({ dir: path.join(work, "cycle") });
    const archive = path.join(work, "cpu-generic.gkpkg");
    expect(await svc.pack(path.join(builtDir, "cpu-generic"), archive)).toEqual({ ok: true, value: undefined });
    expect(await svc.install(archive)).toEqual({ ok: true, value: "cpu-generic" });
    let list = await svc.list();
    expect(list.ok && list.value.packages.map((p) => [p.name, p.enabled, p.compatible])).toEqual([["cpu-generic", true, true]]);
    expect((await svc.disable("cpu-generic")).ok).toBe(true);
    list = await svc.list();
    expect(list.ok && list.value.packages[0]?.enabled).toBe(false);
    expect((await svc.enable("cpu-generic")).ok).toBe(true);
    expect((await svc.uninstall("cpu-generic")).ok).toBe(true);
    list = await svc.list();
    expect(list.ok && list.value.packages).toEqual([]);
    const missing = await svc.disable("cpu-generic");
    expect(missing).toMatchObject({ ok: false, code: "not_found" });
  });

  it("refuses bad archives with clear errors, as values", async () => {
    const svc = new PackageService({ dir: path.join(work, "bad") });
    const manifest = builtManifest("cpu-generic");
    const library = builtLibrary("cpu-generic");
    const write = (name: string, bytes: Buffer): string => {
      const file = path.join(work, name);
      writeFileSync(file, bytes);
      return file;
    };
    const good = makeArchive(JSON.stringify(manifest), library);

    const flipped = Buffer.from(good);
    flipped[flipped.length - 100]! ^= 0x5a;
    expect(await svc.install(write("flipped.gkpkg", flipped))).toMatchObject({ ok: false, code: "format", message: expect.stringMatching(/checksum mismatch/) });
    expect(await svc.install(write("junk.gkpkg", Buffer.from("not a package")))).toMatchObject({ ok: false, code: "format", message: expect.stringMatching(/not a \.gkpkg/) });
    expect(await svc.install(write("trunc.gkpkg", good.subarray(0, 1000)))).toMatchObject({ ok: false, code: "format" });

    const wrongSha = makeArchive(JSON.stringify({ ...manifest, sha256: "0".repeat(64) }), library);
    expect(await svc.install(write("sha.gkpkg", wrongSha))).toMatchObject({ ok: false, code: "format", message: expect.stringMatching(/checksum mismatch: library/) });

    const abi = makeArchive(JSON.stringify({ ...manifest, abi: 7 }), library);
    expect(await svc.install(write("abi.gkpkg", abi))).toMatchObject({ ok: false, code: "unsupported", message: expect.stringMatching(/ABI 7/) });

    // A CPU feature this CPU lacks, simulated through the manifest.
    const lacking = [["amx_tile", "amx_tile"], ["amx_int8", "amx_int8"], ["avx512bf16", "avx512_bf16"], ["avx512f", "avx512f"]].find(([, flag]) => !cpuFlags.has(flag!));
    if (lacking) {
      const req = makeArchive(JSON.stringify({ ...manifest, requires: { cpu_features: [lacking[0]] } }), library);
      expect(await svc.install(write("cpu.gkpkg", req))).toMatchObject({
        ok: false,
        code: "unsupported",
        message: expect.stringContaining(`requires CPU feature ${lacking[0]!}, which this CPU lacks`),
      });
    }

    const notElf = Buffer.from("definitely not an ELF file");
    const bad = makeArchive(JSON.stringify({ ...manifest, sha256: createHash("sha256").update(notElf).digest("hex") }), notElf);
    expect(await svc.install(write("notelf.gkpkg", bad))).toMatchObject({ ok: false, code: "unsupported", message: expect.stringMatching(/cannot be opened as a shared library/) });

    expect(await svc.install(path.join(work, "missing.gkpkg"))).toMatchObject({ ok: false, code: "io" });
    const list = await svc.list();
    expect(list.ok && list.value.packages).toEqual([]);
  });

  it("lists the bundled packages for a fresh user folder; they can be disabled there, not uninstalled", async () => {
    const dir = path.join(work, "fresh-user");
    const svc = new PackageService({ dir });
    await withBundledPackages(async () => {
      const list = await svc.list();
      expect(list.ok).toBe(true);
      if (!list.ok) return;
      expect(list.value).toMatchObject({ dir, exists: false });
      expect(list.value.bundledDir).not.toBeNull();
      expect(existsSync(path.join(list.value.bundledDir!, "cpu-generic", "cpu-generic.gkmetadata"))).toBe(true);
      expect(list.value.packages.map((p) => p.name)).toEqual(expect.arrayContaining(["cpu-generic", "cpu-avx2"]));
      for (const p of list.value.packages) expect(p).toMatchObject({ source: "bundled", shadows: null });
      expect(list.value.packages.find((p) => p.name === "cpu-generic")).toMatchObject({ enabled: true, compatible: true });

      expect(await svc.disable("cpu-generic")).toEqual({ ok: true, value: undefined });
      expect(existsSync(path.join(dir, "state.json"))).toBe(true);
      const after = await svc.list();
      expect(after.ok && after.value.packages.find((p) => p.name === "cpu-generic")?.enabled).toBe(false);
      expect(await svc.uninstall("cpu-generic")).toMatchObject({ ok: false, code: "invalid_argument", message: expect.stringMatching(/bundled.*disable it instead/) });
      expect(await svc.enable("cpu-generic")).toEqual({ ok: true, value: undefined });

      // An installed copy hides the bundled one.
      const archive = path.join(work, "cpu-generic-shadow.gkpkg");
      expect((await svc.pack(path.join(builtDir, "cpu-generic"), archive)).ok).toBe(true);
      expect(await svc.install(archive)).toEqual({ ok: true, value: "cpu-generic" });
      const shadowed = await svc.list();
      expect(shadowed.ok && shadowed.value.packages.filter((p) => p.name === "cpu-generic")).toEqual([
        expect.objectContaining({ source: "user", shadows: path.join(list.value.bundledDir!, "cpu-generic") }),
      ]);
    });
  });

  describe.skipIf(testPackageLibsSkipReason !== "")("install checks", () => {
    it("a library that crashes or exits while checked is an error value; this process survives and never ran it", async () => {
      const dir = path.join(work, "probe");
      const marks = path.join(work, "probe-marks");
      mkdirSync(marks, { recursive: true });
      process.env["GUILD_TEST_PROVIDER_MARKS"] = marks;
      try {
        const svc = new PackageService({ dir });
        const cases: [string, RegExp][] = [
          ["test-query-segv", /: libtest-query-segv\.so: the package library crashed while being checked \(SIGSEGV\)$/],
          ["test-ctor-exit", /: libtest-ctor-exit\.so: the package library ended the check with exit status 7$/],
        ];
        for (const [name, message] of cases) {
          expect(await svc.install(writeTestArchive(work, name))).toMatchObject({ ok: false, code: "unsupported", message: expect.stringMatching(message) });
          expect(stagingLeftovers(dir)).toEqual([]);
          const ranIn = constructorRanIn(marks, name);
          expect(ranIn.length).toBeGreaterThan(0);
          expect(ranIn).not.toContain(process.pid);
        }
        // A valid one installs, checked the same way.
        expect(await svc.install(writeTestArchive(work, "test-ok"))).toEqual({ ok: true, value: "test-ok" });
        expect(constructorRanIn(marks, "test-ok")).toHaveLength(1);
        expect(constructorRanIn(marks, "test-ok")).not.toContain(process.pid);
        expect(process.env["GUILD_TEST_PROVIDER_RAN"]).toBeUndefined();
        const list = await svc.list();
        expect(list.ok && list.value.packages.map((p) => p.name)).toEqual(["test-ok"]);
      } finally {
        delete process.env["GUILD_TEST_PROVIDER_MARKS"];
      }
    });
  });

  it("a corrupt state file is an error naming it, stays as it was, and reset-state sets it aside", async () => {
    const dir = path.join(work, "corrupt-state");
    const svc = new PackageService({ dir });
    const archive = path.join(work, "cpu-generic-state.gkpkg");
    expect((await svc.pack(path.join(builtDir, "cpu-generic"), archive)).ok).toBe(true);
    expect((await svc.install(archive)).ok).toBe(true);
    expect((await svc.disable("cpu-generic")).ok).toBe(true);
    const stateFile = path.join(dir, "state.json");
    const truncated = readFileSync(stateFile, "utf8").slice(0, 40);
    writeFileSync(stateFile, truncated);
    const namesTheFile = (r: { ok: boolean; code?: string; message?: string }): void => {
      expect(r).toMatchObject({ ok: false, code: "format" });
      expect(r.message?.startsWith(`${stateFile} is corrupt (`)).toBe(true);
      expect(r.message).toContain("guild packages reset-state");
    };
    namesTheFile(await svc.list());
    namesTheFile(await svc.enable("cpu-generic"));
    namesTheFile(await svc.pin("m.gguf", "cpu-generic", "1.0.0"));
    expect(readFileSync(stateFile, "utf8")).toBe(truncated);
    const reset = await svc.resetState();
    expect(reset).toEqual({ ok: true, value: expect.any(String) });
    if (!reset.ok || reset.value === null) return;
    expect(reset.value.startsWith(`${stateFile}.set-aside-`)).toBe(true);
    expect(readFileSync(reset.value, "utf8")).toBe(truncated);
    const list = await svc.list();
    expect(list.ok && list.value.packages.map((p) => [p.name, p.enabled])).toEqual([["cpu-generic", true]]);
    expect(await svc.resetState()).toEqual({ ok: true, value: null });
  });

  it("a .leases that is not a directory makes uninstall and disable refuse", async () => {
    const dir = path.join(work, "bad-leases");
    const svc = new PackageService({ dir });
    const archive = path.join(work, "cpu-generic-leases.gkpkg");
    expect((await svc.pack(path.join(builtDir, "cpu-generic"), archive)).ok).toBe(true);
    expect((await svc.install(archive)).ok).toBe(true);
    writeFileSync(path.join(dir, ".leases"), "not a directory");
    const named = expect.stringContaining(`${path.join(dir, ".leases")} is a regular file, not a directory`);
    expect(await svc.uninstall("cpu-generic")).toEqual({ ok: false, code: "io", message: named });
    expect(await svc.disable("cpu-generic")).toEqual({ ok: false, code: "io", message: named });
    expect(await svc.list()).toEqual({ ok: false, code: "io", message: named });
    expect(existsSync(path.join(dir, "cpu-generic"))).toBe(true);
  });

  describe.skipIf(!haveFixtures || !hasAvx2)("with a loaded model", () => {
    it("leases block disable until released; disabling cpu-avx2 switches the next load to cpu-generic, same output", async () => {
      const dir = path.join(work, "model");
      const svc = new PackageService({ dir });
      for (const name of ["cpu-generic", "cpu-avx2"]) {
        const archive = path.join(work, `${name}.gkpkg`);
        expect((await svc.pack(path.join(builtDir, name), archive)).ok).toBe(true);
        expect(await svc.install(archive)).toEqual({ ok: true, value: name });
      }
      interface GreedyPrompt { name: string; prompt_ids: number[]; generated_ids: number[]; top1_minus_top2_logit: number[] }
      const prompt = readExpectedJson<{ prompts: GreedyPrompt[] }>("qwen3moe-a-Q8_0", "greedy.json").prompts[0]!;
      const mustMatch = (() => {
        const i = prompt.top1_minus_top2_logit.findIndex((m) => m < 0.5);
        return i < 0 ? prompt.generated_ids.length : i;
      })();
      const cpuKernels = (model: GuildModel): unknown => {
        const stages = model.startupProfile()["stages"] as { name: string; detail: Record<string, unknown> }[];
        return stages.find((s) => s.name === "packages")?.detail["cpu_kernels"];
      };
      const greedy = async (model: GuildModel): Promise<number[]> => {
        const s = await model.createSession({ contextSize: 128 });
        try {
          const r = await s.generate(prompt.prompt_ids, { maxNewTokens: 8, temperature: 0 });
          return [...r.tokens];
        } finally {
          s.dispose();
        }
      };
      {
        const m1 = await GuildModel.load(modelPath("qwen3moe-a-Q8_0.gguf"), { threads: 2, contextSize: 128, packagesDir: dir });
        expect(cpuKernels(m1)).toBe("cpu-avx2");
        const avx2Tokens = await greedy(m1);
        const busy = await svc.disable("cpu-avx2");
        expect(busy).toMatchObject({ ok: false, code: "busy", message: expect.stringContaining("model qwen3moe-a-Q8_0.gguf") });
        const list = await svc.list();
        expect(list.ok && list.value.packages.find((p) => p.name === "cpu-avx2")?.pinnedBy).toEqual(["model qwen3moe-a-Q8_0.gguf"]);
        // The CLI, another process, sees this process's model too.
        const cli = runCli(["packages", "disable", "cpu-avx2", "--packages-dir", dir]);
        expect(cli.status).toBe(1);
        expect(cli.stderr).toContain(`in use by model qwen3moe-a-Q8_0.gguf (process ${process.pid})`);
        const session = await m1.createSession({ contextSize: 64 });
        m1.dispose(); // the session keeps the model (and its lease) alive
        const stillBusy = await svc.uninstall("cpu-avx2");
        expect(stillBusy).toMatchObject({ ok: false, code: "busy", message: expect.stringMatching(/session \d+ \(model qwen3moe-a-Q8_0\.gguf\)/) });
        session.dispose();
        expect(await svc.disable("cpu-avx2")).toEqual({ ok: true, value: undefined });

        const m2 = await GuildModel.load(modelPath("qwen3moe-a-Q8_0.gguf"), { threads: 2, contextSize: 128, packagesDir: dir });
        expect(cpuKernels(m2)).toBe("cpu-generic");
        const genericTokens = await greedy(m2);
        m2.dispose();
        expect(genericTokens.slice(0, mustMatch)).toEqual(avx2Tokens.slice(0, mustMatch));
      }
    });
  });
});

if (!haveFixtures) console.warn(`guild tests: package model test skipped: ${fixturesSkipReason}`);
if (testPackageLibsSkipReason) console.warn(`guild tests: package install-check tests skipped: ${testPackageLibsSkipReason}`);
