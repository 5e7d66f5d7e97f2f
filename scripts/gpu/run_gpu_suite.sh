#!/usr/bin/env bash
# Guild's GPU suite, for the GPU test machine (H200, CUDA 13, cmake, ninja; no
# Node, no network). One command:
#
#   scripts/gpu/run_gpu_suite.sh OUT_DIR
#
# 1. configures and builds Release with -DGUILD_CUDA=ON -DGUILD_CUDA_ARCHS=90
#    (ninja, all cores) in build-gpu/ (override: GUILD_GPU_BUILD_DIR);
# 2. runs ctest: every native test, the CUDA ones included, with the fixtures
#    from .device-fixtures/ in the repo root (its models/ + expected/, or a
#    fixtures/ folder inside it; override: GUILD_GPU_FIXTURES);
#    GUILD_GPU_CTEST_ARGS adds ctest arguments (e.g. "-R cuda");
# 3. runs the kernel micro-benchmark (native/tools/cuda_kernel_bench.cu);
# 4. with GUILD_GPU_BENCH_HYBRID=1, runs scripts/gpu/bench_hybrid.sh (OUT_DIR/hybrid/, hybrid.log);
# 5. writes OUT_DIR/{env,build,ctest,bench}.log and OUT_DIR/summary.txt
#    (5 files, each cut to 16 MiB) and prints the summary last.
# Exit status: 0 when the build and all tests pass (skips allowed), else 1.
set -u -o pipefail

OUT=${1:?usage: run_gpu_suite.sh OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
JOBS=$(nproc 2>/dev/null || echo 8)
MAX_BYTES=$((16 * 1024 * 1024 - 4096))

cap() {  # keep a log under the size limit (head and tail kept)
  local f=$1
  [ -f "$f" ] || return 0
  local n
  n=$(stat -c %s "$f")
  if [ "$n" -gt "$MAX_BYTES" ]; then
    { head -c $((MAX_BYTES / 2)) "$f"; printf '\n... [%s bytes cut] ...\n' "$n"; tail -c $((MAX_BYTES / 2 - 64)) "$f"; } > "$f.tmp"
    mv "$f.tmp" "$f"
  fi
}

# Fixtures.
FIX=${GUILD_GPU_FIXTURES:-}
if [ -z "$FIX" ]; then
  for cand in "$ROOT/.device-fixtures" "$ROOT/.device-fixtures/fixtures"; do
    if [ -d "$cand/models" ]; then FIX=$cand; break; fi
  done
fi
[ -n "$FIX" ] || FIX="$ROOT/.device-fixtures"  # absent: fixture tests skip (exit 77)

# Environment.
{
  echo "date: $(date -u +%FT%TZ)"
  echo "root: $ROOT"
  echo "build: $BUILD"
  echo "fixtures: $FIX ($( [ -d "$FIX/models" ] && ls "$FIX/models" | wc -l || echo 0) model files)"
  echo "cores: $JOBS"
  uname -a
  nvidia-smi 2>&1 | head -20
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  ninja --version 2>&1 | sed 's/^/ninja /'
  g++ --version 2>&1 | head -1
} > "$OUT/env.log" 2>&1

# Configure + build.
GEN=(-G Ninja)
command -v ninja > /dev/null || GEN=()
BUILD_OK=1
{
  cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGUILD_CUDA=ON -DGUILD_CUDA_ARCHS=90 \
    -DGUILD_BUILD_TESTS=ON -DGUILD_BUILD_TOOLS=ON -DGUILD_FIXTURES_DIR="$FIX" &&
  cmake --build "$BUILD" -j "$JOBS"
} > "$OUT/build.log" 2>&1 || BUILD_OK=0
cap "$OUT/build.log"

# Tests.
TEST_OK=0
CTEST_LINE="not run (build failed)"
if [ "$BUILD_OK" = 1 ]; then
  # shellcheck disable=SC2086
  # -V keeps every test's output (the CUDA tests print their errors and timings).
  (cd "$BUILD" && ctest -V --timeout 1500 -j 4 ${GUILD_GPU_CTEST_ARGS:-}) > "$OUT/ctest.log" 2>&1 && TEST_OK=1
  CTEST_LINE=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
  cap "$OUT/ctest.log"
fi

# Benchmark.
BENCH_OK=0
if [ "$BUILD_OK" = 1 ] && [ -x "$BUILD/native/cuda_kernel_bench" ]; then
  "$BUILD/native/cuda_kernel_bench" > "$OUT/bench.log" 2>&1 && BENCH_OK=1
  cap "$OUT/bench.log"
fi

# Hybrid MoE benchmark (GUILD_GPU_BENCH_HYBRID=1): the synthetic 30B-A3B-shaped model in every
# configuration of scripts/gpu/bench_hybrid.sh; its table goes into the summary, its files into
# OUT/hybrid/ (one level down, so the 8-file limit of the device tool keeps the logs above).
HYBRID_OK=-
if [ "$BUILD_OK" = 1 ] && [ "${GUILD_GPU_BENCH_HYBRID:-0}" = 1 ]; then
  GUILD_GPU_BUILD_DIR="$BUILD" bash "$ROOT/scripts/gpu/bench_hybrid.sh" "$OUT/hybrid" > "$OUT/hybrid.log" 2>&1 && HYBRID_OK=ok || HYBRID_OK=FAILED
  cap "$OUT/hybrid.log"
fi

# Summary.
{
  echo "== Guild GPU suite =="
  grep -m1 -E "NVIDIA|Tesla|H100|H200" "$OUT/env.log" || true
  echo "build:  $([ "$BUILD_OK" = 1 ] && echo ok || echo FAILED; true) (log: build.log)"
  if [ "$BUILD_OK" != 1 ]; then grep -E "error|FAILED" "$OUT/build.log" | head -20; fi
  echo "ctest:  $CTEST_LINE (log: ctest.log)"
  if [ -f "$OUT/ctest.log" ]; then
    grep -E "^\s*[0-9]+/[0-9]+ Test +#[0-9]+: " "$OUT/ctest.log" | sed 's/^ *//' || true
    grep -E "(gemv|gemm) .*rel err|: greedy |rms mean|FAIL|failed" "$OUT/ctest.log" | sed 's/^[0-9]*: //' | head -60 || true
  fi
  echo "bench:  $([ "$BENCH_OK" = 1 ] && echo ok || echo "FAILED or not run"; true) (log: bench.log)"
  if [ -f "$OUT/bench.log" ]; then sed -n '/== summary/,$p' "$OUT/bench.log"; fi
  if [ "$HYBRID_OK" != - ]; then
    echo "hybrid: $HYBRID_OK (log: hybrid.log)"
    [ -f "$OUT/hybrid/hybrid-bench.txt" ] && cat "$OUT/hybrid/hybrid-bench.txt"
  fi
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"

[ "$BUILD_OK" = 1 ] && [ "$TEST_OK" = 1 ] && exit 0
exit 1
