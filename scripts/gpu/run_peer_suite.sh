#!/usr/bin/env bash
# Peer-GPU runs for issue #10 on a machine with two GPUs (nvidia-h200-x2), in
# one call and lean on time: builds only what they need, runs test_cuda_peers
# (the real two-GPU test and the stand-in), then guild-bench on the synthetic
# Qwen3-30B-A3B-shaped model: two GPUs with 8 GiB each (cuda:1 as the peer)
# against one GPU at 8 GiB and at 16 GiB (scripts/gpu/bench_hybrid.sh's
# two-gpus-8g, budget-8g and budget-16g).
#
#   scripts/gpu/run_peer_suite.sh OUT_DIR
#
# Writes OUT_DIR/{build,ctest,bench}.log, OUT_DIR/bench/ (bench_hybrid.sh's files)
# and summary.txt.
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
# The bench: scripts/gpu/bench_hybrid.sh's configurations for this comparison.
GUILD_GPU_BUILD_DIR="$BUILD" GUILD_BENCH_THREADS=16 GUILD_BENCH_TIMEOUT="${GUILD_BENCH_TIMEOUT:-120}" \
  GUILD_BENCH_CONFIGS="${GUILD_PEER_CONFIGS:-two-gpus-8g budget-8g budget-16g}" \
  bash "$ROOT/scripts/gpu/bench_hybrid.sh" "$OUT/bench" > "$OUT/bench.log" 2>&1
{
  echo "== peer suite: $(nvidia-smi -L 2>/dev/null | wc -l) GPUs"
  grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1
  grep -E "STAND-IN|\[(stand-in|peer cuda)|prompt logits|greedy .* one GPU|SKIPPED|FAIL|peer-to-peer" "$OUT/ctest.log" | sed 's/^[0-9]*: //'
  cat "$OUT/bench/hybrid-bench.txt" 2>/dev/null || tail -5 "$OUT/bench.log"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $TEST_RC
