// The app's PackageService over the real kernel-package engine and the
// native build's packages: install from a path and from uploaded bytes,
// uninstall, the events they announce, and the plain errors (pinned by a
// loaded model, not a package, too large, unavailable; an uploaded package
// whose library crashes while checked: the server process survives, never
// ran it, and keeps no staging files).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { builtPackagesSkipReason, packBuiltPackage } from "../../test/built-packages.js";
import { constructorRanIn, stagingLeftovers, testPackageLibsSkipReason, writeTestArchive } from "../../test/test-package-libs.js";
import { maxUploadBytes, type EventName, type PackageInfo } from "../../shared/app-contract.js";
import { embeddedModelPath } from "../paths.js";
import { kernelLeases } from "../runtime/model.js";
import { AppPackageService, packageBackendFrom } from "./package-adapter.js";
import { PackageService } from "./package-service.js";
import { RuntimeHost } from "./runtime-host.js";

describe("AppPackageService without a backend", () => {
  it("says plainly that package management is unavailable", async () => {
    const svc = new AppPackageService(null, () => undefined);
    expect(await svc.list()).toEqual([]);
    await expect(svc.install({ path: "/x.gkpkg" })).rejects.toThrow(/not available in this build/);
    await expect(svc.uninstall({ name: "cpu-generic" })).rejects.toThrow(/not available in this build/);
  });
});

if (builtPackagesSkipReason) console.warn(`guild tests: skipping app package tests: ${builtPackagesSkipReason}`);

describe.skipIf(builtPackagesSkipReason !== "")("AppPackageService over the package engine", () => {
  let work: string;
  let dir: string;
  let svc: AppPackageService;
  const changed: PackageInfo[][] = [];
  const archive = (name: string) => path.join(work, `${name}.gkpkg`);

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), "guild-app-pkg-"));
    dir = path.join(work, "packages");
    for (const name of ["cpu-generic", "cpu-avx2", "cpu-avx512"]) await packBuiltPackage(name, archive(name));
    svc = new AppPackageService(packageBackendFrom(new PackageService({ dir })), (name: EventName, payload: unknown) => {
      if (name === "packages.changed") changed.push((payload as { packages: PackageInfo[] }).packages);
    });
  });
  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it("installs from a path, announces the new list, and uninstalls", async () => {
    const p = await svc.install({ path: archive("cpu-generic") });
    expect(p).toMatchObject({ name: "cpu-generic", compatible: true, enabled: true, pinnedBy: [] });
    expect(existsSync(path.join(dir, "cpu-generic"))).toBe(true);
    expect(changed.at(-1)?.some((x) => x.name === "cpu-generic")).toBe(true);
    expect(await svc.uninstall({ name: "cpu-generic" })).toEqual({ uninstalled: true });
    expect(existsSync(path.join(dir, "cpu-generic"))).toBe(false);
    await expect(svc.uninstall({ name: "cpu-nope" })).rejects.toThrow(/no package named cpu-nope/);
  });

  it("installs from uploaded bytes, leaving no temporary file behind", async () => {
    const data = readFileSync(archive("cpu-generic")).toString("base64");
    const p = await svc.installUpload({ fileName: "C:\\Downloads\\cpu-generic.gkpkg", data });
    expect(p).toMatchObject({ name: "cpu-generic", enabled: true });
    expect(existsSync(path.join(dir, "cpu-generic"))).toBe(true);
    await expect(svc.installUpload({ fileName: "notes.txt", data })).rejects.toThrow(/not a \.gkpkg archive/);
    await expect(svc.installUpload({ fileName: "x.gkpkg", data: "" })).rejects.toThrow(/empty/);
    const big = Buffer.alloc(maxUploadBytes + 1).toString("base64");
    await expect(svc.installUpload({ fileName: "big.gkpkg", data: big })).rejects.toThrow(/larger than 8 MiB; install it by path/);
  });

  it("reports the engine's own errors plainly: a file that is not a package, a missing file", async () => {
    const junk = path.join(work, "junk.gkpkg");
    writeFileSync(junk, "not a package");
    await expect(svc.install({ path: junk })).rejects.toThrow(/not a \.gkpkg/);
    // An upload's error names the file the user picked, not the temporary copy.
    const uploaded = svc.installUpload({ fileName: "junk.gkpkg", data: Buffer.from("not a package").toString("base64") });
    await expect(uploaded).rejects.toThrow(/^junk\.gkpkg: not a \.gkpkg/);
    await expect(svc.install({ path: path.join(work, "missing.gkpkg") })).rejects.toThrow(/missing\.gkpkg/);
    await expect(svc.install({ path: "  " })).rejects.toThrow(/path is required/);
  });

  it.skipIf(testPackageLibsSkipReason !== "")("an uploaded package whose library crashes when checked is refused; the server never ran it", async () => {
    const marks = path.join(work, "marks");
    mkdirSync(marks, { recursive: true });
    process.env["GUILD_TEST_PROVIDER_MARKS"] = marks;
    try {
      const data = readFileSync(writeTestArchive(work, "test-query-segv")).toString("base64");
      const before = changed.length;
      await expect(svc.installUpload({ fileName: "test-query-segv.gkpkg", data })).rejects.toThrow(
        /^test-query-segv\.gkpkg: package test-query-segv 1\.0\.0 cannot be installed: libtest-query-segv\.so: the package library crashed while being checked \(SIGSEGV\)$/,
      );
      expect(changed.length).toBe(before);
      expect(stagingLeftovers(dir)).toEqual([]);
      expect(existsSync(path.join(dir, "test-query-segv"))).toBe(false);
      expect(constructorRanIn(marks, "test-query-segv").length).toBeGreaterThan(0);
      expect(constructorRanIn(marks, "test-query-segv")).not.toContain(process.pid);
      expect(process.env["GUILD_TEST_PROVIDER_RAN"]).toBeUndefined();
    } finally {
      delete process.env["GUILD_TEST_PROVIDER_MARKS"];
    }
  });

  it("refuses to uninstall or disable a package a loaded model pins, naming the model", async () => {
    for (const name of ["cpu-avx2", "cpu-avx512"]) {
      // A package this CPU cannot run is refused at install (cpu-avx512 on an
      // AVX2 host); the model then pins the best one it can.
      await svc.install({ path: archive(name) }).catch((e: unknown) => {
        if (!(e instanceof Error) || !/which this CPU lacks/.test(e.message)) throw e;
      });
    }
    const host = new RuntimeHost();
    process.env["GUILD_PACKAGES_DIR"] = dir;  // read by the native load (stage 2)
    try {
      const model = await host.loadModel(embeddedModelPath(), { threads: 2 });
      const pinnedName = kernelLeases().find((l) => l.holder === "model guild-demo-qwen3moe-Q8_0.gguf")?.provider;
      expect(pinnedName).toBeDefined();
      const listed = (await svc.list()).find((p) => p.name === pinnedName);
      expect(listed?.pinnedBy).toEqual(["model guild-demo-qwen3moe-Q8_0.gguf"]);
      const plain = `${pinnedName} is pinned by model guild-demo-qwen3moe-Q8_0.gguf; unload it first`;
      await expect(svc.uninstall({ name: pinnedName! })).rejects.toThrow(plain);
      await expect(svc.disable({ name: pinnedName! })).rejects.toThrow(plain);
      expect(existsSync(path.join(dir, pinnedName!))).toBe(true);
      await host.unloadModel(model.id);
      expect(await svc.uninstall({ name: pinnedName! })).toEqual({ uninstalled: true });
    } finally {
      await host.dispose();
      delete process.env["GUILD_PACKAGES_DIR"];
    }
  });
});
