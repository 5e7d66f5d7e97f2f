// A hybrid-mode startup profile for the profile view's GPU figures, made from a
// real (CPU) profile: the GPU fields as the CUDA build writes them
// (docs/STARTUP_PROFILE.md stages 1, 9, 10, 11 and placement.layers), with a
// Qwen3-30B-A3B-like shape (48 MoE layers of 128 experts, a 16 GiB budget).
import type { StartupProfileJson } from "../app/shared/runtime-contract.js";

export const hybridShape = { layers: 48, experts: 128, expectedHitRate: 0.94, streamMinTokens: 37 };

export function hybridProfile(base: StartupProfileJson): StartupProfileJson {
  const { layers, experts } = hybridShape;
  const placement = Array.from({ length: layers }, (_, l) => {
    const gpu = 112 + ((l * 7) % 17);  // 112..128 cached experts per layer
    return {
      dense: false, gpu_experts: gpu, cpu_experts: experts - gpu,
      cached: Array.from({ length: gpu }, (_, i) => i), cpu_us_per_expert: 18 + (l % 5), copy_us_per_expert: 310,
      cold_expert: "compute on the CPU",
    };
  });
  const cached = placement.reduce((a, l) => a + l.gpu_experts, 0);
  const gpuDetail: Record<string, Record<string, unknown>> = {
    device_policy: {
      gpu_choice: "auto",
      gpu: { device: 0, name: "NVIDIA H200", compute_capability: "9.0", sm_count: 132, total_bytes: 150_754_820_096, free_bytes: 149_000_000_000 },
    },
    dense_weights: {
      placement: "gpu",
      gpu: { prefill_staging_gib: 0.31, device_free_gib: 138.77, budget_gib: 16, all_on_gpu_gib: 16.6, dense_kv_scratch_gib: 1.71, mode: "hybrid", expert_cache_budget_gib: 14.29 },
    },
    expert_tiers: {
      tiers: "gpu cache + ram (cpu expert pool)",
      gpu_cache: { gpu_experts: cached, cache_bytes: 15_340_000_000, copy_ms: 5100, copy_gbps: 3.0, cache_bytes_allocated: 15_340_000_000 },
    },
    calibration: {
      plan: "hybrid: hottest experts per byte on the GPU, the rest on the CPU pool", calibration_tokens: 412, calibration_prefill_ms: 460,
      cache_reshaped: true, expected_hit_rate: hybridShape.expectedHitRate, cpu_us_per_expert_mean: 20.1, copy_us_per_expert: 310,
      prefill_stream_min_tokens: hybridShape.streamMinTokens, cpu_us_per_expert_batch: 96.4, cpu_batch_tokens: 32, gpu_cache_bytes: 15_340_000_000,
    },
  };
  return {
    ...base,
    model: { ...base.model, name: "hybrid-30b-a3b-shaped", n_layer: layers, n_expert: experts },
    // Calibration's detail is replaced (a CPU load's "reason" does not apply); the others gain the GPU fields.
    stages: base.stages.map((s) => ({
      ...s, detail: s.name === "calibration" ? gpuDetail["calibration"]! : { ...s.detail, ...(gpuDetail[s.name] ?? {}) },
    })),
    placement: { layers: placement, device: "cuda:0" },
  };
}
