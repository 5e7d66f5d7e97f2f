#!/usr/bin/env bash
# Runs the libFuzzer harnesses of a GUILD_FUZZ build for a bounded time each
# (docs/FUZZING.md). CI runs it after the other steps (.ci/run).
#   native/fuzz/run_fuzzers.sh BUILD_DIR [HARNESS...]     (default: all five)
# FUZZ_SECONDS     time per harness (default 60)
# FUZZ_ARTIFACTS   where crashing / slow / oversized inputs go
#                  (default BUILD_DIR/fuzz-artifacts)
# Each harness runs on a temporary copy of its committed corpus, so the new
# inputs it finds never land in the repository; one process (no -jobs), so
# runs on a shared 2-core machine stay one core each.
# Exit status 1 when any harness found a crash, a leak, UB, a hang
# (-timeout), an allocation or RSS over the limit, or failed an invariant.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:?usage: run_fuzzers.sh BUILD_DIR [HARNESS...]}"
shift
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(gguf_reader model_load tokenizer manifest gkpkg_archive)
seconds="${FUZZ_SECONDS:-60}"
artifacts="${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}"
mkdir -p "$artifacts"

dict_for() {
  case "$1" in
    gguf_reader|model_load) echo "$here/dict/gguf.dict" ;;
    tokenizer) echo "$here/dict/tokenizer.dict" ;;
    manifest|gkpkg_archive) echo "$here/dict/json.dict" ;;
  esac
}

# Length flags: the longest input libFuzzer makes (its default is the
# longest seed) — room for long texts and documents, files stay at their
# seeds' sizes; texts get the whole length from the start (-len_control=0),
# since slow paths show on long ones.
len_flags_for() {
  case "$1" in
    tokenizer) echo "-max_len=4096 -len_control=0" ;;
    manifest|gkpkg_archive) echo "-max_len=8192" ;;
    *) echo "-max_len=0" ;;  # 0: the longest seed
  esac
}

failed=()
for h in "${harnesses[@]}"; do
  bin="$build/native/fuzz/fuzz_$h"
  if [[ ! -x "$bin" ]]; then
    echo "fuzz_$h: not built ($bin); build the target guild_fuzzers of a -DGUILD_FUZZ=ON build" >&2
    failed+=("$h (not built)")
    continue
  fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/guild-fuzz-$h.XXXXXX")"
  cp -r "$here/corpus/$h" "$work/corpus"
  echo "---- fuzz_$h: ${seconds} s, corpus of $(ls "$work/corpus" | wc -l) seeds"
  # detect_leaks: a leak is a finding too. The sanitizers abort on the first
  # error so that libFuzzer saves the input.
  ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$bin" "$work/corpus" -dict="$(dict_for "$h")" $(len_flags_for "$h") -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 -print_funcs=0 \
      -artifact_prefix="$artifacts/$h-" 2>&1 | grep --line-buffered -v -E '^#[0-9]+\s+(NEW|REDUCE)'
  rc=${PIPESTATUS[0]}
  rm -rf "$work"
  if ((rc != 0)); then
    failed+=("$h (exit $rc)")
    for f in "$artifacts/$h-"*; do
      [[ -f "$f" ]] || continue
      echo "finding: $f ($(stat -c %s "$f") bytes); first bytes:"
      head -c 256 "$f" | od -A d -t x1 | head -n 17
    done
  fi
done

if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (inputs under $artifacts; replay one with $build/native/fuzz/fuzz_<name> FILE)" >&2
  exit 1
fi
echo "fuzzing: no findings (${#harnesses[@]} harnesses, ${seconds} s each)"
