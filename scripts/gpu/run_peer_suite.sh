#!/usr/bin/env bash
# Peer-GPU runs for issue #10 on a machine with two GPUs (nvidia-h200-x2), in
# one call and lean on time: builds only what they need, runs test_cuda_peers
# (the real two-GPU test and the stand-in), then guild-bench on the synthetic
# Qwen3-30B-A3B-shaped model: two GPUs with 8 GiB each (cuda:1 as the peer)
# against one GPU at 8 GiB and at 16 GiB.
#
#   scripts/gpu/run_peer_suite.sh OUT_DIR
#
# Writes OUT_DIR/{build,ctest}.log, bench-*.json/.err and summary.txt.
set -u -o pipefail
OUT=${1:?usage: run_peer_suite.sh OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
FIX=${GUILD_GPU_FIXTURES:-$ROOT/.device-fixtures}
THREADS=$(nproc)
{
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGUILD_CUDA=ON -DGUILD_CUDA_ARCHS=90 \
    -DGUILD_BUILD_TESTS=ON -DGUILD_BUILD_TOOLS=ON -DGUILD_FIXTURES_DIR="$FIX" &&
  ninja -C "$BUILD" -j "$THREADS" packages/cuda/libguild-cuda.so packages/cpu-generic/libcpu-generic.so \
    packages/cpu-avx2/libcpu-avx2.so packages/cpu-avx512/libcpu-avx512.so native/tests/test_cuda_peers \
    native/tools/guild-bench native/tools/guild-gen-model
} > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
(cd "$BUILD" && ctest -V -R cuda_peers) > "$OUT/ctest.log" 2>&1
TEST_RC=$?
MODEL=${GUILD_BENCH_MODEL_DIR:-/tmp}/guild-qwen3-30b-a3b-synth.gguf
[ -f "$MODEL" ] || "$BUILD/native/tools/guild-gen-model" --preset qwen3-30b-a3b --out "$MODEL" --threads "$THREADS" > "$OUT/gen.log" 2>&1
COMMON=(--model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --threads 16 --warmup 64 --reps 2)
bench() {  # name args...
  local name=$1
  shift
  timeout "${GUILD_BENCH_TIMEOUT:-120}" "$BUILD/native/tools/guild-bench" "${COMMON[@]}" "$@" > "$OUT/bench-$name.json" 2> "$OUT/bench-$name.err" ||
    echo "$name failed: $(tail -1 "$OUT/bench-$name.err")"
}
for c in ${GUILD_PEER_CONFIGS:-two-gpus-8g one-gpu-8g one-gpu-16g}; do
  case $c in
    two-gpus-8g) bench "$c" --gpu cuda:0 --gpu-budget-gib 8 --gpu-peers cuda:1 --gpu-peer-budget-gib 8 ;;
    one-gpu-8g) bench "$c" --gpu cuda:0 --gpu-budget-gib 8 ;;
    one-gpu-16g) bench "$c" --gpu cuda:0 --gpu-budget-gib 16 ;;
  esac
done
{
  echo "== peer suite: $(nvidia-smi -L 2>/dev/null | wc -l) GPUs"
  grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1
  grep -E "STAND-IN|\[(stand-in|peer cuda)|prompt logits|greedy .* one GPU|SKIPPED|FAIL|peer-to-peer" "$OUT/ctest.log" | sed 's/^[0-9]*: //'
  python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'config':<13} {'pp512 tok/s':>11} {'tg128 tok/s':>11} {'primary/peer/cpu experts':>26} {'hit rate':>8}")
for n in ["two-gpus-8g", "one-gpu-8g", "one-gpu-16g"]:
    p = os.path.join(out, f"bench-{n}.json")
    try:
        d = json.load(open(p))
    except Exception as e:
        print(f"{n:<13} (no result)"); continue
    g = d.get("gpu", {})
    med = lambda k: d.get(k, {}).get("median", float("nan"))
    ex = f"{g.get('gpu_experts', 0)}/{g.get('peer_experts', 0)}/{g.get('cpu_experts', '-')}"
    print(f"{n:<13} {med('prompt_tokens_per_s'):>11.1f} {med('decode_tokens_per_s'):>11.1f} {ex:>26} {g.get('cache_hit_rate', float('nan')):>8.3f}")
PY
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $TEST_RC
