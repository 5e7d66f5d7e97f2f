#!/usr/bin/env bash
# A/B of decode settings, all on the GPU, on the 30B-A3B-shaped synthetic
# model: builds only what the bench needs, then runs guild-bench once per
# setting (environment assignments, e.g. "GUILD_CUDA_FUSED=0"), printing
# decode tok/s for each, plus per-kernel times of the default (ncu, 4 layers).
#
#   scripts/gpu/ab_decode.sh OUT_DIR "SETTING A" "SETTING B" ...   ("-" = defaults)
set -u -o pipefail
OUT=${1:?usage: ab_decode.sh OUT_DIR SETTING...}
shift
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
mkdir -p "$OUT"
bash "$ROOT/scripts/gpu/build_bench_tools.sh" "$BUILD" "$OUT/build.log" || exit 1
if [ "${GUILD_AB_PROFILE:-1}" = 1 ]; then
  GUILD_GPU_BUILD_DIR=$BUILD bash "$ROOT/scripts/gpu/profile_decode.sh" "$OUT/profile" 4 > /dev/null 2>&1
  head -30 "$OUT/profile/kernels.txt" 2>/dev/null
fi
MODEL=/tmp/guild-qwen3-30b-a3b-synth.gguf
bash "$ROOT/scripts/gpu/synth_model.sh" "$BUILD" "$MODEL" "$OUT/gen.log" || exit 1
for setting in "$@"; do
  envs=()
  [ "$setting" = "-" ] || read -r -a envs <<< "$setting"
  env ${envs[@]+"${envs[@]}"} "$BUILD/native/tools/guild-bench" --model "$MODEL" --gpu cuda:0 --prompt-tokens 512 \
    --gen-tokens 128 --reps 2 --warmup 64 --threads 16 > "$OUT/ab.json" 2> "$OUT/ab.err"
  python3 -c "
import json, sys
j = json.load(open('$OUT/ab.json'))
print(f\"{sys.argv[1]:<48} decode {j['decode_tokens_per_s']['median']:7.1f} tok/s  prefill {j['prompt_tokens_per_s']['median']:7.1f}\")
" "$setting" || tail -3 "$OUT/ab.err"
done
