// How a model would sit in a GPU memory budget, from the inspect estimate
// (docs/CUDA.md, "Hybrid MoE"): the dense weights and the KV cache go first,
// the rest of the budget caches experts, the other experts stay in RAM for the
// CPU. With peer GPUs of a typed budget, the experts the primary does not hold
// fill the peers' budgets next (docs/CUDA.md, "Several GPUs"). An estimate for
// choosing a budget, not the runtime's plan (which also reserves workspace and a
// staging area, and picks experts by measured use).
import type { MemoryEstimate } from "../../shared/app-contract.js";

export type GpuFit =
  | { kind: "all"; spareBytes: number }
  /** cachedShare: of the expert bytes on the primary GPU; peerShare / peerBytes: on the peers together. */
  | { kind: "hybrid"; cachedShare: number; peerShare: number; peerBytes: number; cpuBytes: number }
  | { kind: "too-small"; neededBytes: number };

const GiB = 2 ** 30;
/** What the runtime keeps for activations and the prefill staging area, roughly. */
export const workspaceAllowanceBytes = 0.5 * GiB;

/** Peer GPUs counted in the estimate: how many, and each one's expert-cache budget. */
export interface PeerBudget { count: number; budgetGiB: number }

export function gpuFit(memory: MemoryEstimate, budgetGiB: number, peers?: PeerBudget): GpuFit {
  const budget = budgetGiB * GiB;
  const base = memory.denseBytes + memory.kvCacheBytes + workspaceAllowanceBytes;
  if (budget < base) return { kind: "too-small", neededBytes: base };
  const forExperts = budget - base;
  if (forExperts >= memory.expertBytes) return { kind: "all", spareBytes: forExperts - memory.expertBytes };
  const left = memory.expertBytes - forExperts;
  const peerBytes = peers ? Math.min(left, peers.count * peers.budgetGiB * GiB) : 0;
  return {
    kind: "hybrid",
    cachedShare: forExperts / memory.expertBytes,
    peerShare: peerBytes / memory.expertBytes,
    peerBytes,
    cpuBytes: left - peerBytes,
  };
}
