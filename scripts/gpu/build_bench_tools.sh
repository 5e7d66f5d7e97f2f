#!/usr/bin/env bash
# Builds what the GPU bench scripts run (the kernel packages, guild-bench,
# guild-gen-model) in BUILD_DIR, Release with CUDA for sm_90; configures the
# directory the first time. Incremental: nothing to do when up to date.
#
#   scripts/gpu/build_bench_tools.sh BUILD_DIR LOG_FILE
# Exit status 1 (the log's tail printed) when the build fails.
set -u -o pipefail
BUILD=${1:?usage: build_bench_tools.sh BUILD_DIR LOG_FILE}
LOG=${2:?usage: build_bench_tools.sh BUILD_DIR LOG_FILE}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
{
  [ -f "$BUILD/build.ninja" ] ||
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGUILD_CUDA=ON -DGUILD_CUDA_ARCHS=90 \
      -DGUILD_BUILD_TESTS=ON -DGUILD_BUILD_TOOLS=ON
} > "$LOG" 2>&1 &&
  ninja -C "$BUILD" packages/cuda/libguild-cuda.so packages/cpu-generic/libcpu-generic.so \
    packages/cpu-avx2/libcpu-avx2.so packages/cpu-avx512/libcpu-avx512.so native/tools/guild-bench \
    native/tools/guild-gen-model >> "$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
