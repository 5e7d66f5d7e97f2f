#!/usr/bin/env python3
"""Reference outputs of the trained checkpoint from transformers' Qwen3MoeForCausalLM.

  python3 tools/demo-model/check_hf.py CHECKPOINT_DIR OUT_DIR [--n-predict 48] [--device cuda]

Loads the checkpoint in float32 with eager attention (and eager experts in
transformers v5), and writes into OUT_DIR (flat):
  hf_check.json    per prompt: chat messages, rendered text, prompt token ids,
                   greedy continuation (ids + text), the row range of its logits
                   in hf_logits.f32; plus the max |logit difference| between
                   transformers and our own PyTorch implementation (model.py)
  hf_logits.f32    float32 logits for every prompt position of every prompt,
                   rows concatenated ([rows, vocab], row-major), the layout of
                   `guild-eval --logits-out` for one prompt
  routing_stats.json  how often each expert is chosen (top-k) per layer on sample text
To compare with Guild's runtime:
  guild-eval --model OUT/model.gguf --prompt-tokens <prompt_tokens> --logits-out x.f32 --n-predict 48
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chat_format import render_chat  # noqa: E402

PROMPTS = [
    [{"role": "user", "content": "What does happy mean?"}],
    [{"role": "user", "content": "Hello! Who are you?"}],
    [{"role": "user", "content": "Use the word river in a sentence."}],
]

SAMPLE_TEXT = render_chat([
    {"role": "user", "content": "What is another word for big?"},
    {"role": "assistant", "content": "Another word for \"big\" is \"large\"."},
    {"role": "user", "content": "What does the word ocean mean?"},
    {"role": "assistant", "content": "An ocean is a large body of water constituting a principal part of the "
                                     "hydrosphere."},
]) + "In the beginning God created the heaven and the earth. And the earth was without form, and void."


def load_hf(ck, device):
    from transformers import Qwen3MoeForCausalLM
    kw = dict(attn_implementation="eager")
    attempts = [dict(dtype=torch.float32, experts_implementation="eager"), dict(dtype=torch.float32),
                dict(torch_dtype=torch.float32)]
    err = None
    for extra in attempts:
        try:
            m, info = Qwen3MoeForCausalLM.from_pretrained(ck, output_loading_info=True, **kw, **extra)
            break
        except (TypeError, ValueError) as e:
            err = e
    else:
        raise err
    bad = {k: sorted(v) for k, v in info.items() if v and k != "error_msgs"}
    if bad or info.get("error_msgs"):
        raise RuntimeError(f"checkpoint did not load cleanly: {bad} {info.get('error_msgs')}")
    return m.to(device).eval().float()


def load_ours(ck, device):
    from model import Qwen3MoeLM
    from model_config import from_hf_config
    from export_gguf import read_safetensors
    with open(os.path.join(ck, "config.json")) as f:
        cfg = from_hf_config(json.load(f))
    m = Qwen3MoeLM(cfg)
    sd = {k: torch.from_numpy(v.copy()) for k, v in read_safetensors(os.path.join(ck, "model.safetensors")).items()}
    m.load_hf_state_dict(sd)
    return m.to(device).eval().float()


@torch.no_grad()
def hf_logits(m, ids, device):
    return m(torch.tensor([ids], device=device)).logits[0].float()


@torch.no_grad()
def greedy(m, ids, n, eos_ids, device, ours=False):
    seq = list(ids)
    out = []
    for _ in range(n):
        x = torch.tensor([seq], device=device)
        logits = m(x)[0, -1] if ours else m(x).logits[0, -1]
        t = int(torch.argmax(logits).item())
        out.append(t)
        seq.append(t)
        if t in eos_ids:
            break
    return out


@torch.no_grad()
def routing_stats(m, cfg, token_chunks, device):
    counts = np.zeros((cfg.num_hidden_layers, cfg.num_experts), dtype=np.int64)
    top1 = np.zeros_like(counts)
    hooks = []

    def make_hook(L):
        def hook(mod, inp, out):
            logits = out[0] if isinstance(out, tuple) else out
            probs = torch.softmax(logits.float().reshape(-1, cfg.num_experts), dim=-1)
            _, idx = torch.topk(probs, cfg.num_experts_per_tok, dim=-1)
            counts[L] += np.bincount(idx.reshape(-1).cpu().numpy(), minlength=cfg.num_experts)
            top1[L] += np.bincount(idx[:, 0].cpu().numpy(), minlength=cfg.num_experts)
        return hook

    for L, layer in enumerate(m.model.layers):
        hooks.append(layer.mlp.gate.register_forward_hook(make_hook(L)))
    n_tokens = 0
    for chunk in token_chunks:
        m(torch.tensor([chunk], device=device))
        n_tokens += len(chunk)
    for h in hooks:
        h.remove()
    frac = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    ent = -(np.where(frac > 0, frac * np.log(np.maximum(frac, 1e-30)), 0)).sum(1)
    return {
        "tokens": n_tokens,
        "num_experts": cfg.num_experts,
        "top_k": cfg.num_experts_per_tok,
        "counts": counts.tolist(),
        "top1_counts": top1.tolist(),
        "share": np.round(frac, 5).tolist(),
        "entropy_nats": np.round(ent, 4).tolist(),
        "uniform_entropy_nats": round(float(np.log(cfg.num_experts)), 4),
        "max_share": np.round(frac.max(1), 4).tolist(),
        "min_share": np.round(frac.min(1), 5).tolist(),
        "unused_experts": [[int(e) for e in np.nonzero(c == 0)[0]] for c in counts],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--n-predict", type=int, default=48)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tokens-dir", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--routing-tokens", type=int, default=16384, help="sample size for routing_stats.json")
    args = ap.parse_args()
    t0 = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out_dir, exist_ok=True)
    device = torch.device(args.device)

    import transformers
    from tokenizers import Tokenizer
    from model_config import from_hf_config
    tok = Tokenizer.from_file(os.path.join(args.checkpoint, "tokenizer.json"))
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = from_hf_config(json.load(f))
    hf = load_hf(args.checkpoint, device)
    ours = load_ours(args.checkpoint, device)
    eos = {cfg.eos_token_id, cfg.pad_token_id}

    results, rows, all_logits = [], 0, []
    worst = 0.0
    top1_agree = []
    for msgs in PROMPTS:
        text = render_chat(msgs, add_generation_prompt=True)
        ids = tok.encode(text).ids
        lh = hf_logits(hf, ids, device)
        lo = ours(torch.tensor([ids], device=device))[0].float().detach()
        diff = float((lh - lo).abs().max().item())
        worst = max(worst, diff)
        top1_agree.append(float((lh.argmax(-1) == lo.argmax(-1)).float().mean().item()))
        all_logits.append(lh.cpu().numpy().astype(np.float32))
        g = greedy(hf, ids, args.n_predict, eos, device)
        g_ours = greedy(ours, ids, args.n_predict, eos, device, ours=True)
        results.append({
            "messages": msgs, "text": text, "prompt_tokens": ids,
            "greedy_tokens": g, "greedy_text": tok.decode(g, skip_special_tokens=False),
            "greedy_tokens_ours_equal": g == g_ours,
            "logits_rows": [rows, rows + len(ids)],
        })
        rows += len(ids)
        print(f"[check_hf] {msgs[-1]['content']!r} -> {results[-1]['greedy_text']!r}", flush=True)
    np.concatenate(all_logits).tofile(os.path.join(args.out_dir, "hf_logits.f32"))

    sample = []
    vpath = os.path.join(args.tokens_dir, "val.bin")
    if os.path.exists(vpath):
        val = np.fromfile(vpath, dtype=np.uint16).astype(np.int64)[:args.routing_tokens]
        n_ctx = min(512, cfg.max_position_embeddings)
        sample = [val[i:i + n_ctx].tolist() for i in range(0, len(val), n_ctx) if len(val[i:i + n_ctx]) > 8]
        sample_src = f"first {len(val)} tokens of data/tokens/val.bin (held-out documents)"
    if not sample:
        sample = [tok.encode(SAMPLE_TEXT).ids]
        sample_src = "built-in sample text"
    rs = routing_stats(hf, cfg, sample, device)
    rs["sample"] = sample_src
    with open(os.path.join(args.out_dir, "routing_stats.json"), "w") as f:
        json.dump(rs, f, indent=1)

    report = {
        "checkpoint": os.path.abspath(args.checkpoint),
        "transformers": transformers.__version__, "torch": torch.__version__, "device": str(device),
        "dtype": "float32", "attn_implementation": "eager",
        "experts_implementation": getattr(hf.config, "_experts_implementation", None),
        "vocab": cfg.vocab_size, "logits_file": "hf_logits.f32", "logits_layout": "float32 [rows, vocab] row-major",
        "max_abs_logit_diff_hf_vs_ours": worst, "top1_agreement_hf_vs_ours": top1_agree,
        "eos_token_ids": sorted(eos), "prompts": results,
        "routing": {"max_share": rs["max_share"], "min_share": rs["min_share"], "entropy_nats": rs["entropy_nats"]},
        "seconds": round(time.time() - t0, 1),
    }
    with open(os.path.join(args.out_dir, "hf_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"[check_hf] HF vs ours: max |logit diff| {worst:.3g}; greedy equal: "
          f"{[r['greedy_tokens_ours_equal'] for r in results]}; routing max share per layer {rs['max_share']}",
          flush=True)
    tol = 1e-3 * max(1.0, float(max(np.abs(a).max() for a in all_logits)))
    if worst > tol:
        print(f"[check_hf] WARNING: transformers and model.py differ by {worst} (> {tol})", flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
