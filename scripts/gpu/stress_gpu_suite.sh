#!/usr/bin/env bash
# The GPU tests, again and again, several at once: finds races and unstable
# inputs that one test alone on the GPU never shows (block scheduling differs
# when another process shares the device).
#
#   scripts/gpu/stress_gpu_suite.sh OUT_DIR [ROUNDS] [JOBS]
#
# Needs a configured and built GPU tree (scripts/gpu/run_gpu_suite.sh makes
# one in build-gpu/; override: GUILD_GPU_BUILD_DIR). Each round runs
# `ctest -R <GUILD_STRESS_TESTS, default cuda> -j JOBS` (default ROUNDS 20,
# JOBS 4); a failing round's log is kept as OUT_DIR/round-N.log (the first
# five). Prints one line per round and a summary; exit 0 only when every
# round passed.
set -u -o pipefail

OUT=${1:?usage: stress_gpu_suite.sh OUT_DIR [ROUNDS] [JOBS]}
ROUNDS=${2:-20}
JOBS=${3:-4}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
PATTERN=${GUILD_STRESS_TESTS:-cuda}
mkdir -p "$OUT"
[ -f "$BUILD/CTestTestfile.cmake" ] || { echo "no built GPU tree in $BUILD (run scripts/gpu/run_gpu_suite.sh first)" >&2; exit 2; }

failed=0
kept=0
for ((r = 1; r <= ROUNDS; r++)); do
  log=$(mktemp)
  start=$(date +%s)
  if (cd "$BUILD" && ctest --output-on-failure --timeout 1500 -j "$JOBS" -R "$PATTERN") > "$log" 2>&1; then
    echo "round $r: pass ($(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1))
    echo "round $r: FAIL ($(( $(date +%s) - start )) s): $(grep -E 'tests failed|\(Failed\)' "$log" | tr '\n' ' ' | cut -c1-300)"
    grep -E "FAIL|differs|rel err|error" "$log" | head -8 | sed 's/^/    /'
    if ((kept < 5)); then cp "$log" "$OUT/round-$r.log"; kept=$((kept + 1)); fi
  fi
  rm -f "$log"
done
echo "== stress: $((ROUNDS - failed))/$ROUNDS rounds passed (ctest -R '$PATTERN' -j $JOBS) =="
[ "$failed" = 0 ]
