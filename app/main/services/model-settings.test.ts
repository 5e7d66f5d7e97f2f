// ModelManager's check of the load settings (sanitizeSettings) before anything
// is loaded: the GPU choice, the budget, expertsOnCpu and the peer GPUs, good and bad. A host
// that records what it is asked to load stands in for the runtime (its
// pre-flight check passes everything: the settings' own checks are under test);
// the file check before a load reads the real embedded model.
import { describe, expect, it } from "vitest";

import type { EventSink } from "../../shared/app-contract.js";
import type { LoadedModel, ModelLoadSettings } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import type { ModelLibrary } from "./model-library.js";
import { ModelManager } from "./model-manager.js";
import type { ProfileStore } from "./profile-store.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

function manager(defaults: ModelLoadSettings = {}) {
  const loads: ModelLoadSettings[] = [];
  const host = {
    subscribe: () => () => undefined,
    checkLoad: async () => ({ ok: true, status: "ok", stage: null, error: null, estimate: {}, profile: null }),
    loadModel: async (path: string, settings: ModelLoadSettings) => {
      loads.push(settings);
      return { id: "m1", path, name: "demo" } as LoadedModel;
    },
    unloadModel: async () => true,
    profile: () => { throw new Error("no profile"); },
  } as unknown as RuntimeHost;
  const library = { remember: () => undefined, setLoadCheck: () => undefined, setLastLoad: () => undefined } as unknown as ModelLibrary;
  const emit: EventSink = () => undefined;
  return { models: new ModelManager(host, library, {} as ProfileStore, emit, defaults), loads };
}

async function refusal(settings: Record<string, unknown>): Promise<RuntimeError> {
  const { models, loads } = manager();
  const err = await models.load({ path: embeddedModelPath(), settings: settings as ModelLoadSettings }).then(() => null, (e: unknown) => e);
  expect(loads).toEqual([]);  // refused before the runtime sees it
  expect(err).toBeInstanceOf(RuntimeError);
  expect((err as RuntimeError).code).toBe("invalid");
  return err as RuntimeError;
}

describe("ModelManager load settings (sanitizeSettings)", () => {
  it("passes the device, budget and expert placement through to the runtime, over the defaults", async () => {
    for (const gpu of ["auto", "cpu", "cuda:0", "cuda:7", "cuda:42"] as const) {
      const { models, loads } = manager({ threads: 2 });
      await models.load({ path: embeddedModelPath(), settings: { gpu, gpuBudgetGiB: 7.5, expertsOnCpu: true } });
      expect(loads).toEqual([{ threads: 2, gpu, gpuBudgetGiB: 7.5, expertsOnCpu: true }]);
    }
    const { models, loads } = manager({ gpu: "cpu" });
    await models.load({ path: embeddedModelPath(), settings: { gpuBudgetGiB: 0.25, expertsOnCpu: false, kvCacheType: "f32" } });
    expect(loads).toEqual([{ gpu: "cpu", gpuBudgetGiB: 0.25, expertsOnCpu: false, kvCacheType: "f32" }]);
  });

  it("refuses a device other than auto, cpu or cuda:N", async () => {
    for (const gpu of ["gpu", "CUDA:0", "cuda:", "cuda:-1", "cuda:01", "cuda:100", "cuda:1.5", " cpu", "", 0, true, null])
      expect((await refusal({ gpu })).message, String(gpu)).toBe('gpu must be "auto", "cpu" or "cuda:N"');
  });

  it("refuses a budget that is not a positive number of GiB", async () => {
    for (const gpuBudgetGiB of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "8", 2 ** 21, null])
      expect((await refusal({ gpuBudgetGiB })).message, String(gpuBudgetGiB)).toBe("gpuBudgetGiB must be a positive number of GiB");
  });

  it("refuses an expertsOnCpu that is not a boolean", async () => {
    for (const expertsOnCpu of ["true", 1, 0, null])
      expect((await refusal({ expertsOnCpu })).message, String(expertsOnCpu)).toBe("expertsOnCpu must be true or false");
  });

  it("passes peer GPUs and their budget through, normalized", async () => {
    const cases: [ModelLoadSettings, ModelLoadSettings][] = [
      [{ gpuPeers: "cuda:1" }, { gpuPeers: "cuda:1" }],
      [{ gpu: "cuda:0", gpuPeers: " cuda:1, cuda:2 ", gpuPeerBudgetGiB: 12.5 }, { gpu: "cuda:0", gpuPeers: "cuda:1,cuda:2", gpuPeerBudgetGiB: 12.5 }],
      [{ gpu: "cuda:3", gpuPeers: "cuda:0" }, { gpu: "cuda:3", gpuPeers: "cuda:0" }],
      [{ gpu: "auto", gpuPeers: "cuda:0,cuda:1" }, { gpu: "auto", gpuPeers: "cuda:0,cuda:1" }],
      [{ gpuPeers: "" }, {}],  // "" = none
      [{ gpu: "cpu", gpuPeers: "  " }, { gpu: "cpu" }],
    ];
    for (const [settings, sent] of cases) {
      const { models, loads } = manager();
      await models.load({ path: embeddedModelPath(), settings });
      expect(loads, JSON.stringify(settings)).toEqual([sent]);
    }
  });

  it("refuses malformed peer GPUs", async () => {
    for (const gpuPeers of ["cuda", "cuda:1,", ",cuda:1", "cuda:1,,cuda:2", "cuda:1;cuda:2", "CUDA:1", "cuda:01", "cuda:100", "cuda:-1", "gpu1", "cpu", "auto", 1, true, null, ["cuda:1"]])
      expect((await refusal({ gpuPeers })).message, String(gpuPeers)).toBe('gpuPeers must be "cuda:N" entries separated by commas');
  });

  it("refuses a peer named twice, peers on the CPU, and the primary device as its own peer", async () => {
    expect((await refusal({ gpuPeers: "cuda:1,cuda:2, cuda:1" })).message).toBe("gpuPeers names cuda:1 twice");
    expect((await refusal({ gpu: "cpu", gpuPeers: "cuda:1" })).message).toBe('gpuPeers need a GPU: they cannot go with gpu "cpu"');
    expect((await refusal({ gpu: "cuda:1", gpuPeers: "cuda:2,cuda:1" })).message).toBe("gpuPeers: cuda:1 is the primary device (gpu)");
  });

  it("refuses a peer budget that is not a positive number of GiB, or without peers", async () => {
    for (const gpuPeerBudgetGiB of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, "8", 2 ** 21, null])
      expect((await refusal({ gpuPeers: "cuda:1", gpuPeerBudgetGiB })).message, String(gpuPeerBudgetGiB)).toBe("gpuPeerBudgetGiB must be a positive number of GiB");
    for (const settings of [{ gpuPeerBudgetGiB: 8 }, { gpuPeers: "", gpuPeerBudgetGiB: 8 }])
      expect((await refusal(settings)).message, JSON.stringify(settings)).toBe("gpuPeerBudgetGiB needs gpuPeers");
  });

  it("passes the speculative settings through (the defaults of the model's replies)", async () => {
    const { models, loads } = manager({ threads: 2 });
    await models.load({ path: embeddedModelPath(), settings: { draft: "none", specMax: 16, specMinP: 0.5, specRule: "confidence" } });
    await models.load({ path: embeddedModelPath(), settings: { draft: "auto", specMax: 1, specMinP: 0 } });
    expect(loads).toEqual([
      { threads: 2, draft: "none", specMax: 16, specMinP: 0.5, specRule: "confidence" },
      { threads: 2, draft: "auto", specMax: 1, specMinP: 0 },
    ]);
  });

  it("refuses speculative settings out of their ranges", async () => {
    for (const draft of ["MTP", "fast", "", 1, true, null])
      expect((await refusal({ draft })).message, String(draft)).toBe('draft must be "none", "auto" or "mtp"');
    for (const specMax of [0, 17, 2.5, -1, "4", Number.NaN, null])
      expect((await refusal({ specMax })).message, String(specMax)).toBe("specMax must be a whole number from 1 to 16");
    for (const specMinP of [-0.01, 1.01, Number.NaN, Number.POSITIVE_INFINITY, "0.5", null])
      expect((await refusal({ specMinP })).message, String(specMinP)).toBe("specMinP must be a number from 0 to 1");
    for (const specRule of ["fast", "Cost", 1, null])
      expect((await refusal({ specRule })).message, String(specRule)).toBe('specRule must be "cost" or "confidence"');
  });

  it("refuses draft mtp when the runtime's check says the model has no MTP block to draft with, keeping the current model", async () => {
    const drafterSays = (drafter: string) => ({
      ok: true, status: "ok", stage: null, error: null, estimate: {},
      profile: { stages: [{ name: "session_state", detail: { drafter } }] },
    });
    for (const [drafter, refused] of [
      ["none (the model has no MTP block; speculative window T = 1)", /draft "mtp": the model has no MTP \(nextn\) block to draft with \(choose draft Auto or None\)$/],
      ["none (the nextn block drafts on the CPU executor only; T = 1 on the GPU)", /draft "mtp": MTP drafting runs on the CPU executor only/],
      ["mtp: the nextn block drafts on the CPU (its own one-layer KV cache per session)", null],
    ] as const) {
      const loads: ModelLoadSettings[] = [];
      const host = {
        subscribe: () => () => undefined,
        checkLoad: async () => drafterSays(drafter),
        loadModel: async (path: string, settings: ModelLoadSettings) => { loads.push(settings); return { id: "m1", path, name: "demo" } as LoadedModel; },
        unloadModel: async () => true,
        profile: () => { throw new Error("no profile"); },
      } as unknown as RuntimeHost;
      const library = { remember: () => undefined, setLoadCheck: () => undefined, setLastLoad: () => undefined } as unknown as ModelLibrary;
      const models = new ModelManager(host, library, {} as ProfileStore, () => undefined);
      const err = await models.load({ path: embeddedModelPath(), settings: { draft: "mtp" } }).then(() => null, (e: unknown) => e as Error);
      if (refused === null) {
        expect(err).toBeNull();
        expect(loads).toEqual([{ draft: "mtp" }]);
      } else {
        expect(err?.message).toMatch(/^cannot load .*guild-demo-qwen3moe-Q8_0\.gguf: /);
        expect(err?.message).toMatch(refused);
        expect(loads).toEqual([]);
        // Auto is fine on the same model.
        await models.load({ path: embeddedModelPath(), settings: { draft: "auto" } });
        expect(loads).toEqual([{ draft: "auto" }]);
      }
    }
  });

  it("checks the CPU settings too", async () => {
    expect((await refusal({ threads: 1.5 })).message).toBe("threads must be a whole number from 0 to 1024");
    expect((await refusal({ contextSize: -1 })).message).toBe("contextSize must be a whole number of tokens");
    expect((await refusal({ kvCacheType: "q8_0" })).message).toBe("kvCacheType must be f16 or f32");
  });
});
