// Where a model would go before it is loaded: its weights (dense and routed
// experts, from the inspect summary), one session's KV cache for the context and
// KV precision typed in the load settings, and the device choice, GPU budget and
// experts-on-CPU setting, placed on the GPU or in RAM and compared with what the
// machine has free. Pure: the Models page recomputes it as settings are typed,
// and ModelManager uses the same numbers to refuse a load before it unloads the
// current model. An estimate (the runtime also reserves workspace and picks the
// cached experts by measured use); the startup profile shows the real plan.

const GiB = 2 ** 30;
/** What a GPU load keeps for activations and the prefill staging area, roughly (as gpu-fit.ts). */
export const gpuWorkspaceBytes = 0.5 * GiB;
/** The default GPU budget leaves this much of the device's free memory alone (docs/CUDA.md). */
export const gpuReserveBytes = 1 * GiB;
/** The context the runtime uses when none is given: min(trained, this). */
export const defaultPlanContext = 4096;

/** The facts of a model file the plan needs (ModelSummary carries them). */
export interface ModelShape {
  layers: number;
  contextLength: number;
  denseBytes: number;
  expertBytes: number;
  /** KV heads and their key/value widths: the KV cache is layers × tokens × headsKv × (key + value) elements. */
  headsKv: number;
  keyLength: number;
  valueLength: number;
}

export interface GpuFacts {
  /** "cuda:0" */
  device: string;
  name: string;
  totalBytes: number;
  /** Free device memory when it was last measured (the last load's startup profile). */
  freeBytes: number;
}

export interface MachineFacts {
  /** What the OS says a new allocation can get now (MemAvailable, within a cgroup limit). */
  ramAvailableBytes: number;
  ramTotalBytes: number;
  /** The CUDA devices seen by the last load (empty: none, or no load has looked yet). */
  gpus: GpuFacts[];
  /** Why there is no GPU, in the runtime's words ("this build has no CUDA backend"), when none is listed. */
  gpuNote: string;
}

/** The load settings the plan depends on (a subset of ModelLoadSettings). */
export interface PlanSettings {
  contextSize?: number;
  kvCacheType?: "f16" | "f32";
  gpu?: string;
  gpuBudgetGiB?: number;
  expertsOnCpu?: boolean;
}

export type Where = "gpu" | "ram";

export interface PlanPart {
  what: "dense" | "kv" | "workspace" | "experts";
  label: string;
  bytes: number;
  where: Where;
}

export interface MemoryPlan {
  contextSize: number;
  kvCacheType: "f16" | "f32";
  kvCacheBytes: number;
  /** The GPU the plan uses, or null: everything in RAM. */
  gpu: GpuFacts | null;
  /** The budget on that GPU (typed, or its free memory less 1 GiB). */
  gpuBudgetBytes: number | null;
  /** Of the expert bytes, the share on the GPU (0..1). */
  expertGpuShare: number;
  parts: PlanPart[];
  gpuBytes: number;
  ramBytes: number;
  ramAvailableBytes: number;
  /** One sentence: where things go. */
  summary: string;
  /** Plain sentences for what does not fit (empty when it all does). */
  warnings: string[];
  /** False when the RAM part exceeds the RAM available now. */
  fitsRam: boolean;
}

/** The KV cache of one session: f16 = 2 bytes an element, f32 = 4. */
export function kvCacheBytes(shape: ModelShape, contextSize: number, kvCacheType: "f16" | "f32"): number {
  const perElement = kvCacheType === "f32" ? 4 : 2;
  return Math.round(shape.layers * contextSize * shape.headsKv * (shape.keyLength + shape.valueLength) * perElement);
}

/** The context a load with these settings gets: the typed one, else min(trained, 4096). */
export function planContext(shape: ModelShape, contextSize: number | undefined): number {
  if (contextSize !== undefined && contextSize > 0) return contextSize;
  return Math.min(shape.contextLength > 0 ? shape.contextLength : defaultPlanContext, defaultPlanContext);
}

function gib(bytes: number): string {
  const v = bytes / GiB;
  if (v >= 10) return `${v.toFixed(0)} GiB`;
  if (v >= 1) return `${v.toFixed(1)} GiB`;
  const mib = bytes / 2 ** 20;
  return mib >= 10 ? `${mib.toFixed(0)} MiB` : `${mib.toFixed(1)} MiB`;
}

/** The GPU a load would use: none for "cpu"; "cuda:N" that device; auto the first one known. */
function chosenGpu(machine: MachineFacts, gpu: string | undefined): GpuFacts | null {
  if (gpu === "cpu") return null;
  if (gpu !== undefined && gpu.startsWith("cuda:")) return machine.gpus.find((g) => g.device === gpu) ?? null;
  return machine.gpus[0] ?? null;
}

export function planMemory(shape: ModelShape, settings: PlanSettings, machine: MachineFacts): MemoryPlan {
  const contextSize = planContext(shape, settings.contextSize);
  const kvCacheType = settings.kvCacheType ?? "f16";
  const kv = kvCacheBytes(shape, contextSize, kvCacheType);
  const kvLabel = `KV cache (${contextSize.toLocaleString("en-US")} tokens, ${kvCacheType})`;
  const warnings: string[] = [];
  let gpu = chosenGpu(machine, settings.gpu);
  if (settings.gpu !== undefined && settings.gpu.startsWith("cuda:") && gpu === null)
    warnings.push(machine.gpus.length === 0
      ? `${settings.gpu} is not known to be usable here (${machine.gpuNote || "no CUDA device was seen"}): the load would fail.`
      : `There is no ${settings.gpu} (this machine has ${machine.gpus.map((g) => g.device).join(", ")}): the load would fail.`);
  let budget: number | null = null;
  let parts: PlanPart[];
  let share = 0;
  let summary: string;
  if (gpu !== null) {
    budget = settings.gpuBudgetGiB !== undefined ? settings.gpuBudgetGiB * GiB : Math.max(0, gpu.freeBytes - gpuReserveBytes);
    const base = shape.denseBytes + kv + gpuWorkspaceBytes;
    if (budget < base) {
      warnings.push(`The GPU budget (${gib(budget)}) is smaller than the dense weights, KV cache and workspace (${gib(base)}): under Auto the load falls back to the CPU.`);
      if (settings.gpu === undefined || settings.gpu === "auto") gpu = null;
    }
  }
  if (gpu !== null && budget !== null) {
    const forExperts = settings.expertsOnCpu ? 0 : Math.max(0, budget - shape.denseBytes - kv - gpuWorkspaceBytes);
    const onGpu = Math.min(shape.expertBytes, forExperts);
    share = shape.expertBytes > 0 ? onGpu / shape.expertBytes : 1;
    // The same order as on the CPU (dense, experts, KV), the GPU's workspace last.
    parts = [{ what: "dense", label: "Dense weights", bytes: shape.denseBytes, where: "gpu" }];
    if (onGpu > 0) parts.push({ what: "experts", label: share >= 1 ? "Experts" : `Experts, cached (${Math.round(share * 100)} %)`, bytes: onGpu, where: "gpu" });
    if (shape.expertBytes - onGpu > 0)
      parts.push({ what: "experts", label: onGpu > 0 ? `Experts, the rest (${100 - Math.round(share * 100)} %, computed by the CPU)` : "Experts (computed by the CPU)", bytes: shape.expertBytes - onGpu, where: "ram" });
    parts.push({ what: "kv", label: kvLabel, bytes: kv, where: "gpu" }, { what: "workspace", label: "Workspace", bytes: gpuWorkspaceBytes, where: "gpu" });
    summary = settings.expertsOnCpu
      ? `Dense weights and KV cache on ${gpu.device} (${gpu.name}); every expert in RAM, computed by the CPU.`
      : share >= 1 ? `Everything on ${gpu.device} (${gpu.name}).`
      : `Dense weights, KV cache and ${Math.round(share * 100)} % of the expert bytes on ${gpu.device} (${gpu.name}); the other experts in RAM, computed by the CPU.`;
  } else {
    parts = [
      { what: "dense", label: "Dense weights", bytes: shape.denseBytes, where: "ram" },
      { what: "experts", label: "Experts", bytes: shape.expertBytes, where: "ram" },
      { what: "kv", label: kvLabel, bytes: kv, where: "ram" },
    ];
    summary = settings.gpu === "cpu" ? "Everything in RAM, computed by the CPU (device CPU)."
      : machine.gpus.length === 0 ? `Everything in RAM, computed by the CPU (${machine.gpuNote || "no GPU seen"}).`
      : "Everything in RAM, computed by the CPU.";
  }
  const sum = (w: Where) => parts.filter((p) => p.where === w).reduce((a, p) => a + p.bytes, 0);
  const gpuBytes = sum("gpu");
  const ramBytes = sum("ram");
  const fitsRam = ramBytes <= machine.ramAvailableBytes;
  if (!fitsRam) warnings.push(`It needs about ${gib(ramBytes)} of RAM; ${gib(machine.ramAvailableBytes)} is available now.`);
  if (gpu !== null && budget !== null && gpuBytes > gpu.freeBytes)
    warnings.push(`It needs about ${gib(gpuBytes)} on ${gpu.device}, which had ${gib(gpu.freeBytes)} free at the last load.`);
  return {
    contextSize, kvCacheType, kvCacheBytes: kv, gpu, gpuBudgetBytes: gpu ? budget : null, expertGpuShare: share,
    parts, gpuBytes, ramBytes, ramAvailableBytes: machine.ramAvailableBytes, summary, warnings, fitsRam,
  };
}
