import { describe, expect, it } from "vitest";

import { gpuFit, workspaceAllowanceBytes } from "./gpu-fit.js";

const GiB = 2 ** 30;
// A Qwen3-30B-A3B-like split: 1.2 GiB dense, 15.2 GiB experts, 0.4 GiB KV.
const memory = { denseBytes: 1.2 * GiB, expertBytes: 15.2 * GiB, kvCacheBytes: 0.4 * GiB, contextSize: 4096, totalBytes: 16.8 * GiB };

describe("gpuFit", () => {
  it("says when everything fits, with what is left", () => {
    const f = gpuFit(memory, 24);
    expect(f.kind).toBe("all");
    if (f.kind === "all") expect(f.spareBytes).toBeCloseTo(24 * GiB - 16.8 * GiB - workspaceAllowanceBytes, -3);
  });

  it("gives the share of expert bytes cached and what stays for the CPU", () => {
    const f = gpuFit(memory, 8);
    expect(f.kind).toBe("hybrid");
    if (f.kind === "hybrid") {
      const forExperts = 8 * GiB - 1.6 * GiB - workspaceAllowanceBytes;
      expect(f.cachedShare).toBeCloseTo(forExperts / (15.2 * GiB), 6);
      expect(f.cpuBytes).toBeCloseTo(15.2 * GiB - forExperts, -3);
    }
  });

  it("puts the experts the primary does not hold on the peers' budgets next, the rest on the CPU", () => {
    const forExperts = 8 * GiB - 1.6 * GiB - workspaceAllowanceBytes;
    const f = gpuFit(memory, 8, { count: 2, budgetGiB: 3 });
    expect(f.kind).toBe("hybrid");
    if (f.kind === "hybrid") {
      expect(f.cachedShare).toBeCloseTo(forExperts / (15.2 * GiB), 6);
      expect(f.peerBytes).toBe(6 * GiB);
      expect(f.peerShare).toBeCloseTo(6 / 15.2, 6);
      expect(f.cpuBytes).toBeCloseTo(15.2 * GiB - forExperts - 6 * GiB, -3);
    }
    // Peers with room to spare take what is left, and the CPU gets nothing.
    const g = gpuFit(memory, 8, { count: 1, budgetGiB: 80 });
    if (g.kind !== "hybrid") throw new Error(g.kind);
    expect(g.peerBytes).toBeCloseTo(15.2 * GiB - forExperts, -3);
    expect(g.cpuBytes).toBe(0);
    // Without peers nothing goes to them; peers do not change a primary that holds everything or is too small.
    const h = gpuFit(memory, 8);
    if (h.kind !== "hybrid") throw new Error(h.kind);
    expect([h.peerBytes, h.peerShare]).toEqual([0, 0]);
    expect(gpuFit(memory, 24, { count: 2, budgetGiB: 8 }).kind).toBe("all");
    expect(gpuFit(memory, 1, { count: 2, budgetGiB: 8 }).kind).toBe("too-small");
  });

  it("says how much a too-small budget needs for the dense part", () => {
    const f = gpuFit(memory, 1);
    expect(f).toEqual({ kind: "too-small", neededBytes: 1.6 * GiB + workspaceAllowanceBytes });
  });
});
