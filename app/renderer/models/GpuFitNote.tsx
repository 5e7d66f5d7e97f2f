// One line under the memory estimate: how the inspected model would sit in the
// GPU budget typed in the load settings (gpu-fit.ts).
import type { MemoryEstimate } from "../../shared/app-contract.js";
import { formatBytes } from "../common/format.js";
import { gpuFit } from "./gpu-fit.js";

export function GpuFitNote({ memory, budgetGiB }: { memory: MemoryEstimate; budgetGiB: number | null }) {
  if (budgetGiB === null) {
    return <p className="fit-note" data-testid="gpu-fit">Type a GPU memory budget in the load settings to see how this model would be split.</p>;
  }
  const fit = gpuFit(memory, budgetGiB);
  const text =
    fit.kind === "all" ? `With ${budgetGiB} GiB on the GPU everything fits (about ${formatBytes(fit.spareBytes)} to spare).`
    : fit.kind === "hybrid" ? `With ${budgetGiB} GiB on the GPU: dense weights and KV cache there, about ${Math.round(fit.cachedShare * 100)} % of the expert bytes cached; ${formatBytes(fit.cpuBytes)} of experts stay in RAM for the CPU (the most used ones go to the GPU).`
    : `${budgetGiB} GiB is too small: the dense weights, KV cache and workspace need about ${formatBytes(fit.neededBytes)} (the load would fall back to the CPU under Auto).`;
  return <p className="fit-note" data-testid="gpu-fit">{text} An estimate; the startup profile shows the real plan.</p>;
}
