#!/usr/bin/env bash
# One device round for gpt-oss (issue 22), detached so it outlives the call
# that starts it (poll /tmp/round/status):
#  - llama.cpp's llama-bench built from the carried archive (PEERS_DIR), in
#    the background;
#  - Guild's bench tools and the CUDA tests built (build-gpu/), the CUDA tests
#    run on the carried fixtures (FIXTURES_DIR);
#  - then scripts/gpu/bench_gpt_oss.sh (gpt-oss-20b synthetic, side by side).
#
#   scripts/gpu/gpt_oss_round.sh PEERS_DIR FIXTURES_DIR
set -u -o pipefail
PEERS=$(cd "${1:?usage: gpt_oss_round.sh PEERS_DIR FIXTURES_DIR}" && pwd)
FIX=$(cd "${2:?usage: gpt_oss_round.sh PEERS_DIR FIXTURES_DIR}" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
R=/tmp/round
mkdir -p $R
LB=/tmp/peers/llama/build/bin/llama-bench
if [ ! -x $LB ]; then
  (mkdir -p /tmp/peers/llama && tar xzf "$PEERS/llama.cpp-v0.5.0-src.tar.gz" -C /tmp/peers/llama &&
     cmake -S /tmp/peers/llama -B /tmp/peers/llama/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
       -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
       -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/peers/llama/build --target llama-bench -j "$(nproc)") \
    > $R/llama-build.log 2>&1 &
  LPID=$!
fi
cd "$ROOT"
bash scripts/gpu/build_bench_tools.sh build-gpu $R/guild-build.log &&
  ninja -C build-gpu native/tests/test_cuda_kernels native/tests/test_cuda_decoder native/tests/test_cuda_hybrid \
    >> $R/guild-build.log 2>&1 || { echo "guild build FAILED" >> $R/status; tail -30 $R/guild-build.log >> $R/status; exit 1; }
for t in test_cuda_kernels test_cuda_decoder test_cuda_hybrid; do
  GUILD_FIXTURES=$FIX build-gpu/native/tests/$t > $R/$t.log 2>&1
  echo "$t rc $? ($(tail -1 $R/$t.log))" >> $R/status
done
[ -n "${LPID:-}" ] && { wait "$LPID" || { echo "llama build FAILED" >> $R/status; exit 1; }; }
bash scripts/gpu/bench_gpt_oss.sh $R/bench "$PEERS" > $R/bench.log 2>&1
echo "bench rc $?" >> $R/status
echo DONE >> $R/status
