// Trust boundaries of the files the services read (safe-file.ts): profiles.open
// reads only the profile store (a symbolic link leading out of it is refused),
// nothing is echoed from a file that is not a profile, FIFOs, devices and
// directories are refused from fstat before any read (several FIFO opens at
// once leave libuv's thread pool free), and sizes are capped before and while
// reading. Model and package paths get the same regular-file check.
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { PackageInfo } from "../../shared/app-contract.js";
import { embeddedModelPath } from "../paths.js";
import { jsonSyntaxErrorOffset } from "./json-syntax.js";
import { ModelLibrary } from "./model-library.js";
import { AppPackageService, type PackageBackend } from "./package-adapter.js";
import { parseProfile, ProfileStore } from "./profile-store.js";
import { readRegularFile, SafeFileError } from "./safe-file.js";

const posix = process.platform !== "win32";
const maxProfileBytes = 32 * 1024 * 1024;  // profile-store.ts's cap
const secret = "root:$6$SECRET-SALT$hash:19000:0:99999:7:::\nguild-secret-marker\n";
const profile = {
  schema: "guild.startup-profile/1", model: { name: "m" }, machine: {}, fallbacks: [], placement: {}, total_ms: 7,
  stages: [{ name: "a", start_ms: 0, end_ms: 7, duration_ms: 7 }],
};

/** Resolves with the value, or rejects when `p` takes longer than `ms` (a hang is a failure, not a stuck test). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a rejection");
}

describe("profiles.open and the profile store", () => {
  let root: string;
  let storeDir: string;
  let outside: string;
  let store: ProfileStore;

  beforeAll(() => {
    root = mkdtempSync(path.join(os.tmpdir(), "guild-safe-"));
    storeDir = path.join(root, "profiles");
    outside = path.join(root, "outside");
    mkdirSync(outside);
    store = new ProfileStore(storeDir);
    writeFileSync(path.join(outside, "shadow"), secret);
    writeFileSync(path.join(outside, "valid.json"), JSON.stringify(profile));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("opens a profile file inside the store, by absolute or relative path, and JSON text", async () => {
    writeFileSync(path.join(storeDir, "saved.json"), JSON.stringify(profile));
    expect((await store.open({ path: path.join(storeDir, "saved.json") })).total_ms).toBe(7);
    expect((await store.open({ path: "saved.json" })).total_ms).toBe(7);
    expect((await store.open({ json: JSON.stringify(profile) })).total_ms).toBe(7);
    await expect(store.open({ path: "saved.json", json: "{}" })).rejects.toThrow(/not both/);
  });

  it("refuses a path outside the store, without a word of the file's content", async () => {
    for (const p of [path.join(outside, "shadow"), path.join(outside, "valid.json"), "../outside/shadow", "/etc/passwd"]) {
      const err = await rejection(store.open({ path: p }));
      expect(err.message).toMatch(/reads only files in the profile folder/);
      expect(err.message).not.toMatch(/root|SECRET|marker/);
    }
  });

  it("says where the JSON breaks, never what the text is", async () => {
    writeFileSync(path.join(storeDir, "shadow.json"), secret);
    const fromFile = await rejection(store.open({ path: "shadow.json" }));
    expect(fromFile.message).toBe("not a startup profile JSON (parse error at byte 0)");
    const fromText = await rejection(store.open({ json: `{"schema": "x", "secret": guild-secret-marker}` }));
    expect(fromText.message).toBe("not a startup profile JSON (parse error at byte 26)");
    expect(() => parseProfile('{"a": "é" oops')).toThrow("not a startup profile JSON (parse error at byte 11)");
    expect(parseProfile("\uFEFF" + JSON.stringify(profile)).total_ms).toBe(7);  // a byte-order mark is no error
    expect(() => parseProfile("\uFEFF{")).toThrow("not a startup profile JSON (parse error at byte 4)");
  });

  it("refuses a symbolic link (file or folder) that leads out of the store", async () => {
    symlinkSync(path.join(outside, "valid.json"), path.join(storeDir, "link.json"));
    symlinkSync(outside, path.join(storeDir, "linked-folder"));
    await expect(store.open({ path: "link.json" })).rejects.toThrow(/reads only files in the profile folder/);
    await expect(store.open({ path: "linked-folder/valid.json" })).rejects.toThrow(/reads only files in the profile folder/);
    await expect(store.open({ path: path.join(storeDir, "linked-folder", "shadow") })).rejects.toThrow(/reads only files in the profile folder/);
    // A link inside the store to a file inside it is fine.
    symlinkSync(path.join(storeDir, "saved.json"), path.join(storeDir, "inner-link.json"));
    expect((await store.open({ path: "inner-link.json" })).total_ms).toBe(7);
  });

  it("refuses /dev/zero at once, inside the store or out, reading nothing", async () => {
    const before = process.memoryUsage().rss;
    await expect(within(store.open({ path: "/dev/zero" }), 10_000, "open /dev/zero")).rejects.toThrow(/reads only files in the profile folder/);
    const device = await rejection(within(readRegularFile("/dev/zero", { what: "startup profile JSON", maxBytes: maxProfileBytes }), 10_000, "read /dev/zero"));
    expect(device).toBeInstanceOf(SafeFileError);
    expect(device.message).toBe("/dev/zero: is a device, not a startup profile JSON");
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });

  it.skipIf(!posix)("refuses FIFOs without holding a thread: many opens at once, then other file work still runs", async () => {
    const fifo = path.join(storeDir, "pipe.json");
    execFileSync("mkfifo", [fifo]);
    const opens = Array.from({ length: 8 }, () => rejection(store.open({ path: "pipe.json" })));
    // With the pool's 4 threads blocked in open(2) this read would never run.
    expect(await within(readFile(path.join(storeDir, "saved.json"), "utf8"), 20_000, "a read after the FIFO opens")).toContain("guild.startup-profile/1");
    for (const err of await within(Promise.all(opens), 20_000, "the FIFO opens")) expect(err.message).toMatch(/pipe\.json: is a FIFO \(named pipe\), not a startup profile JSON/);
    // recent() skips it (and the links above) instead of blocking the main thread on it.
    expect((await within(store.recent(), 20_000, "recent()")).map((r) => r.modelName)).toEqual([]);
    await expect(within(store.get("pipe"), 20_000, "get(pipe)")).rejects.toThrow(/profile pipe: is a FIFO/);
    rmSync(fifo);
  });

  it("refuses a file over the cap from its size, and a file that grows past it while read", async () => {
    const big = path.join(storeDir, "big.json");
    closeSync(openSync(big, "w"));
    truncateSync(big, maxProfileBytes + 1);  // sparse: no disk used
    await expect(store.open({ path: "big.json" })).rejects.toThrow(/big\.json: larger than 32 MiB, too large for a startup profile JSON/);
    rmSync(big);
    // /proc files report size 0 and have content: only the cap while reading can stop them.
    if (process.platform === "linux") {
      await expect(readRegularFile("/proc/self/maps", { what: "test file", maxBytes: 100 })).rejects.toThrow(/larger than 100 bytes/);
      expect((await readRegularFile("/proc/self/maps", { what: "test file", maxBytes: 1 << 24 })).length).toBeGreaterThan(100);
    }
  });

  it("keeps the profiles it records, and reads them back by id", async () => {
    const record = store.add(parseProfile(JSON.stringify(profile)), "/models/m.gguf");
    expect((await store.recent()).map((r) => r.id)).toEqual([record.id]);
    expect((await store.get(record.id)).total_ms).toBe(7);
    await expect(store.get("nope")).rejects.toThrow(/no profile with id nope/);
    await expect(store.get("../x")).rejects.toThrow(/bad profile id/);
  });
});

describe("jsonSyntaxErrorOffset", () => {
  it("finds the byte where JSON first goes wrong, and null for valid JSON", () => {
    for (const ok of ['{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\n"],"b":{}}', "[]", " 0 ", '"s"', "[[[[]]]]"]) expect(jsonSyntaxErrorOffset(ok)).toBeNull();
    expect(jsonSyntaxErrorOffset("")).toBe(0);
    expect(jsonSyntaxErrorOffset("{")).toBe(1);
    expect(jsonSyntaxErrorOffset('{"a":1,}')).toBe(7);
    expect(jsonSyntaxErrorOffset("[1 2]")).toBe(3);
    expect(jsonSyntaxErrorOffset("[01]")).toBe(2);
    expect(jsonSyntaxErrorOffset('"\\x"')).toBe(2);
    expect(jsonSyntaxErrorOffset('["é", x]')).toBe(7);  // é is two bytes
    expect(jsonSyntaxErrorOffset("{} {}")).toBe(3);
    expect(jsonSyntaxErrorOffset("[".repeat(200_000))).toBe(200_000);  // deep nesting: no stack overflow
  });
});

describe("model and package paths", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-safe-paths-"));
    if (posix) execFileSync("mkfifo", [path.join(dir, "pipe.gguf")]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.skipIf(!posix)("inspecting a FIFO, a device or a directory is refused before the runtime opens it", async () => {
    const library = new ModelLibrary(embeddedModelPath(), dir);
    await expect(within(library.inspect(path.join(dir, "pipe.gguf")), 20_000, "inspect")).rejects.toThrow(/pipe\.gguf: is a FIFO \(named pipe\), not a model file/);
    await expect(library.inspect("/dev/zero")).rejects.toThrow("/dev/zero: is a device, not a model file");
    await expect(library.inspect(dir)).rejects.toThrow(`${dir}: is a directory, not a model file`);
    expect((await library.inspect(embeddedModelPath())).architecture).toBe("qwen3moe");
  });

  it.skipIf(!posix)("installing a package from a FIFO is refused before the installer reads it", async () => {
    const installs: string[] = [];
    const backend: PackageBackend = {
      list: (): PackageInfo[] => [], enable: () => undefined, disable: () => undefined, uninstall: () => undefined,
      install: (file) => { installs.push(file); return "x"; },
    };
    const svc = new AppPackageService(backend, () => undefined);
    await expect(svc.install({ path: path.join(dir, "pipe.gguf") })).rejects.toThrow(/is a FIFO \(named pipe\), not a \.gkpkg archive/);
    await expect(svc.install({ path: "/dev/zero" })).rejects.toThrow(/is a device, not a \.gkpkg archive/);
    expect(installs).toEqual([]);
  });
});
