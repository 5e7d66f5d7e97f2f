// How a model would sit in a GPU memory budget, from the inspect estimate
// (docs/CUDA.md, "Hybrid MoE"): the dense weights and the KV cache go first,
// the rest of the budget caches experts, the other experts stay in RAM for the
// CPU. An estimate for choosing a budget, not the runtime's plan (which also
// reserves workspace and a staging area, and picks experts by measured use).
import type { MemoryEstimate } from "../../shared/app-contract.js";

export type GpuFit =
  | { kind: "all"; spareBytes: number }
  | { kind: "hybrid"; cachedShare: number; cpuBytes: number }
  | { kind: "too-small"; neededBytes: number };

const GiB = 2 ** 30;
/** What the runtime keeps for activations and the prefill staging area, roughly. */
export const workspaceAllowanceBytes = 0.5 * GiB;

export function gpuFit(memory: MemoryEstimate, budgetGiB: number): GpuFit {
  const budget = budgetGiB * GiB;
  const base = memory.denseBytes + memory.kvCacheBytes + workspaceAllowanceBytes;
  if (budget < base) return { kind: "too-small", neededBytes: base };
  const forExperts = budget - base;
  if (forExperts >= memory.expertBytes) return { kind: "all", spareBytes: forExperts - memory.expertBytes };
  return {
    kind: "hybrid",
    cachedShare: memory.expertBytes > 0 ? forExperts / memory.expertBytes : 1,
    cpuBytes: memory.expertBytes - forExperts,
  };
}
