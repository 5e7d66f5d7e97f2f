// The memory plan (memory-plan.ts): the KV cache for the context and
// precision, the default context, CPU-only and GPU placements (all on the
// GPU, hybrid by budget, experts on the CPU, a budget too small for Auto), and
// the warnings when RAM or a named device does not suffice.
import { describe, expect, it } from "vitest";

import { gpuWorkspaceBytes, kvCacheBytes, planContext, planMemory, type MachineFacts, type ModelShape } from "./memory-plan.js";

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const shape: ModelShape = { layers: 4, contextLength: 32768, denseBytes: 1 * GiB, expertBytes: 8 * GiB, headsKv: 4, keyLength: 128, valueLength: 128 };
const cpuOnly: MachineFacts = { ramAvailableBytes: 32 * GiB, ramTotalBytes: 64 * GiB, gpus: [], gpuNote: "this build has no CUDA backend" };
const withGpu: MachineFacts = { ...cpuOnly, gpus: [{ device: "cuda:0", name: "Test GPU", totalBytes: 24 * GiB, freeBytes: 12 * GiB }], gpuNote: "" };

describe("planMemory", () => {
  it("sizes the KV cache for the context and precision, and takes min(trained, 4096) by default", () => {
    expect(kvCacheBytes(shape, 1000, "f16")).toBe(4 * 1000 * 4 * 256 * 2);
    expect(kvCacheBytes(shape, 1000, "f32")).toBe(4 * 1000 * 4 * 256 * 4);
    expect(planContext(shape, undefined)).toBe(4096);
    expect(planContext(shape, 0)).toBe(4096);
    expect(planContext({ ...shape, contextLength: 512 }, undefined)).toBe(512);
    expect(planContext(shape, 20000)).toBe(20000);
  });

  it("puts everything in RAM without a GPU, and warns when RAM is short", () => {
    const p = planMemory(shape, { contextSize: 8192, kvCacheType: "f32" }, cpuOnly);
    expect(p.parts.map((x) => [x.what, x.where])).toEqual([["dense", "ram"], ["experts", "ram"], ["kv", "ram"]]);
    expect(p.ramBytes).toBe(9 * GiB + kvCacheBytes(shape, 8192, "f32"));
    expect(p.gpuBytes).toBe(0);
    expect(p.summary).toBe("Everything in RAM, computed by the CPU (this build has no CUDA backend).");
    expect(p.warnings).toEqual([]);
    const short = planMemory(shape, {}, { ...cpuOnly, ramAvailableBytes: 4 * GiB });
    expect(short.fitsRam).toBe(false);
    expect(short.warnings).toEqual([`It needs about 9.0 GiB of RAM; 4.0 GiB is available now.`]);
  });

  it("places dense weights, KV cache and as many experts as the GPU budget holds", () => {
    const all = planMemory(shape, { gpuBudgetGiB: 20 }, withGpu);
    expect(all.expertGpuShare).toBe(1);
    expect(all.summary).toBe("Everything on cuda:0 (Test GPU).");
    expect(all.ramBytes).toBe(0);
    // The default budget: free memory less 1 GiB = 7 GiB; 1 GiB dense + KV + 0.5 GiB workspace first.
    const smaller: MachineFacts = { ...withGpu, gpus: [{ ...withGpu.gpus[0]!, freeBytes: 8 * GiB }] };
    const auto = planMemory(shape, {}, smaller);
    const kv = kvCacheBytes(shape, 4096, "f16");
    expect(auto.gpuBudgetBytes).toBe(7 * GiB);
    expect(auto.expertGpuShare).toBeCloseTo((7 * GiB - 1 * GiB - kv - gpuWorkspaceBytes) / (8 * GiB), 9);
    expect(auto.parts.map((x) => [x.what, x.where])).toEqual([["dense", "gpu"], ["experts", "gpu"], ["experts", "ram"], ["kv", "gpu"], ["workspace", "gpu"]]);
    expect(auto.summary).toMatch(/^Dense weights, KV cache and \d+ % of the expert bytes on cuda:0 \(Test GPU\); the other experts in RAM, computed by the CPU\.$/);
    expect(auto.gpuBytes + auto.ramBytes).toBe(9 * GiB + kv + gpuWorkspaceBytes);
  });

  it("keeps every expert in RAM with experts-on-CPU, and falls back to the CPU under Auto when the budget is too small", () => {
    const onCpu = planMemory(shape, { expertsOnCpu: true }, withGpu);
    expect(onCpu.parts.filter((x) => x.what === "experts").map((x) => x.where)).toEqual(["ram"]);
    expect(onCpu.summary).toMatch(/^Dense weights and KV cache on cuda:0 .*every expert in RAM/);
    const tiny = planMemory(shape, { gpuBudgetGiB: 0.5 }, withGpu);
    expect(tiny.gpu).toBeNull();
    expect(tiny.parts.every((x) => x.where === "ram")).toBe(true);
    expect(tiny.warnings[0]).toMatch(/^The GPU budget \(512 MiB\) is smaller than the dense weights, KV cache and workspace .*falls back to the CPU\.$/);
    const cpu = planMemory(shape, { gpu: "cpu" }, withGpu);
    expect(cpu.summary).toBe("Everything in RAM, computed by the CPU (device CPU).");
  });

  it("warns about a device that is not there", () => {
    expect(planMemory(shape, { gpu: "cuda:1" }, withGpu).warnings[0]).toBe("There is no cuda:1 (this machine has cuda:0): the load would fail.");
    expect(planMemory(shape, { gpu: "cuda:0" }, cpuOnly).warnings[0]).toBe("cuda:0 is not known to be usable here (this build has no CUDA backend): the load would fail.");
    expect(planMemory({ ...shape, denseBytes: 5 * MiB }, { gpuBudgetGiB: 100 }, withGpu).warnings).toEqual([]);
    expect(planMemory({ ...shape, expertBytes: 16 * GiB }, { gpuBudgetGiB: 20 }, withGpu).warnings)
      .toEqual([expect.stringMatching(/^It needs about 18 GiB on cuda:0, which had 12 GiB free at the last load\.$/)]);
  });
});
