// The expert placement of a startup profile, read defensively (a profile may come
// from a file): per layer GPU and CPU experts, and with a GPU the budget
// arithmetic (stage dense_weights), the first cache fill (expert_tiers) and the
// calibration figures (calibration). docs/STARTUP_PROFILE.md, docs/CUDA.md.
import type { StartupProfileJson } from "../../shared/runtime-contract.js";

export interface LayerPlacement {
  index: number;
  /** A layer without routed experts. */
  dense: boolean;
  gpu: number;
  cpu: number;
  /** The expert ids cached on the GPU (hybrid mode only). */
  cached: number[] | null;
  cpuUsPerExpert: number | null;
  copyUsPerExpert: number | null;
  /** What the runtime does with an uncached expert ("compute on the CPU", …). */
  coldExpert: string | null;
}

export interface GpuDevice {
  device: number | null;
  name: string;
  computeCapability: string | null;
  totalBytes: number | null;
  freeBytes: number | null;
}

/** Stage dense_weights, detail `gpu`: how the budget was spent. */
export interface GpuBudget {
  deviceFreeGiB: number | null;
  budgetGiB: number | null;
  allOnGpuGiB: number | null;
  denseKvScratchGiB: number | null;
  prefillStagingGiB: number | null;
  expertCacheGiB: number | null;
  mode: string | null;
  error: string | null;
}

/** Stage expert_tiers, detail `gpu_cache`: the first fill of the expert caches. */
export interface GpuCacheFill {
  gpuExperts: number | null;
  cacheBytes: number | null;
  copyMs: number | null;
  copyGbps: number | null;
}

/** Stage calibration's detail. */
export interface Calibration {
  plan: string | null;
  reason: string | null;
  tokens: number | null;
  prefillMs: number | null;
  cacheReshaped: boolean | null;
  expectedHitRate: number | null;
  cpuUsPerExpert: number | null;
  /** One expert's CPU cost for a batch of cpuBatchTokens tokens (the streaming rule's batch cost). */
  cpuUsPerExpertBatch: number | null;
  cpuBatchTokens: number | null;
  copyUsPerExpert: number | null;
  /** One token's cached experts on the GPU, per expert (measured with CUDA events). */
  gpuUsPerExpert: number | null;
  /** The GPU reading one of the CPU's experts from page-locked host memory. */
  gpuHostUsPerExpert: number | null;
  /** Per token and layer, how many of the CPU's choices the GPU takes (reading host memory). */
  gpuHostChoices: number | null;
  /** The calibration plan's hit rate on the second half of the text (fit on the first). */
  heldOutHitRate: number | null;
  /** The miss rate the prefill rule plans for: held-out, at least even routing's. */
  prefillPlannedMissRate: number | null;
  /** Prefill steps of at least this many tokens stream the experts to the GPU; 0 = never. */
  prefillStreamMinTokens: number | null;
  /** Peer GPUs (issue #10): what each caches and what a token's round trip through it costs. */
  peers: PeerCalibration[];
}

export interface PeerCalibration {
  device: string | null;
  experts: number | null;
  expectedHitRate: number | null;
  /** One token: activations over, k of its experts, output back. */
  roundTripUs: number | null;
  activationCopiesUs: number | null;
  computeUsPerExpert: number | null;
  /** CPU time per layer the peer's share of the choices would cost. */
  cpuUsSavedPerLayer: number | null;
  paysOff: boolean | null;
}

export interface PlacementSummary {
  /** "cuda:N" when the model runs on a GPU, else "cpu". */
  device: string;
  /** The GPU used (stage device_policy), or null. */
  gpu: GpuDevice | null;
  /** Why no GPU is used, as the runtime says it (stage device_policy), or null. */
  gpuNote: string | null;
  layers: LayerPlacement[];
  gpuExperts: number;
  cpuExperts: number;
  /** The most experts in one layer (the scale of the per-layer bars). */
  maxLayerExperts: number;
  budget: GpuBudget | null;
  cacheFill: GpuCacheFill | null;
  calibration: Calibration | null;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const count = (v: unknown): number => Math.max(0, Math.round(num(v) ?? 0));

function detailOf(p: StartupProfileJson, stage: string): Obj | null {
  const d = p.stages.find((s) => s.name === stage)?.detail;
  return isObj(d) ? d : null;
}

function readLayer(v: unknown, index: number): LayerPlacement {
  const l = isObj(v) ? v : {};
  const cached = Array.isArray(l["cached"]) ? l["cached"].filter((id): id is number => Number.isInteger(id)) : null;
  return {
    index, dense: l["dense"] === true, gpu: count(l["gpu_experts"]), cpu: count(l["cpu_experts"]), cached,
    cpuUsPerExpert: num(l["cpu_us_per_expert"]), copyUsPerExpert: num(l["copy_us_per_expert"]), coldExpert: str(l["cold_expert"]),
  };
}

function readGpu(v: unknown): GpuDevice | null {
  if (!isObj(v) || typeof v["name"] !== "string") return null;
  return {
    device: num(v["device"]), name: v["name"], computeCapability: str(v["compute_capability"]),
    totalBytes: num(v["total_bytes"]), freeBytes: num(v["free_bytes"]),
  };
}

function readBudget(v: unknown): GpuBudget | null {
  if (!isObj(v)) return null;
  return {
    deviceFreeGiB: num(v["device_free_gib"]), budgetGiB: num(v["budget_gib"]), allOnGpuGiB: num(v["all_on_gpu_gib"]),
    denseKvScratchGiB: num(v["dense_kv_scratch_gib"]), prefillStagingGiB: num(v["prefill_staging_gib"]),
    expertCacheGiB: num(v["expert_cache_budget_gib"]), mode: str(v["mode"]), error: str(v["error"]),
  };
}

function readCacheFill(v: unknown): GpuCacheFill | null {
  if (!isObj(v)) return null;
  return { gpuExperts: num(v["gpu_experts"]), cacheBytes: num(v["cache_bytes"]), copyMs: num(v["copy_ms"]), copyGbps: num(v["copy_gbps"]) };
}

function readCalibration(d: Obj | null): Calibration | null {
  if (!d) return null;
  return {
    plan: str(d["plan"]), reason: str(d["reason"]), tokens: num(d["calibration_tokens"]), prefillMs: num(d["calibration_prefill_ms"]),
    cacheReshaped: typeof d["cache_reshaped"] === "boolean" ? d["cache_reshaped"] : null,
    expectedHitRate: num(d["expected_hit_rate"]), cpuUsPerExpert: num(d["cpu_us_per_expert_mean"]),
    cpuUsPerExpertBatch: num(d["cpu_us_per_expert_batch"]), cpuBatchTokens: num(d["cpu_batch_tokens"]),
    copyUsPerExpert: num(d["copy_us_per_expert"]), gpuUsPerExpert: num(d["gpu_us_per_expert"]),
    gpuHostUsPerExpert: num(d["gpu_host_us_per_expert"]), gpuHostChoices: num(d["gpu_host_choices"]),
    heldOutHitRate: num(d["held_out_hit_rate"]), prefillPlannedMissRate: num(d["prefill_planned_miss_rate"]),
    prefillStreamMinTokens: num(d["prefill_stream_min_tokens"]),
    peers: Array.isArray(d["peers"]) ? d["peers"].filter(isObj).map(readPeer) : [],
  };
}

function readPeer(v: Obj): PeerCalibration {
  return {
    device: str(v["device"]), experts: num(v["experts"]), expectedHitRate: num(v["expected_hit_rate"]),
    roundTripUs: num(v["token_round_trip_us"]), activationCopiesUs: num(v["activation_copies_us"]),
    computeUsPerExpert: num(v["compute_us_per_expert"]), cpuUsSavedPerLayer: num(v["cpu_us_saved_per_layer"]),
    paysOff: typeof v["pays_off"] === "boolean" ? v["pays_off"] : null,
  };
}

export function summarizePlacement(p: StartupProfileJson): PlacementSummary {
  const rawLayers: unknown = p.placement?.layers;
  const layers = Array.isArray(rawLayers) ? rawLayers.map(readLayer) : [];
  const devicePolicy = detailOf(p, "device_policy");
  const gpuDetail = devicePolicy?.["gpu"];
  const placementDevice = str(p.placement?.["device"]);
  return {
    device: placementDevice ?? "cpu",
    gpu: readGpu(gpuDetail),
    gpuNote: str(gpuDetail),
    layers,
    gpuExperts: layers.reduce((a, l) => a + l.gpu, 0),
    cpuExperts: layers.reduce((a, l) => a + l.cpu, 0),
    maxLayerExperts: Math.max(1, ...layers.map((l) => l.gpu + l.cpu)),
    budget: readBudget(detailOf(p, "dense_weights")?.["gpu"]),
    cacheFill: readCacheFill(detailOf(p, "expert_tiers")?.["gpu_cache"]),
    calibration: readCalibration(detailOf(p, "calibration")),
  };
}

/** "1.23 GiB"-style figure for GiB values the runtime reports as fractions. */
export function formatGiB(v: number | null): string {
  return v === null ? "—" : `${v.toFixed(v >= 100 ? 0 : 2)} GiB`;
}

/** "12.3 µs" for microseconds. */
export function formatUs(v: number | null): string {
  return v === null ? "—" : `${v.toFixed(v >= 100 ? 0 : 1)} µs`;
}

/** "94 %" for a 0..1 rate. */
export function formatRate(v: number | null): string {
  return v === null ? "—" : `${(v * 100).toFixed(v >= 0.995 || v === 0 ? 0 : 1)} %`;
}

/** Where a load ran, in one line for the Models page's GPU settings (from stage device_policy and the placement). */
export function deviceHint(p: StartupProfileJson): string {
  const s = summarizePlacement(p);
  if (s.device !== "cpu") return `runs on ${s.gpu ? `${s.gpu.name} (${s.device})` : s.device}`;
  if (s.budget?.error) return `runs on the CPU: the GPU was given up (${s.budget.error})`;
  return `runs on the CPU${s.gpuNote ? `: ${s.gpuNote}` : ""}`;
}
