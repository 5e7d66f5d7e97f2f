// --gpu: where a command runs the model (docs/CUDA.md, docs/CLI.md).
import { type GpuChoice, isGpuChoice } from "../runtime/options.js";
import { checkGpuPeers } from "../../shared/runtime-contract.js";
import type { FlagSpecs } from "./args.js";
import { UsageError } from "./errors.js";

/** The GPU flags `guild run` and `guild serve` share (checked below). */
export const gpuFlagSpecs = {
  gpu: { type: "string" },
  "gpu-budget": { type: "number", above: 0 },
  "experts-cpu": { type: "boolean" },
  "gpu-peers": { type: "string" },
  "gpu-peer-budget": { type: "number", above: 0 },
} as const satisfies FlagSpecs;

/** The --gpu value checked, or undefined when the flag is absent. */
export function gpuFlag(value: string | undefined, usage: string): GpuChoice | undefined {
  if (value === undefined) return undefined;
  if (!isGpuChoice(value)) throw new UsageError(`--gpu: expected auto, cpu or cuda:N, got "${value}"`, usage);
  return value;
}

/**
 * The --gpu-peers value checked and normalized ("cuda:1, cuda:2" -> "cuda:1,cuda:2"), or undefined
 * when the flag is absent. `gpu` is the checked --gpu value: peers need a GPU, and the primary device
 * cannot be its own peer.
 */
export function gpuPeersFlag(value: string | undefined, gpu: GpuChoice | undefined, usage: string): string | undefined {
  if (value === undefined) return undefined;
  // An empty value is not "none" here: a flag given must name peers.
  const check = value.trim() === "" ? ({ ok: false, problem: "malformed" } as const) : checkGpuPeers(value, gpu);
  if (check.ok) return check.peers.join(",");
  if (check.problem === "malformed") throw new UsageError(`--gpu-peers: expected cuda:N[,cuda:N...], got "${value}"`, usage);
  if (check.problem === "twice") throw new UsageError(`--gpu-peers: ${check.entry} is named twice`, usage);
  if (check.problem === "primary") throw new UsageError(`--gpu-peers: ${check.entry} is the primary device (--gpu)`, usage);
  throw new UsageError("--gpu-peers needs a GPU: it cannot go with --gpu cpu", usage);
}

/** The --gpu-peer-budget value (GiB, already checked positive), which needs --gpu-peers. */
export function gpuPeerBudgetFlag(value: number | undefined, peers: string | undefined, usage: string): number | undefined {
  if (value !== undefined && peers === undefined) throw new UsageError("--gpu-peer-budget needs --gpu-peers", usage);
  return value;
}
