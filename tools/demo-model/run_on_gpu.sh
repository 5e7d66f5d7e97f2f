#!/usr/bin/env bash
# Train Guild's demo qwen3moe model, export it and produce reference outputs.
#
#   bash tools/demo-model/run_on_gpu.sh OUT_DIR
#
# Needs (on the GPU machine, offline): python3 with torch, numpy, safetensors,
# tokenizers, transformers (matplotlib optional); the committed
# tools/demo-model/tokenizer/ and the carried tools/demo-model/data/tokens/
# (or data/corpus.jsonl, tokenized on the fly).
#
# Environment:
#   TRAIN_MINUTES  training-loop budget in minutes (default 5.5; whole script ~1.5 min more)
#   TRAIN_EXTRA    extra train.py arguments (e.g. "--compile" or "--lr 3e-3")
#   SMOKE=1        tiny config on CPU, a few steps (checks the pipeline end to end)
#   WORK_DIR       scratch folder for the checkpoint and the F32 GGUF (default /tmp/guild-demo-work)
#
# OUT_DIR gets at most 8 flat files, each <= 16 MiB:
#   guild-demo-qwen3moe-Q8_0.gguf, train_log.csv, loss.png, hf_check.json,
#   hf_logits.f32, routing_stats.json, summary.json
# WORK_DIR keeps checkpoint/ (transformers format) and guild-demo-qwen3moe-F32.gguf
# (for exact logit comparisons with the runtime on that machine).
set -euo pipefail
OUT=${1:?usage: run_on_gpu.sh OUT_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${WORK_DIR:-/tmp/guild-demo-work}
SMOKE=${SMOKE:-0}
TRAIN_MINUTES=${TRAIN_MINUTES:-5.5}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
stamp() { echo "[run_on_gpu] $(( $(date +%s) - T0 ))s: $*"; }

if [ "$SMOKE" = 1 ]; then
  TRAIN_ARGS=(--smoke --max-minutes 1)
  CHECK_ARGS=(--device cpu --n-predict 8 --routing-tokens 512)
else
  TRAIN_ARGS=(--max-minutes "$TRAIN_MINUTES")
  CHECK_ARGS=()
  python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print("[run_on_gpu]", torch.__version__, torch.cuda.get_device_name(0))'
fi

stamp "training"
# shellcheck disable=SC2086
python3 "$HERE/train.py" "${TRAIN_ARGS[@]}" --out-dir "$WORK" ${TRAIN_EXTRA:-}

stamp "exporting GGUF"
GGUF="$OUT/guild-demo-qwen3moe-Q8_0.gguf"
python3 "$HERE/export_gguf.py" "$WORK/checkpoint" "$GGUF" --type q8_0 --check | tee "$WORK/export_q8_0.log"
python3 "$HERE/export_gguf.py" "$WORK/checkpoint" "$WORK/guild-demo-qwen3moe-F32.gguf" --type f32 --check \
  --max-bytes 1000000000 | tee "$WORK/export_f32.log"

stamp "transformers reference outputs"
CHECK_RC=0
python3 "$HERE/check_hf.py" "$WORK/checkpoint" "$OUT" "${CHECK_ARGS[@]}" || CHECK_RC=$?

cp "$WORK/train_log.csv" "$OUT/train_log.csv"
python3 "$HERE/plot_loss.py" "$OUT/train_log.csv" "$OUT/loss.png" || echo "[run_on_gpu] plot failed (ignored)"

stamp "summary"
python3 - "$WORK" "$OUT" "$CHECK_RC" "$T0" <<'PY'
import json, os, sys, time
work, out, check_rc, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = {"train": json.load(open(os.path.join(work, "train_summary.json")))}
for t in ("q8_0", "f32"):
    log = open(os.path.join(work, f"export_{t}.log")).read().splitlines()
    s[f"export_{t}"] = next((json.loads(l.split("check OK ", 1)[1]) for l in log if "check OK " in l), None)
s["export_f32"]["path"] = os.path.join(work, "guild-demo-qwen3moe-F32.gguf")
hc = os.path.join(out, "hf_check.json")
if os.path.exists(hc):
    h = json.load(open(hc))
    s["hf_check"] = {"max_abs_logit_diff_hf_vs_ours": h["max_abs_logit_diff_hf_vs_ours"],
                     "transformers": h["transformers"],
                     "prompts": [{"user": p["messages"][-1]["content"], "prompt_tokens": p["prompt_tokens"],
                                  "greedy_tokens": p["greedy_tokens"], "greedy_text": p["greedy_text"]}
                                 for p in h["prompts"]],
                     "routing": h["routing"]}
s["check_hf_exit_code"] = check_rc
s["checkpoint_dir"] = os.path.join(work, "checkpoint")
s["wall_seconds"] = int(time.time()) - t0
files = sorted(os.listdir(out)) + ["summary.json"]
s["files"] = {f: os.path.getsize(os.path.join(out, f)) if os.path.exists(os.path.join(out, f)) else None for f in files}
json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1)
tr = s["train"]
print("=" * 72)
print(f"steps {tr['steps']}, tokens {tr['tokens']/1e6:.1f}M ({tr['epochs']} epochs) in {tr['train_seconds']}s; "
      f"final val loss {tr['final_val_loss']:.4f} (kept {tr['kept']})")
print(f"GGUF {s['export_q8_0']['file']}: {s['export_q8_0']['mib']} MiB; F32 GGUF for parity: {s['export_f32']['path']}")
if "hf_check" in s:
    print(f"transformers {s['hf_check']['transformers']} vs model.py: max |logit diff| "
          f"{s['hf_check']['max_abs_logit_diff_hf_vs_ours']:.3g}")
    for p in s["hf_check"]["prompts"]:
        print(f"  {p['user']!r} -> {p['greedy_text']!r}")
        print(f"    prompt tokens: {','.join(map(str, p['prompt_tokens']))}")
    print(f"  routing max share per layer: {s['hf_check']['routing']['max_share']}")
big = [f for f, n in s["files"].items() if n and n > 16 * 2**20]
print(f"OUT files ({len(s['files'])}): {', '.join(s['files'])}" + (f"  OVER 16 MiB: {big}" if big else ""))
print(f"total wall {s['wall_seconds']}s")
if len(s["files"]) > 8 or big:
    sys.exit("output limits exceeded")
PY
stamp "done"
exit "$CHECK_RC"
