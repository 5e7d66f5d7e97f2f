// --gpu: where a command runs the model (docs/CUDA.md, docs/CLI.md).
import { type GpuChoice, isGpuChoice } from "../runtime/options.js";
import { UsageError } from "./errors.js";

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
  const peers = value.split(",").map((p) => p.trim());
  for (const p of peers) {
    if (!/^cuda:(0|[1-9][0-9]?)$/.test(p))
      throw new UsageError(`--gpu-peers: expected cuda:N[,cuda:N...], got "${value}"`, usage);
  }
  const twice = peers.find((p, i) => peers.indexOf(p) !== i);
  if (twice !== undefined) throw new UsageError(`--gpu-peers: ${twice} is named twice`, usage);
  if (gpu === "cpu") throw new UsageError("--gpu-peers needs a GPU: it cannot go with --gpu cpu", usage);
  if (gpu !== undefined && peers.includes(gpu)) throw new UsageError(`--gpu-peers: ${gpu} is the primary device (--gpu)`, usage);
  return peers.join(",");
}

/** The --gpu-peer-budget value (GiB, already checked positive), which needs --gpu-peers. */
export function gpuPeerBudgetFlag(value: number | undefined, peers: string | undefined, usage: string): number | undefined {
  if (value !== undefined && peers === undefined) throw new UsageError("--gpu-peer-budget needs --gpu-peers", usage);
  return value;
}
