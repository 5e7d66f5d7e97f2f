#!/usr/bin/env python3
"""Compare Guild's native runtime with HF transformers on the trained demo model.

    python3 compare_guild.py GUILD_EVAL GGUF HF_OUT_DIR OUT_JSON

Runs `guild-eval` (F32 KV) on every prompt of HF_OUT_DIR/hf_check.json, compares
its logits for every prompt position with hf_logits.f32 (max |d|, argmax agreement)
and its greedy continuation with transformers' greedy tokens. Exit status 1 when
the greedy tokens differ or the logits disagree beyond the tolerance.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TOL_MAX_ABS = 2e-3  # F32 weights, F32 KV, float32 math on both sides


def main():
    guild_eval, gguf, hf_dir, out_json = sys.argv[1:5]
    ref = json.load(open(os.path.join(hf_dir, "hf_check.json")))
    vocab = ref["vocab"]
    hf_logits = np.fromfile(os.path.join(hf_dir, ref["logits_file"]), dtype=np.float32).reshape(-1, vocab)
    report, ok = [], True
    for p in ref["prompts"]:
        ids = p["prompt_tokens"]
        # transformers' greedy list ends with the end-of-turn token; Guild
        # reports it as stop_reason "eos" instead of a token.
        want = list(p["greedy_tokens"])
        eos_ids = set(ref["eos_token_ids"])
        hf_stopped = bool(want) and want[-1] in eos_ids
        if hf_stopped:
            want = want[:-1]
        with tempfile.TemporaryDirectory() as tmp:
            lf = os.path.join(tmp, "logits.f32")
            res = subprocess.run([guild_eval, "--model", gguf, "--kv", "f32", "--prompt-tokens", ",".join(map(str, ids)),
                                  "--logits-out", lf, "--n-predict", str(len(p["greedy_tokens"]))],
                                 check=True, capture_output=True, text=True)
            got = json.loads(res.stdout)
            ours = np.fromfile(lf, dtype=np.float32).reshape(-1, vocab)
        a, b = p["logits_rows"]
        theirs = hf_logits[a:b]
        max_abs = float(np.abs(ours - theirs).max())
        argmax = float((ours.argmax(-1) == theirs.argmax(-1)).mean())
        same = got["tokens"] == want and (not hf_stopped or got["stop_reason"] == "eos")
        ok = ok and same and max_abs <= TOL_MAX_ABS
        report.append({"user": p["messages"][-1]["content"], "max_abs_logit_diff": max_abs, "argmax_agreement": argmax,
                       "greedy_equal": same, "guild_tokens": got["tokens"], "hf_tokens": want, "guild_text": got["text"]})
        print(f"[compare] {report[-1]['user']!r}: max|d| {max_abs:.3g}, argmax {argmax:.3f}, greedy equal {same}")
    with open(out_json, "w") as f:
        json.dump({"tolerance_max_abs": TOL_MAX_ABS, "ok": ok, "prompts": report}, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
