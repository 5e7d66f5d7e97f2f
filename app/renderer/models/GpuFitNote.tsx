// One line under the memory estimate: how the inspected model would sit in the
// GPU budget typed in the load settings, and in the peer GPUs' budgets when one
// is typed for them (gpu-fit.ts).
import type { MemoryEstimate } from "../../shared/app-contract.js";
import { formatBytes } from "../common/format.js";
import { gpuFit } from "./gpu-fit.js";

interface Props {
  memory: MemoryEstimate;
  budgetGiB: number | null;
  /** The peer GPUs sent with the load, and their budget (null = automatic, not counted); null = none. */
  peers?: { count: number; budgetGiB: number | null } | null;
}

export function GpuFitNote({ memory, budgetGiB, peers = null }: Props) {
  if (budgetGiB === null) {
    return <p className="fit-note" data-testid="gpu-fit">Type a GPU memory budget in the load settings to see how this model would be split.</p>;
  }
  const counted = peers && peers.budgetGiB !== null ? { count: peers.count, budgetGiB: peers.budgetGiB } : undefined;
  const fit = gpuFit(memory, budgetGiB, counted);
  const pct = (share: number) => `${Math.round(share * 100)} %`;
  const peerPart = fit.kind === "hybrid" && counted
    ? `, ${pct(fit.peerShare)} on the ${counted.count === 1 ? "peer GPU" : `${counted.count} peer GPUs`} (${counted.count} × ${counted.budgetGiB} GiB)` : "";
  const cpuPart = fit.kind === "hybrid" && fit.cpuBytes <= 0 ? "no experts are left for the CPU"
    : fit.kind === "hybrid" ? `${formatBytes(fit.cpuBytes)} of experts stay in RAM for the CPU (the most used ones go to the ${counted ? "GPUs" : "GPU"})` : "";
  const text =
    fit.kind === "all" ? `With ${budgetGiB} GiB on the GPU everything fits (about ${formatBytes(fit.spareBytes)} to spare).`
    : fit.kind === "hybrid" ? `With ${budgetGiB} GiB on the GPU: dense weights and KV cache there, about ${pct(fit.cachedShare)} of the expert bytes cached${peerPart}; ${cpuPart}.`
    : `${budgetGiB} GiB is too small: the dense weights, KV cache and workspace need about ${formatBytes(fit.neededBytes)} (the load would fall back to the CPU under Auto).`;
  const uncounted = fit.kind === "hybrid" && peers && !counted ? " The peer GPUs are not counted: type a peer budget to include them." : "";
  return <p className="fit-note" data-testid="gpu-fit">{text}{uncounted} An estimate; the startup profile shows the real plan.</p>;
}
