#!/usr/bin/env bash
# gpt-oss side by side with llama.cpp on the GPU machine (issue 22; docs/PERFORMANCE.md):
#
#   scripts/gpu/bench_gpt_oss.sh OUT_DIR PEERS_DIR [PRESET]
#
# PEERS_DIR holds llama.cpp-v0.5.0-src.tar.gz (../shared/peers, carried in an
# ignored folder). Builds llama-bench in /tmp/peers/llama (once) beside
# Guild's bench tools in build-gpu/ (scripts/gpu/build_bench_tools.sh),
# generates the synthetic model (guild-gen-model --preset PRESET, default
# gpt-oss-20b: MXFP4 experts, Q8_0 dense) in /dev/shm, then per
# configuration runs llama-bench and guild-bench on the same file, one after
# the other: all on the GPU, about 8 GiB of GPU memory, every expert on the
# CPU (GUILD_GPT_OSS_CONFIGS picks). 512-token prompt, 128 decode tokens, 3
# repetitions, all cores, flash attention on for llama.cpp. Peak VRAM sampled
# for both. OUT_DIR/gpt-oss-bench.txt holds the table (printed last).
set -u -o pipefail
OUT=${1:?usage: bench_gpt_oss.sh OUT_DIR PEERS_DIR [PRESET]}
PEERS=${2:?usage: bench_gpt_oss.sh OUT_DIR PEERS_DIR [PRESET]}
PRESET=${3:-gpt-oss-20b}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
PEERS=$(cd "$PEERS" && pwd)
T=$(nproc)
LB=/tmp/peers/llama/build/bin/llama-bench
MODEL=/dev/shm/guild-$PRESET-synth.gguf

# Both builds at once (llama.cpp's CUDA build is the longer one).
if [ ! -x "$LB" ]; then
  (mkdir -p /tmp/peers/llama && tar xzf "$PEERS/llama.cpp-v0.5.0-src.tar.gz" -C /tmp/peers/llama &&
     cmake -S /tmp/peers/llama -B /tmp/peers/llama/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
       -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
       -DLLAMA_BUILD_EXAMPLES=OFF && cmake --build /tmp/peers/llama/build --target llama-bench -j "$T") \
    > "$OUT/raw/llama-build.log" 2>&1 &
  LPID=$!
fi
bash "$ROOT/scripts/gpu/build_bench_tools.sh" "$BUILD" "$OUT/raw/guild-build.log" || exit 1
if [ ! -f "$MODEL" ]; then
  "$BUILD/native/tools/guild-gen-model" --preset "$PRESET" --out "$MODEL" --threads "$T" > "$OUT/raw/gen.log" 2>&1 ||
    { tail -5 "$OUT/raw/gen.log"; exit 1; }
fi
[ -n "${LPID:-}" ] && { wait "$LPID" || { tail -20 "$OUT/raw/llama-build.log"; exit 1; }; }
echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)), $T threads"

# llama.cpp's expert layers on the CPU for about 8 GiB of device memory: the
# layer count whose experts leave 8 GiB for the rest (dense, KV, buffers);
# Guild's budget is the whole 8 GiB. Peak VRAM shows what each used.
case $PRESET in
  gpt-oss-20b) NCMOE_8G=${NCMOE_8G:-11}; N_LAYER=24 ;;
  gpt-oss-120b) NCMOE_8G=${NCMOE_8G:-32}; N_LAYER=36 ;;
  *) echo "no llama.cpp -ncmoe settings for preset $PRESET"; exit 1 ;;
esac

vram_start() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$OUT/raw/vram-$1.log" 2>/dev/null & VP=$!; }
vram_stop() { kill "$VP" 2>/dev/null; wait "$VP" 2>/dev/null; sort -n "$OUT/raw/vram-$1.log" | tail -1; }
TABLE=$OUT/gpt-oss-bench.txt
printf '%-12s %-6s %12s %12s %10s\n' config engine "pp512 t/s" "tg128 t/s" "VRAM MiB" > "$TABLE"
for c in ${GUILD_GPT_OSS_CONFIGS:-gpu 8g cpuexp}; do
  case $c in
    gpu) la=(-ngl 99); ga=(--gpu cuda:0) ;;
    8g) la=(-ngl 99 -ncmoe "$NCMOE_8G"); ga=(--gpu cuda:0 --gpu-budget-gib 8) ;;
    cpuexp) la=(-ngl 99 -ncmoe "$N_LAYER"); ga=(--gpu cuda:0 --experts-cpu) ;;
    *) echo "unknown config $c"; continue ;;
  esac
  vram_start "$c-llama"
  timeout 400 "$LB" -m "$MODEL" "${la[@]}" -fa 1 -p 512 -n 128 -r 3 -t "$T" -o jsonl > "$OUT/raw/$c-llama.jsonl" 2> "$OUT/raw/$c-llama.err"
  v=$(vram_stop "$c-llama")
  python3 - "$OUT/raw/$c-llama.jsonl" "$c" "$v" >> "$TABLE" <<'EOF' || tail -3 "$OUT/raw/$c-llama.err"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pp = next((r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0), float("nan"))
tg = next((r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0), float("nan"))
print(f"{sys.argv[2]:<12} {'llama':<6} {pp:12.1f} {tg:12.1f} {sys.argv[3]:>10}")
EOF
  vram_start "$c-guild"
  timeout 400 "$BUILD/native/tools/guild-bench" --model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --threads "$T" \
    --warmup 64 --reps 3 "${ga[@]}" > "$OUT/raw/$c-guild.json" 2> "$OUT/raw/$c-guild.err"
  v=$(vram_stop "$c-guild")
  python3 - "$OUT/raw/$c-guild.json" "$c" "$v" >> "$TABLE" <<'EOF' || tail -3 "$OUT/raw/$c-guild.err"
import json, sys
d = json.load(open(sys.argv[1]))
pp = d.get("prompt_tokens_per_s", {}).get("median", float("nan"))
tg = d.get("decode_tokens_per_s", {}).get("median", float("nan"))
print(f"{sys.argv[2]:<12} {'guild':<6} {pp:12.1f} {tg:12.1f} {sys.argv[3]:>10}")
EOF
done
cat "$TABLE"
