#!/usr/bin/env bash
# Hybrid MoE benchmark on the GPU machine (docs/PERFORMANCE.md, "GPU"):
#
#   scripts/gpu/bench_hybrid.sh OUT_DIR [MODEL.gguf]
#
# Needs a GUILD_CUDA build in build-gpu/ (scripts/gpu/run_gpu_suite.sh makes
# one; override: GUILD_GPU_BUILD_DIR). Without MODEL it generates the
# synthetic Qwen3-30B-A3B-shaped model (guild-gen-model --preset
# qwen3-30b-a3b, ~16 GiB) in $GUILD_BENCH_MODEL_DIR (default /tmp).
# Runs guild-bench (512-token prompt, 128 decode tokens) in five
# configurations — all on the GPU; GPU budget 16 GiB; 8 GiB; every expert on
# the CPU; CPU only — and writes one JSON per configuration plus
# OUT_DIR/hybrid-bench.txt (a table), printed last. GUILD_BENCH_CONFIGS picks
# configurations (space separated). Variants for measuring one path against
# another: budget-{16g,8g}-stream / -cpu force streamed prefill / CPU experts
# in prefill; two-gpus-8g adds cuda:1 as a peer GPU with its own
# 8 GiB (docs/CUDA.md, "Several GPUs"); budget-8g-nohold lets the pool's workers sleep between layers
# (GUILD_POOL_HOLD=0); all-gpu-nopdl launches without programmatic dependent
# launch (GUILD_CUDA_PDL=0); all-gpu-unfused decodes without the fused
# norm/router launches (GUILD_CUDA_FUSED=0); budget-8g-nohost / experts-cpu-nohost keep the GPU
# from reading any of the CPU's experts in host memory (GUILD_GPU_HOST_CHOICES=0);
# budget-8g-ring keeps the experts on the mapping (pinned staging
# ring); budget-8g-pageable also turns the ring off (driver's pageable copies); all-gpu-ctx4k and
# all-gpu-ctx32k decode with the KV cache the app sizes by default (4096
# positions) and a long one, instead of the prompt + generated tokens. GUILD_BENCH_TIMEOUT limits each (seconds).
set -u -o pipefail
OUT=${1:?usage: bench_hybrid.sh OUT_DIR [MODEL]}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
mkdir -p "$OUT"
BENCH=$BUILD/native/tools/guild-bench
THREADS=${GUILD_BENCH_THREADS:-$(nproc)}
MODEL=${2:-${GUILD_BENCH_MODEL_DIR:-/tmp}/guild-qwen3-30b-a3b-synth.gguf}
bash "$ROOT/scripts/gpu/synth_model.sh" "$BUILD" "$MODEL" "$OUT/gen.log" || exit 1
COMMON=(--model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --threads "$THREADS" --warmup 64)
run() {  # name reps args...
  local name=$1 reps=$2
  shift 2
  echo "== $name"
  timeout "${GUILD_BENCH_TIMEOUT:-300}" "$BENCH" "${COMMON[@]}" --reps "$reps" --profile-out "$OUT/profile-$name.json" "$@" \
    > "$OUT/bench-$name.json" 2> "$OUT/bench-$name.err"
  local rc=$?
  [ $rc = 0 ] || { echo "  failed ($rc):"; tail -3 "$OUT/bench-$name.err"; }
}
CONFIGS=${GUILD_BENCH_CONFIGS:-all-gpu budget-16g budget-8g experts-cpu cpu-only}
for c in $CONFIGS; do
  case $c in
    all-gpu) run all-gpu 3 --gpu cuda:0 ;;
    all-gpu-nopdl) GUILD_CUDA_PDL=0 run all-gpu-nopdl 2 --gpu cuda:0 ;;
    all-gpu-unfused) GUILD_CUDA_FUSED=0 run all-gpu-unfused 2 --gpu cuda:0 ;;
    all-gpu-ctx4k) run all-gpu-ctx4k 2 --gpu cuda:0 --ctx 4096 ;;
    all-gpu-ctx32k) run all-gpu-ctx32k 2 --gpu cuda:0 --ctx 32768 ;;
    budget-16g) run budget-16g 3 --gpu cuda:0 --gpu-budget-gib 16 ;;
    budget-16g-stream) GUILD_PREFILL_STREAM_MIN=1 run budget-16g-stream 2 --gpu cuda:0 --gpu-budget-gib 16 ;;
    budget-16g-cpu) GUILD_PREFILL_STREAM_MIN=0 run budget-16g-cpu 2 --gpu cuda:0 --gpu-budget-gib 16 ;;
    budget-8g) run budget-8g 3 --gpu cuda:0 --gpu-budget-gib 8 ;;
    two-gpus-8g) run two-gpus-8g 3 --gpu cuda:0 --gpu-budget-gib 8 --gpu-peers cuda:1 --gpu-peer-budget-gib 8 ;;
    budget-8g-stream) GUILD_PREFILL_STREAM_MIN=1 run budget-8g-stream 2 --gpu cuda:0 --gpu-budget-gib 8 ;;
    budget-8g-cpu) GUILD_PREFILL_STREAM_MIN=0 run budget-8g-cpu 2 --gpu cuda:0 --gpu-budget-gib 8 ;;
    budget-8g-nohold) GUILD_POOL_HOLD=0 run budget-8g-nohold 2 --gpu cuda:0 --gpu-budget-gib 8 ;;
    budget-8g-nohost) GUILD_GPU_HOST_CHOICES=0 run budget-8g-nohost 2 --gpu cuda:0 --gpu-budget-gib 8 ;;
    experts-cpu-nohost) GUILD_GPU_HOST_CHOICES=0 run experts-cpu-nohost 1 --gpu cuda:0 --experts-cpu ;;
    budget-8g-ring) GUILD_PIN_EXPERTS=0 run budget-8g-ring 2 --gpu cuda:0 --gpu-budget-gib 8 ;;
    budget-8g-pageable) GUILD_PIN_EXPERTS=0 GUILD_STAGING_RING_MIB=0 run budget-8g-pageable 1 --gpu cuda:0 --gpu-budget-gib 8 ;;
    experts-cpu) run experts-cpu 1 --gpu cuda:0 --experts-cpu ;;
    cpu-only) run cpu-only 1 --gpu cpu ;;
    *) echo "unknown configuration $c" ;;
  esac
done
python3 - "$OUT" $CONFIGS > "$OUT/hybrid-bench.txt" <<'PY'
import json, sys, os
out, asked = sys.argv[1], set(sys.argv[2:])
print(f"{'config':<19} {'pp512 tok/s':>12} {'tg128 tok/s':>12} {'ttft ms':>9} {'VRAM GiB':>9} {'RSS GiB':>8} {'gpu/peer/cpu experts':>21} {'hit rate':>8} {'probe: ms':>9} {'cpu busy':>8} {'streamed':>8} {'RAM GB/s':>8}")
names = ["all-gpu", "all-gpu-nopdl", "all-gpu-unfused", "all-gpu-ctx4k", "all-gpu-ctx32k", "two-gpus-8g", "budget-16g", "budget-16g-stream", "budget-16g-cpu", "budget-8g", "budget-8g-stream", "budget-8g-cpu",
         "budget-8g-nohold", "budget-8g-nohost", "budget-8g-ring", "budget-8g-pageable", "experts-cpu", "experts-cpu-nohost",
         "cpu-only"]
for name in names:
    if name not in asked:  # a configuration that was asked for and failed still gets its row
        continue
    p = os.path.join(out, f"bench-{name}.json")
    try:
        d = json.load(open(p))
    except Exception as e:
        print(f"{name:<19} (no result: {e.__class__.__name__})"); continue
    g = d.get("gpu", {})
    med = lambda k: d.get(k, {}).get("median", float("nan"))
    vram = g.get("vram_bytes", 0) / 2**30
    ex = f"{g.get('gpu_experts', 0)}/{g.get('peer_experts', 0)}/{g.get('cpu_experts', '-')}"
    hit = g.get("cache_hit_rate", float("nan"))
    pr = g.get("prefill_probe", {})
    print(f"{name:<19} {med('prompt_tokens_per_s'):>12.1f} {med('decode_tokens_per_s'):>12.1f} {med('ttft_ms'):>9.1f} {vram:>9.2f} {d['peak_rss_bytes']/2**30:>8.2f} {ex:>21} {hit:>8.3f} {pr.get('prefill_ms', float('nan')):>9.1f} {pr.get('cpu_expert_busy_ms', float('nan')):>8.1f} {pr.get('streamed_layers', '-'):>8} {d.get('host_ram_read_gbps', float('nan')):>8.1f}")
# Calibration's measured costs and decisions, per configuration (from the startup profiles).
print()
for name in names:
    if name not in asked: continue
    try:
        prof = json.load(open(os.path.join(out, f"profile-{name}.json")))
    except Exception:
        continue
    cal = next((st.get("detail", {}) for st in prof.get("stages", []) if st.get("name") == "calibration"), {})
    keys = ["cpu_us_per_expert_mean", "gpu_us_per_expert", "gpu_host_us_per_expert", "gpu_host_choices",
            "held_out_hit_rate", "prefill_planned_miss_rate", "prefill_stream_min_tokens"]
    vals = " ".join(f"{k}={cal[k]:.4g}" if isinstance(cal.get(k), float) else f"{k}={cal[k]}" for k in keys if k in cal)
    print(f"{name:<19} calibration: {vals}")
    dp = (json.load(open(os.path.join(out, f"bench-{name}.json"))).get("gpu", {}).get("decode_probe")
          if os.path.exists(os.path.join(out, f"bench-{name}.json")) else None)
    if dp:
        print(f"{'':<19} decode probe: " + " ".join(f"{k}={dp[k]:.4g}" if isinstance(dp[k], float) else f"{k}={dp[k]}" for k in dp))
    for pc in cal.get("peers", []):
        print(f"{'':<19} peer {pc.get('device')}: " + " ".join(f"{k}={pc[k]:.4g}" if isinstance(pc[k], float) else f"{k}={pc[k]}" for k in pc))
PY
cat "$OUT/hybrid-bench.txt"
