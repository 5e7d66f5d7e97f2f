#!/usr/bin/env bash
# The GPU scripts' synthetic model: guild-gen-model --preset qwen3-30b-a3b
# (Qwen3-30B-A3B's shapes, Q4_K experts) written to MODEL unless it exists
# (the generator writes a .partial file and renames it when done).
#
#   scripts/gpu/synth_model.sh BUILD_DIR MODEL LOG [guild-gen-model args, e.g. --layers 4]
set -u -o pipefail
BUILD=${1:?usage: synth_model.sh BUILD_DIR MODEL LOG [args]}
MODEL=${2:?usage: synth_model.sh BUILD_DIR MODEL LOG [args]}
LOG=${3:?usage: synth_model.sh BUILD_DIR MODEL LOG [args]}
shift 3
[ -f "$MODEL" ] && exit 0
echo "generating $MODEL"
"$BUILD/native/tools/guild-gen-model" --preset qwen3-30b-a3b "$@" --out "$MODEL" --threads "$(nproc)" \
  > "$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
