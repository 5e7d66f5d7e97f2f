// Load settings remembered per model (ModelLoadMemory, #25 item 4): written
// after a successful load, offered when the model is listed or inspected,
// keyed by the file's real path, bounded, and never a failed start or load on
// a damaged or unwritable file.
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import type { EventSink } from "../../shared/app-contract.js";
import type { LoadedModel, ModelLoadSettings } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import type { MachineProbe } from "./machine-facts.js";
import { ModelLibrary } from "./model-library.js";
import { ModelLoadMemory, modelLoadMemoryFileName } from "./model-load-memory.js";
import { ModelManager, sanitizeSettings } from "./model-manager.js";
import type { ProfileStore } from "./profile-store.js";
import type { RuntimeHost } from "./runtime-host.js";

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), "guild-load-memory-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) {
    chmodSync(d, 0o700);
    rmSync(d, { recursive: true, force: true });
  }
});

function memory(dir: string, extra: { maxEntries?: number; now?: () => number } = {}) {
  const notices: string[] = [];
  const m = new ModelLoadMemory(dir, { validate: sanitizeSettings, notify: (n) => notices.push(n), ...extra });
  return { m, notices };
}

describe("ModelLoadMemory", () => {
  it("remembers the settings of a load, for the next start, with the time", () => {
    const dir = tmp();
    let clock = 1_700_000_000_000;
    const { m } = memory(dir, { now: () => clock });
    expect(m.get("/models/a.gguf")).toBeNull();
    m.remember("/models/a.gguf", { contextSize: 2048, threads: 2, gpu: "cuda:1", gpuBudgetGiB: 7.5 });
    clock += 1000;
    m.remember("/models/b.gguf", { kvCacheType: "f32" });
    const again = memory(dir).m;  // a new start reads the file
    expect(again.get("/models/a.gguf")).toEqual({ settings: { contextSize: 2048, threads: 2, gpu: "cuda:1", gpuBudgetGiB: 7.5 }, loadedAt: 1_700_000_000_000 });
    expect(again.get("/models/b.gguf")).toEqual({ settings: { kvCacheType: "f32" }, loadedAt: 1_700_000_001_000 });
    const file = path.join(dir, modelLoadMemoryFileName);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, "utf8")).version).toBe(1);
  });

  it("is keyed by the file's real path: a link to the model finds its settings", () => {
    const dir = tmp();
    const model = path.join(dir, "real.gguf");
    copyFileSync(embeddedModelPath(), model);
    symlinkSync(model, path.join(dir, "link.gguf"));
    const { m } = memory(dir);
    m.remember(path.join(dir, "link.gguf"), { contextSize: 1024 });
    expect(m.get(model)?.settings).toEqual({ contextSize: 1024 });
    expect(m.get(path.join(dir, ".", "real.gguf"))?.settings).toEqual({ contextSize: 1024 });
  });

  it("records nothing for a load at the defaults of a model with nothing remembered, and forgets by a later one", () => {
    const dir = tmp();
    const { m } = memory(dir);
    m.remember("/m/a.gguf", {});
    expect(existsSync(path.join(dir, modelLoadMemoryFileName))).toBe(false);
    m.remember("/m/a.gguf", { threads: 2 });
    m.remember("/m/a.gguf", {});  // back to the defaults: that is what it last loaded with
    expect(memory(dir).m.get("/m/a.gguf")?.settings).toEqual({});
  });

  it("keeps the most recently loaded models only", () => {
    const dir = tmp();
    let clock = 0;
    const { m } = memory(dir, { maxEntries: 3, now: () => ++clock });
    for (const n of ["a", "b", "c"]) m.remember(`/m/${n}.gguf`, { threads: 1 });
    m.remember("/m/a.gguf", { threads: 4 });  // loaded again: now the newest
    m.remember("/m/d.gguf", { threads: 1 });
    const again = memory(dir, { maxEntries: 3 }).m;
    expect(["a", "b", "c", "d"].map((n) => again.get(`/m/${n}.gguf`)?.settings.threads ?? null)).toEqual([4, null, 1, 1]);
  });

  it("sets a damaged file aside with one notice and remembers nothing from it", () => {
    for (const bytes of ["{not json", "[]", '{"version": 2, "models": {}}', '{"version": 1, "models": []}', "\u0000".repeat(600 * 1024)]) {
      const dir = tmp();
      writeFileSync(path.join(dir, modelLoadMemoryFileName), bytes);
      const { m, notices } = memory(dir);
      expect(m.get("/m/a.gguf")).toBeNull();
      expect(notices, bytes.slice(0, 20)).toHaveLength(1);
      expect(notices[0]).toMatch(/^the remembered load settings in .* could not be used \(.*\); the file was moved to .*\.corrupt-\d{8}T/);
      expect(notices[0]!.length).toBeLessThan(400);  // never the file's bytes
      expect(readdirSync(dir).filter((f) => f.includes(".corrupt-"))).toHaveLength(1);
      m.remember("/m/a.gguf", { threads: 2 });  // and a fresh file replaces it
      expect(memory(dir).m.get("/m/a.gguf")?.settings).toEqual({ threads: 2 });
    }
  });

  it("drops entries this version cannot use and keeps the rest", () => {
    const dir = tmp();
    const models = {
      "/m/good.gguf": { settings: { contextSize: 512 }, loadedAt: 5 },
      "/m/bad-gpu.gguf": { settings: { gpu: "tpu" }, loadedAt: 6 },
      "/m/bad-threads.gguf": { settings: { threads: -3 }, loadedAt: 7 },
      "/m/no-time.gguf": { settings: {} },
      "relative.gguf": { settings: {}, loadedAt: 8 },
      "/m/not-object.gguf": { settings: null, loadedAt: 9 },
      "/m/unknown-field.gguf": { settings: { threads: 3, evil: "x".repeat(100) }, loadedAt: 10 },
    };
    writeFileSync(path.join(dir, modelLoadMemoryFileName), JSON.stringify({ version: 1, models }));
    const { m, notices } = memory(dir);
    expect(notices).toEqual([]);
    expect(m.get("/m/good.gguf")).toEqual({ settings: { contextSize: 512 }, loadedAt: 5 });
    for (const f of ["/m/bad-gpu.gguf", "/m/bad-threads.gguf", "/m/no-time.gguf", "relative.gguf", "/m/not-object.gguf"]) expect(m.get(f), f).toBeNull();
    expect(m.get("/m/unknown-field.gguf")?.settings).toEqual({ threads: 3 });
  });

  it("a folder it cannot write is one notice, never a failed load", () => {
    if (process.getuid?.() === 0) {
      // root writes anyway: a path whose parent is a file cannot be created by anyone
      const dir = tmp();
      writeFileSync(path.join(dir, "file"), "");
      const { m, notices } = memory(path.join(dir, "file", "data"));
      expect(() => m.remember("/m/a.gguf", { threads: 1 })).not.toThrow();
      expect(() => m.remember("/m/b.gguf", { threads: 1 })).not.toThrow();
      expect(notices).toHaveLength(1);
      expect(notices[0]).toMatch(/^the load settings could not be saved in .*; models will load with the defaults next time$/);
      return;
    }
    const dir = tmp();
    chmodSync(dir, 0o500);
    const { m, notices } = memory(dir);
    expect(() => m.remember("/m/a.gguf", { threads: 1 })).not.toThrow();
    expect(notices).toHaveLength(1);
  });
});

describe("ModelManager remembers load settings per model", () => {
  function setup() {
    const dir = tmp();
    const modelsDir = path.join(dir, "models");
    mkdirSync(modelsDir);
    const model = path.join(modelsDir, "demo.gguf");
    copyFileSync(embeddedModelPath(), model);
    const loads: ModelLoadSettings[] = [];
    const host = {
      subscribe: () => () => undefined,
      checkLoad: async () => ({ ok: true, status: "ok", stage: null, error: null, estimate: {}, profile: null }),
      loadModel: async (p: string, settings: ModelLoadSettings) => {
        loads.push(settings);
        return { id: `m${loads.length}`, path: p, name: "demo", weightBytes: 1, contextSize: 256 } as LoadedModel;
      },
      unloadModel: async () => true,
      profile: () => { throw new Error("no profile"); },
    } as unknown as RuntimeHost;
    const library = new ModelLibrary(embeddedModelPath(), modelsDir);
    const emit: EventSink = () => undefined;
    const loadMemory = new ModelLoadMemory(dir, { validate: sanitizeSettings });
    const machine: MachineProbe = {
      facts: async () => ({ ramTotalBytes: 64 * 2 ** 30, ramAvailableBytes: 32 * 2 ** 30, gpus: [], gpuNote: "no GPU in this test" }),
      observe: () => undefined,
    };
    const models = new ModelManager(host, library, {} as ProfileStore, emit, { threads: 1 }, { loadMemory, machine });
    return { models, model, loads, dir };
  }

  it("offers what the user chose (not the command line's defaults) in the list and in inspect", async () => {
    const { models, model, loads } = setup();
    expect((await models.inspect({ path: model })).lastLoad).toBeNull();
    expect((await models.list()).find((f) => f.path === model)?.lastLoad).toBeUndefined();
    await models.load({ path: model, settings: { contextSize: 1024, kvCacheType: "f32" } });
    expect(loads).toEqual([{ threads: 1, contextSize: 1024, kvCacheType: "f32" }]);
    const summary = await models.inspect({ path: model });
    expect(summary.lastLoad?.settings).toEqual({ contextSize: 1024, kvCacheType: "f32" });
    expect(summary.lastLoad!.loadedAt).toBeGreaterThan(Date.now() - 60_000);
    expect((await models.list()).find((f) => f.path === model)?.lastLoad?.settings).toEqual({ contextSize: 1024, kvCacheType: "f32" });
  });

  it("does not remember a refused load", async () => {
    const { models, model } = setup();
    await expect(models.load({ path: model, settings: { threads: -1 } })).rejects.toThrow(/threads/);
    expect((await models.inspect({ path: model })).lastLoad).toBeNull();
  });

  it("a later load replaces the remembered settings", async () => {
    const { models, model, dir } = setup();
    await models.load({ path: model, settings: { contextSize: 1024 } });
    await models.load({ path: model, settings: { contextSize: 512, expertsOnCpu: true } });
    expect((await models.inspect({ path: model })).lastLoad?.settings).toEqual({ contextSize: 512, expertsOnCpu: true });
    expect(existsSync(path.join(dir, modelLoadMemoryFileName))).toBe(true);
  });
});
