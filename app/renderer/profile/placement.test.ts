import { describe, expect, it } from "vitest";

import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { deviceHint, formatGiB, formatRate, formatUs, summarizePlacement } from "./placement.js";

const stage = (name: string, detail: Record<string, unknown>) => ({ name, start_ms: 0, end_ms: 1, duration_ms: 1, bytes: 0, detail });

// As the CUDA build writes it for a 16 GiB budget (docs/STARTUP_PROFILE.md stages 1, 9, 10, 11).
const hybrid: StartupProfileJson = {
  schema: "guild.startup-profile/1", model: { name: "m", n_layer: 3, n_expert: 8 }, machine: { gpus: [] },
  stages: [
    stage("device_policy", { gpu_choice: "auto", gpu: { device: 0, name: "NVIDIA H200", compute_capability: "9.0", sm_count: 132, total_bytes: 150_000_000_000, free_bytes: 149_000_000_000 } }),
    stage("dense_weights", { placement: "gpu", gpu: {
      prefill_staging_gib: 0.25, device_free_gib: 138.7, budget_gib: 16, all_on_gpu_gib: 16.6, dense_kv_scratch_gib: 1.7,
      mode: "hybrid", expert_cache_budget_gib: 14.3,
    } }),
    stage("expert_tiers", { tiers: "gpu cache + ram (cpu expert pool)", gpu_cache: { gpu_experts: 9, cache_bytes: 9437184, copy_ms: 3.5, copy_gbps: 2.7, cache_bytes_allocated: 9437184 } }),
    stage("calibration", {
      plan: "hybrid: hottest experts per byte on the GPU, the rest on the CPU pool", calibration_tokens: 412, calibration_prefill_ms: 80.5,
      cache_reshaped: true, expected_hit_rate: 0.94, cpu_us_per_expert_mean: 21.5, copy_us_per_expert: 310, prefill_stream_min_tokens: 37,
      held_out_hit_rate: 0.91, prefill_planned_miss_rate: 0.09,
      cpu_us_per_expert_batch: 95.5, cpu_batch_tokens: 32, gpu_cache_bytes: 9437184, gpu_us_per_expert: 3.2,
      gpu_host_us_per_expert: 59.4, gpu_host_choices: 2,
      peers: [{
        device: "cuda:1", experts: 12, cache_bytes: 1, expected_hit_rate: 0.4, copy_us_per_expert: 27.6, token_round_trip_us: 59.7,
        activation_copies_us: 14.5, compute_us_per_expert: 5.65, cpu_us_saved_per_layer: 68.8, pays_off: true,
      }, "not a peer"],
    }),
  ],
  fallbacks: [],
  placement: {
    device: "cuda:0",
    layers: [
      { dense: true, gpu_experts: 0, cpu_experts: 0 },
      { dense: false, gpu_experts: 5, cpu_experts: 3, cached: [0, 2, 3, 6, 7], cpu_us_per_expert: 20, copy_us_per_expert: 310, cold_expert: "compute on the CPU" },
      { dense: false, gpu_experts: 4, cpu_experts: 4, cached: [1, 2, 4, 5], cpu_us_per_expert: 23, copy_us_per_expert: 310, cold_expert: "compute on the CPU" },
    ],
  },
  total_ms: 4,
};

describe("summarizePlacement", () => {
  it("reads a hybrid profile: per-layer GPU/CPU experts, budget arithmetic, cache fill and calibration", () => {
    const s = summarizePlacement(hybrid);
    expect(s.device).toBe("cuda:0");
    expect(s.gpu).toEqual({ device: 0, name: "NVIDIA H200", computeCapability: "9.0", totalBytes: 150_000_000_000, freeBytes: 149_000_000_000 });
    expect(s.gpuNote).toBeNull();
    expect(s.layers.map((l) => [l.dense, l.gpu, l.cpu])).toEqual([[true, 0, 0], [false, 5, 3], [false, 4, 4]]);
    expect(s.layers[1]).toMatchObject({ index: 1, cached: [0, 2, 3, 6, 7], cpuUsPerExpert: 20, copyUsPerExpert: 310, coldExpert: "compute on the CPU" });
    expect(s.layers[0]).toMatchObject({ cached: null, cpuUsPerExpert: null });
    expect([s.gpuExperts, s.cpuExperts, s.maxLayerExperts]).toEqual([9, 7, 8]);
    expect(s.budget).toEqual({
      deviceFreeGiB: 138.7, budgetGiB: 16, allOnGpuGiB: 16.6, denseKvScratchGiB: 1.7, prefillStagingGiB: 0.25,
      expertCacheGiB: 14.3, mode: "hybrid", error: null,
    });
    expect(s.cacheFill).toEqual({ gpuExperts: 9, cacheBytes: 9437184, copyMs: 3.5, copyGbps: 2.7 });
    expect(s.calibration).toEqual({
      plan: "hybrid: hottest experts per byte on the GPU, the rest on the CPU pool", reason: null, tokens: 412, prefillMs: 80.5,
      cacheReshaped: true, expectedHitRate: 0.94, cpuUsPerExpert: 21.5, cpuUsPerExpertBatch: 95.5, cpuBatchTokens: 32,
      copyUsPerExpert: 310, gpuUsPerExpert: 3.2, gpuHostUsPerExpert: 59.4, gpuHostChoices: 2, prefillStreamMinTokens: 37,
      heldOutHitRate: 0.91, prefillPlannedMissRate: 0.09,
      peers: [{
        device: "cuda:1", experts: 12, expectedHitRate: 0.4, roundTripUs: 59.7, activationCopiesUs: 14.5, computeUsPerExpert: 5.65,
        cpuUsSavedPerLayer: 68.8, paysOff: true,
      }],
    });
  });

  it("reads a CPU-only profile: every expert on the CPU, the reason there is no GPU, no budget", () => {
    const s = summarizePlacement({
      ...hybrid,
      stages: [
        stage("device_policy", { gpu_choice: "auto", gpu: "this build has no CUDA backend" }),
        stage("dense_weights", { placement: "cpu (mapped)", output_tied: false }),
        stage("expert_tiers", { tiers: "ram (cpu expert pool)" }),
        stage("calibration", { plan: "all experts on the CPU", reason: "no GPU: nothing to place", gpu_cache_bytes: 0 }),
      ],
      placement: { layers: [{ gpu_experts: 0, cpu_experts: 8, dense: false }, { gpu_experts: 0, cpu_experts: 8, dense: false }] },
    });
    expect(s).toMatchObject({ device: "cpu", gpu: null, gpuNote: "this build has no CUDA backend", gpuExperts: 0, cpuExperts: 16, maxLayerExperts: 8, budget: null, cacheFill: null });
    expect(s.calibration).toMatchObject({ plan: "all experts on the CPU", reason: "no GPU: nothing to place", expectedHitRate: null, cpuUsPerExpertBatch: null, prefillStreamMinTokens: null, heldOutHitRate: null, prefillPlannedMissRate: null });
  });

  it("keeps a GPU that was given up (auto fell back) as the CPU, with the error", () => {
    const s = summarizePlacement({
      ...hybrid,
      stages: [hybrid.stages[0]!, stage("dense_weights", { placement: "cpu (mapped)", gpu: { budget_gib: 0.001, dense_kv_scratch_gib: 1.7, error: "GPU budget of 0.00 GiB cannot hold …" } })],
      placement: { layers: [{ gpu_experts: 0, cpu_experts: 8 }] },
    });
    expect(s.device).toBe("cpu");
    expect(s.budget).toMatchObject({ budgetGiB: 0.001, mode: null, error: "GPU budget of 0.00 GiB cannot hold …" });
  });

  it("tolerates a hand-edited or truncated profile", () => {
    const s = summarizePlacement({ ...hybrid, stages: [], placement: { layers: [{ gpu_experts: "x", cpu_experts: -3, cached: [1, "a", 2.5, 4] }] as never } });
    expect(s.layers).toEqual([{ index: 0, dense: false, gpu: 0, cpu: 0, cached: [1, 4], cpuUsPerExpert: null, copyUsPerExpert: null, coldExpert: null }]);
    expect(s.maxLayerExperts).toBe(1);
    expect(summarizePlacement({ ...hybrid, placement: {} }).layers).toEqual([]);
  });
});

describe("deviceHint", () => {
  it("names the GPU a load used, or why it ran on the CPU", () => {
    expect(deviceHint(hybrid)).toBe("runs on NVIDIA H200 (cuda:0)");
    expect(deviceHint({ ...hybrid, stages: [stage("device_policy", { gpu: "this build has no CUDA backend" })], placement: {} }))
      .toBe("runs on the CPU: this build has no CUDA backend");
    expect(deviceHint({ ...hybrid, stages: [stage("device_policy", { gpu: "not used (gpu = cpu)" })], placement: {} }))
      .toBe("runs on the CPU: not used (gpu = cpu)");
    expect(deviceHint({ ...hybrid, stages: [hybrid.stages[0]!, stage("dense_weights", { gpu: { error: "budget too small" } })], placement: {} }))
      .toBe("runs on the CPU: the GPU was given up (budget too small)");
  });
});

describe("placement figures", () => {
  it("formats GiB, microseconds and rates", () => {
    expect([formatGiB(14.3), formatGiB(null), formatGiB(138.7)]).toEqual(["14.30 GiB", "—", "139 GiB"]);
    expect([formatUs(21.54), formatUs(310)]).toEqual(["21.5 µs", "310 µs"]);
    expect([formatRate(0.94), formatRate(1), formatRate(0), formatRate(0.4213)]).toEqual(["94.0 %", "100 %", "0 %", "42.1 %"]);
  });
});
