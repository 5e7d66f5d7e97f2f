// ModelManager's safe replacement of the current model, with a host that
// records what it is asked but answers checkLoad with the runtime's real
// pre-flight check (the file checks read real GGUF files: the embedded model
// and the reference fixtures): a file the runtime's check refuses (its
// architecture, the installed kernel packages) is refused in the runtime's
// words before anything is unloaded; with memory for both the new model loads
// next to the old one, which goes only after; with memory for one the old one
// goes first and comes back when the new load fails or is cancelled; a session
// the runtime says fits only once the current model is gone makes it go first;
// a model that fits nowhere is refused (unless ignoreMemory); a GPU model makes
// room for another GPU load; inspect's problems are the check's and its memory
// plan follows the settings.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { loadCancelledMessage, type AppEvents, type EventName, type EventSink } from "../../shared/app-contract.js";
import type { MachineFacts } from "../../shared/memory-plan.js";
import type { LoadedModel, ModelLoadSettings, StartupProfileJson } from "../../shared/runtime-contract.js";
import { fixturesDir } from "../../test/fixtures.js";
import { embeddedModelPath } from "../paths.js";
import type { MachineProbe } from "./machine-facts.js";
import { ModelLibrary } from "./model-library.js";
import { ModelManager } from "./model-manager.js";
import { PackageService } from "./package-service.js";
import type { ProfileStore } from "./profile-store.js";
import { RuntimeError, RuntimeHost } from "./runtime-host.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const demo = embeddedModelPath();
const other = path.join(fixturesDir, "models", "qwen3moe-a-Q8_0.gguf");
const unsupported = path.join(fixturesDir, "models", "deepseek2-a-Q4_K_M.gguf");
/** The runtime's refusal of an architecture it has no runner for (its list of runners is its own business). */
const unknownDeepseek = /^unknown architecture 'deepseek2' \(supported: [a-z0-9, -]+\)$/;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
// The check's kernel packages: a folder of the tests' own (the bundled packages are searched too).
const packagesDir = mkdtempSync(path.join(os.tmpdir(), "guild-load-order-packages-"));
afterAll(() => rmSync(packagesDir, { recursive: true, force: true }));

interface Options {
  ramAvailable?: number;
  failPaths?: string[];
  /** Loads of these paths wait until released (to cancel them midway). */
  holdPaths?: string[];
  gpuProfile?: boolean;
  /** What the host reports as the weights of each model it loads (what unloading one frees). */
  weightBytes?: number;
}

/** The runtime's own check, as the hosts below answer it. */
const runtime = () => new RuntimeHost({ packagesDir });

function setup(o: Options = {}) {
  const calls: string[] = [];
  const events: { name: EventName; payload: unknown }[] = [];
  let n = 0;
  const held: (() => void)[] = [];
  const cancelled = new Set<string>();
  const settingsOf = new Map<string, ModelLoadSettings>();
  const checker = runtime();  // only its checkLoad is used: the real pre-flight check
  const host = {
    checkLoad: (file: string, settings: ModelLoadSettings) => checker.checkLoad(file, settings),
    subscribe: () => () => undefined,
    loadModel: async (file: string, settings: ModelLoadSettings, loadId?: string) => {
      calls.push(`load ${path.basename(file)}`);
      if (o.holdPaths?.includes(file)) await new Promise<void>((r) => held.push(r));
      if (loadId && cancelled.has(loadId)) throw new RuntimeError(loadCancelledMessage, "cancelled");
      if (o.failPaths?.includes(file)) throw new RuntimeError(`${path.basename(file)}: out of memory`, "failed");
      const id = `m${++n}`;
      settingsOf.set(id, settings);
      return { id, path: file, name: path.basename(file), weightBytes: o.weightBytes ?? 16 * MiB, contextSize: 512 } as LoadedModel;
    },
    unloadModel: async (id: string) => {
      calls.push(`unload ${id}`);
      return true;
    },
    cancelLoad: (loadId: string) => {
      cancelled.add(loadId);
      for (const r of held.splice(0)) r();
      return true;
    },
    profile: (): StartupProfileJson => ({
      schema: "guild.startup-profile/1", model: {}, machine: {}, placement: { layers: [] }, fallbacks: [], total_ms: 1,
      stages: [{
        name: "device_policy", start_ms: 0, end_ms: 0, duration_ms: 0, bytes: 0,
        detail: o.gpuProfile ? { gpu: { device: 0, name: "Test GPU", total_bytes: 24 * GiB, free_bytes: 20 * GiB } } : { gpu: "this build has no CUDA backend" },
      }],
    } as unknown as StartupProfileJson),
  } as unknown as RuntimeHost;
  const gpus = o.gpuProfile ? [{ device: "cuda:0", name: "Test GPU", totalBytes: 24 * GiB, freeBytes: 20 * GiB }] : [];
  const machine: MachineProbe = {
    facts: async (): Promise<MachineFacts> => ({ ramAvailableBytes: o.ramAvailable ?? 64 * GiB, ramTotalBytes: 64 * GiB, gpus, gpuNote: "" }),
    observe: () => undefined,
  };
  const emit: EventSink = (name, payload) => { events.push({ name, payload }); };
  const profiles = { add: () => undefined, recent: async () => [] } as unknown as ProfileStore;
  const models = new ModelManager(host, new ModelLibrary(demo, path.join(fixturesDir, "models")), profiles, emit, {}, { machine });
  const states = () => events.filter((e) => e.name === "model.state").map((e) => e.payload as AppEvents["model.state"]);
  return { models, calls, states, settingsOf };
}

describe("ModelManager: the current model stays until the new one can take its place", () => {
  it("refuses an architecture this runtime cannot run before unloading anything", async () => {
    const { models, calls, states } = setup();
    const old = await models.load({ path: demo });
    calls.length = 0;
    const err = await models.load({ path: unsupported }).then(() => null, (e: unknown) => e as RuntimeError);
    const words = (await runtime().checkLoad(unsupported)).error!.slice(unsupported.length + 2);
    expect(words).toMatch(unknownDeepseek);
    expect(err?.message).toBe(`cannot load ${unsupported}: ${words}; ${old.name} stays loaded`);
    expect(err?.code).toBe("invalid");
    expect(calls).toEqual([]);
    expect((await models.current())?.id).toBe(old.id);
    expect(states().at(-1)).toMatchObject({ kind: "failed", path: unsupported });
  });

  it("loads next to the current model when both fit, and unloads the old one after", async () => {
    const { models, calls, states } = setup();
    const old = await models.load({ path: demo });
    calls.length = 0;
    const next = await models.load({ path: other });
    expect(calls).toEqual(["load qwen3moe-a-Q8_0.gguf", `unload ${old.id}`]);
    expect((await models.current())?.id).toBe(next.id);
    expect(states().map((s) => s.kind)).not.toContain("unloaded");
  });

  it("keeps the current model when a load next to it fails", async () => {
    const { models, calls } = setup({ failPaths: [other] });
    const old = await models.load({ path: demo });
    calls.length = 0;
    await expect(models.load({ path: other })).rejects.toThrow(/out of memory$/);
    expect(calls).toEqual(["load qwen3moe-a-Q8_0.gguf"]);
    expect((await models.current())?.id).toBe(old.id);
  });

  it("unloads first when memory holds only one, and loads the old model again when the new load fails", async () => {
    // The demo model's weights (16 MiB as the host reports them) free enough for the fixture only once unloaded.
    const { models, calls, states, settingsOf } = setup({ ramAvailable: 8 * MiB, failPaths: [other] });
    const old = await models.load({ path: demo, settings: { threads: 2, contextSize: 256 }, ignoreMemory: true });
    calls.length = 0;
    const err = await models.load({ path: other }).then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toBe(`qwen3moe-a-Q8_0.gguf: out of memory; ${old.name}, unloaded to make room, was loaded again`);
    expect(calls).toEqual([`unload ${old.id}`, "load qwen3moe-a-Q8_0.gguf", `load ${path.basename(demo)}`]);
    const restored = (await models.current())!;
    expect(restored.path).toBe(demo);
    expect(settingsOf.get(restored.id)).toEqual({ threads: 2, contextSize: 256 });  // as it was loaded
    expect(states().slice(-2)).toMatchObject([{ kind: "unloaded" }, { kind: "failed", path: other, restored: { id: restored.id } }]);
  });

  it("loads the old model again when a load that made room for itself is cancelled", async () => {
    const { models, calls, states } = setup({ ramAvailable: 8 * MiB, holdPaths: [other] });
    const old = await models.load({ path: demo, ignoreMemory: true });
    calls.length = 0;
    const loading = models.load({ path: other });
    for (let i = 0; i < 200 && !calls.includes("load qwen3moe-a-Q8_0.gguf"); i++) await new Promise((r) => setTimeout(r, 5));
    expect(await models.cancelLoad()).toEqual({ cancelled: true });
    await expect(loading).rejects.toThrow(loadCancelledMessage);
    expect(calls).toEqual([`unload ${old.id}`, "load qwen3moe-a-Q8_0.gguf", `load ${path.basename(demo)}`]);
    expect((await models.current())?.path).toBe(demo);
    expect(states().at(-1)).toMatchObject({ kind: "cancelled", path: other, restored: { path: demo } });
  });

  it("refuses a model that does not fit even with the current one unloaded, unless told to ignore memory", async () => {
    const { models, calls } = setup({ ramAvailable: 1 * MiB });
    const old = await models.load({ path: demo, ignoreMemory: true });
    calls.length = 0;
    const huge = { contextSize: 262_144 };  // a KV cache far beyond 17 MiB
    const err = await models.load({ path: other, settings: huge }).then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toMatch(new RegExp(`^cannot load ${other.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: it needs about [\\d.]+ MiB of RAM with these settings and 1\\.0 MiB is available \\(about 17\\.0 MiB with ${old.name} unloaded\\); .*Load anyway; ${old.name} stays loaded$`));
    expect(calls).toEqual([]);
    expect((await models.current())?.id).toBe(old.id);
    await models.load({ path: other, settings: huge, ignoreMemory: true });
    expect(calls).toEqual([`unload ${old.id}`, "load qwen3moe-a-Q8_0.gguf"]);
  });

  it("unloads a GPU model before another GPU load, so the new one gets the device's memory", async () => {
    const { models, calls } = setup({ gpuProfile: true });
    const old = await models.load({ path: demo });
    calls.length = 0;
    await models.load({ path: other });
    expect(calls).toEqual([`unload ${old.id}`, "load qwen3moe-a-Q8_0.gguf"]);
    calls.length = 0;
    await models.load({ path: demo, settings: { gpu: "cpu" } });  // a CPU load does not need the GPU's memory
    expect(calls).toEqual(["load " + path.basename(demo), expect.stringMatching(/^unload m\d+$/)]);
  });

  it("inspect plans memory for the typed context, KV precision, GPU budget and experts-on-CPU", async () => {
    const { models } = setup({ gpuProfile: true });
    const base = await models.inspect({ path: demo, settings: { gpu: "cpu" } });
    expect(base.problems).toEqual([]);
    expect(base.plan.contextSize).toBe(512);  // min(trained 512, 4096)
    expect(base.plan.parts.every((p) => p.where === "ram")).toBe(true);
    const big = await models.inspect({ path: demo, settings: { gpu: "cpu", contextSize: 2048, kvCacheType: "f32" } });
    expect(big.plan.kvCacheBytes).toBe(base.plan.kvCacheBytes * 4 * 2);
    expect(big.plan.ramBytes - base.plan.ramBytes).toBe(big.plan.kvCacheBytes - base.plan.kvCacheBytes);
    const gpu = await models.inspect({ path: demo, settings: {} });
    expect(gpu.plan.gpu?.device).toBe("cuda:0");
    expect(gpu.plan.summary).toMatch(/^Everything on cuda:0/);
    const cpuExperts = await models.inspect({ path: demo, settings: { expertsOnCpu: true } });
    expect(cpuExperts.plan.parts.filter((p) => p.what === "experts").map((p) => p.where)).toEqual(["ram"]);
    const half = (gpu.shape.denseBytes + gpu.plan.kvCacheBytes + 0.5 * GiB + gpu.shape.expertBytes / 2) / GiB;
    const hybrid = await models.inspect({ path: demo, settings: { gpuBudgetGiB: half } });
    expect(hybrid.plan.expertGpuShare).toBeCloseTo(0.5, 3);
    expect(hybrid.plan.summary).toMatch(/50 % of the expert bytes on cuda:0/);
    const refused = await models.inspect({ path: unsupported });
    expect(refused.problems).toEqual([expect.stringMatching(unknownDeepseek)]);
    // The plan counts the weights the runtime's check counted.
    const checked = await runtime().checkLoad(demo, { gpu: "cpu" });
    expect(base.shape.denseBytes).toBe(checked.estimate.denseBytes);
    expect(base.shape.expertBytes).toBe(checked.estimate.expertBytes);
  });

  it("refuses before unloading what the runtime's check refuses for the kernel packages installed here", async () => {
    const { models, calls } = setup();
    const old = await models.load({ path: demo });
    calls.length = 0;
    // This machine's packages, as a load picks them: every CPU package disabled.
    const service = new PackageService({ dir: packagesDir });
    const cpu = ["cpu-generic", "cpu-avx2", "cpu-avx512"];
    try {
      for (const name of cpu) expect((await service.disable(name)).ok, name).toBe(true);
      const err = await models.load({ path: other }).then(() => null, (e: unknown) => e as RuntimeError);
      expect(err?.message).toMatch(new RegExp(`^cannot load ${escape(other)}: no usable CPU kernel package in .*; ${escape(old.name)} stays loaded$`));
      expect(err?.code).toBe("invalid");
      expect(calls).toEqual([]);
      expect((await models.current())?.id).toBe(old.id);
      expect((await models.inspect({ path: other })).problems).toEqual([expect.stringMatching(/^no usable CPU kernel package in /)]);
    } finally {
      for (const name of cpu) await service.enable(name);
    }
    // Nothing was remembered: with the packages back, the same file loads.
    models.packagesChanged();
    expect((await models.inspect({ path: other })).problems).toEqual([]);
    await models.load({ path: other });
    expect(calls).toEqual(["load qwen3moe-a-Q8_0.gguf", `unload ${old.id}`]);
  });

  it("unloads first when the runtime says the new session fits only once the current model is gone", async (ctx) => {
    // A session beyond the memory a machine gives (the largest context the settings allow, f32 KV,
    // 1024 threads' attention score rows: some 68 GiB).
    const huge = { contextSize: 1 << 20, kvCacheType: "f32" as const, threads: 1024 };
    const shortfall = await runtime().checkLoad(other, huge);
    if (shortfall.ok) ctx.skip();
    expect(shortfall).toMatchObject({ ok: false, status: "out_of_memory", stage: "session_state" });
    const need = shortfall.estimate.session!.totalBytes;
    // The current model frees enough (as the host reports its weights): it goes first, then the new one loads.
    const room = setup({ weightBytes: need, ramAvailable: 4 * need });
    const old = await room.models.load({ path: demo });
    room.calls.length = 0;
    await room.models.load({ path: other, settings: huge });
    expect(room.calls).toEqual([`unload ${old.id}`, "load qwen3moe-a-Q8_0.gguf"]);
    // It does not: refused in the runtime's words, nothing unloaded.
    const tight = setup({ ramAvailable: 4 * need });
    const kept = await tight.models.load({ path: demo });
    tight.calls.length = 0;
    const err = await tight.models.load({ path: other, settings: huge }).then(() => null, (e: unknown) => e as Error);
    // The free memory is read again by the second check: only its number may differ.
    const moment = (line: string | undefined) => line?.replace(/only [\d.]+ ([GM]iB) can be allocated/, "only N $1 can be allocated");
    expect(err?.message).toMatch(/only [\d.]+ [GM]iB can be allocated/);
    expect(moment(err?.message)).toBe(moment(`cannot load ${other}: ${shortfall.error!.slice(other.length + 2)} (even with ${kept.name} unloaded); ${kept.name} stays loaded`));
    expect(tight.calls).toEqual([]);
  });

  it("does not delete the loaded model", async () => {
    const { models } = setup();
    const loaded = await models.load({ path: other });
    await expect(models.remove({ path: loaded.path })).rejects.toThrow(/is the loaded model: unload it first/);
  });
});
