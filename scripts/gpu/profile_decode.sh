#!/usr/bin/env bash
# Per-kernel times of decode steps (all on the GPU) with Nsight Compute, on a
# few-layer model of the Qwen3-30B-A3B shape (the kernels per layer are the
# same as the full model's). Where ncu cannot read counters, says so.
#
#   scripts/gpu/profile_decode.sh OUT_DIR [LAYERS]
#
# Writes OUT_DIR/ncu.csv (one row per kernel: name, grid, block, duration) and
# OUT_DIR/kernels.txt (the last decode step's kernels, grouped by name, with
# their share of the step).
#
# GUILD_PROFILE_PREFILL=1 profiles 512-token prompt passes instead: kernels.txt
# then groups every kernel of the run by name, per prompt pass (a pass = one
# attention_prefill launch per layer).
set -u -o pipefail
OUT=${1:?usage: profile_decode.sh OUT_DIR [LAYERS]}
LAYERS=${2:-4}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
mkdir -p "$OUT"
bash "$ROOT/scripts/gpu/build_bench_tools.sh" "$BUILD" "$OUT/build.log" || exit 1
MODEL=/tmp/guild-a3b-${LAYERS}l.gguf
bash "$ROOT/scripts/gpu/synth_model.sh" "$BUILD" "$MODEL" "$OUT/gen.log" --layers "$LAYERS" || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine"; exit 1; }
PREFILL=${GUILD_PROFILE_PREFILL:-0}
if [ "$PREFILL" = 1 ]; then STEP=(--prompt-tokens 512 --gen-tokens 1); else STEP=(--prompt-tokens 8 --gen-tokens 4); fi
GUILD_CUDA_GRAPHS=0 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$BUILD/native/tools/guild-bench" --model "$MODEL" --gpu cuda:0 "${STEP[@]}" --reps 1 \
  --warmup 0 --threads 8 > "$OUT/ncu.csv" 2> "$OUT/ncu.err" || { tail -20 "$OUT/ncu.err"; tail -5 "$OUT/ncu.csv"; }
python3 - "$OUT/ncu.csv" "$LAYERS" "$PREFILL" > "$OUT/kernels.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
rows = [r for r in rows if r.get("Metric Name") == "gpu__time_duration.sum"]
for r in rows: r["Metric Value"] = r["Metric Value"].replace(",", "")
if sys.argv[3] == "1":
    passes = max(1, sum("attn_prefill" in r["Kernel Name"] for r in rows) // int(sys.argv[2]))
    tot = sum(float(r["Metric Value"]) for r in rows) / passes
    print(f"{len(rows)} kernels profiled, {passes} prompt passes of 512 tokens; per pass {tot/1e3:.1f} us of kernel time ({sys.argv[2]} layers)")
    agg = collections.OrderedDict()
    for r in rows:
        a = agg.setdefault(r["Kernel Name"].split("(")[0], [0, 0.0, r["Grid Size"], r["Block Size"]])
        a[0] += 1; a[1] += float(r["Metric Value"])
    for name, (n, t, g, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:<48} x{n/passes:<6.1f} {t/passes/1e3:9.1f} us {100*t/passes/tot:5.1f} %  avg {t/n/1e3:7.2f} us  grid {g} block {b}")
    sys.exit(0)
# The last decode step (GUILD_CUDA_GRAPHS=0: launched kernel by kernel): the kernels after the last-but-one argmax.
ends = [-1] + [i for i, r in enumerate(rows) if "argmax" in r["Kernel Name"]]
steps = [rows[a + 1: b + 1] for a, b in zip(ends, ends[1:])]
steps = [s for s in steps if any("attn_decode" in r["Kernel Name"] for r in s)] or [rows]
step = steps[-1]
tot = sum(float(r["Metric Value"]) for r in step)
print(f"{len(rows)} kernels profiled; last decode step: {len(step)} kernels, {tot/1e3:.1f} us of kernel time ({sys.argv[2]} layers)")
agg = collections.OrderedDict()
for r in step:
    name = r["Kernel Name"].split("(")[0]
    a = agg.setdefault(name, [0, 0.0, r["Grid Size"], r["Block Size"]])
    a[0] += 1; a[1] += float(r["Metric Value"])
for name, (n, t, g, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:<40} x{n:<4} {t/1e3:9.1f} us {100*t/tot:5.1f} %  avg {t/n/1e3:7.2f} us  grid {g} block {b}")
print("\nsequence of the step:")
for r in step:
    print(f"  {float(r['Metric Value'])/1e3:8.2f} us  {r['Kernel Name'][:90]}  grid {r['Grid Size']} block {r['Block Size']}")
PY
cat "$OUT/kernels.txt" | head -60
# The same steps without the profiler: the graph's time per token, to set
# against the kernels' sum (the difference is launch gaps and tails).
"$BUILD/native/tools/guild-bench" --model "$MODEL" --gpu cuda:0 --prompt-tokens 512 --gen-tokens 128 --reps 3 \
  --warmup 16 --threads 8 > "$OUT/bench.json" 2> "$OUT/bench.err"
python3 -c "
import json,sys; d=json.load(open('$OUT/bench.json')); t=d['decode_tokens_per_s']['median']; p=d['prompt_tokens_per_s']['median']
print(f'without the profiler: decode {t:.1f} tok/s = {1e6/t:.1f} us per token, prompt {p:.1f} tok/s = {512e3/p:.1f} ms per 512-token pass ($LAYERS layers)')"
