#!/usr/bin/env bash
# Side-by-side decode/prefill A/B on one host: B is the working tree, A the
# working tree with PATCH applied (git apply). Both are built (Release, sm_90),
# then guild-bench runs the same configuration alternately A B A B ... so host
# drift hits both alike. Prints one line per run and the medians.
#
#   scripts/gpu/ab_patch.sh OUT_DIR PATCH [ROUNDS] [-- guild-bench args]
#
# Default guild-bench args: all on the GPU, 512-token prompt, 128 decode
# tokens (bench_hybrid.sh's all-gpu). OUT_DIR gets build logs and ab.txt.
set -u -o pipefail
OUT=${1:?usage: ab_patch.sh OUT_DIR PATCH [ROUNDS] [-- args]}
PATCH=$(realpath "${2:?usage: ab_patch.sh OUT_DIR PATCH [ROUNDS] [-- args]}")
shift 2
ROUNDS=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then ROUNDS=$1; shift; fi
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive number (guild-bench args go after --)"; exit 2; }
[ "${1:-}" = "--" ] && shift
ARGS=("$@"); [ ${#ARGS[@]} -gt 0 ] || ARGS=(--gpu cuda:0)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
# A's tree: a fresh copy of the working tree with PATCH applied, built from
# scratch every call (a copy laid over an older one could leave objects built
# from files the last PATCH changed).
A_SRC=${GUILD_AB_DIR:-/tmp/guild-ab-a}
rm -rf "$A_SRC" && mkdir -p "$A_SRC"
(cd "$ROOT" && tar --exclude='./build*' --exclude=./node_modules --exclude=./.device-fixtures -cf - .) |
  tar -xf - -C "$A_SRC" || { echo "cannot copy the tree to $A_SRC"; exit 1; }
(cd "$A_SRC" && git apply "$PATCH") || { echo "PATCH does not apply"; exit 1; }
B_BUILD=${GUILD_GPU_BUILD_DIR:-$ROOT/build-gpu}
bash "$ROOT/scripts/gpu/build_bench_tools.sh" "$B_BUILD" "$OUT/build-b.log" || exit 1
bash "$A_SRC/scripts/gpu/build_bench_tools.sh" "$A_SRC/build-gpu" "$OUT/build-a.log" || exit 1
MODEL=${GUILD_BENCH_MODEL:-/tmp/guild-qwen3-30b-a3b-synth.gguf}
bash "$ROOT/scripts/gpu/synth_model.sh" "$B_BUILD" "$MODEL" "$OUT/gen.log" || exit 1
for r in $(seq "$ROUNDS"); do
  for v in a b; do
    if [ $v = a ]; then B=$A_SRC/build-gpu; else B=$B_BUILD; fi
    "$B/native/tools/guild-bench" --model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --threads "$(nproc)" \
      --warmup 64 --reps 2 "${ARGS[@]}" > "$OUT/run-$v-$r.json" 2> "$OUT/run-$v-$r.err" ||
      { echo "$v round $r failed:"; tail -3 "$OUT/run-$v-$r.err"; }
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/ab.txt"
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
res = {"a": [], "b": []}
for r in range(1, rounds + 1):
    for v in "ab":
        try:
            d = json.load(open(os.path.join(out, f"run-{v}-{r}.json")))
            pp, tg = d["prompt_tokens_per_s"]["median"], d["decode_tokens_per_s"]["median"]
        except Exception as e:
            print(f"round {r} {v}: no result ({e.__class__.__name__})")
            continue
        res[v].append((pp, tg))
        print(f"round {r} {v}: pp512 {pp:9.1f} tok/s  tg128 {tg:7.1f} tok/s")
for v in "ab":
    if res[v]:
        print(f"median {v}: pp512 {statistics.median(x[0] for x in res[v]):9.1f}  tg128 {statistics.median(x[1] for x in res[v]):7.1f}")
PY
