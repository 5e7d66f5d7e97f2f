#!/usr/bin/env python3
"""Train Guild's demo qwen3moe chat model (time-bounded).

GPU (the real run, ~6 min on one H200):
  python3 tools/demo-model/train.py --out-dir OUT --max-minutes 6
CPU smoke test (tiny config, a few steps):
  python3 tools/demo-model/train.py --smoke --out-dir /tmp/smoke

Reads tools/demo-model/data/tokens/{train,val}.bin (uint16, from
train_tokenizer.py). Writes
  OUT/checkpoint/{model.safetensors, config.json, generation_config.json, tokenizer*.json}
  OUT/train_log.csv, OUT/train_summary.json
The learning-rate schedule is a cosine over *wall time* (linear warm-up by
steps), so the run decays properly whatever the throughput turns out to be and
stops cleanly at --max-minutes.
"""
import argparse
import csv
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Qwen3MoeLM  # noqa: E402
from model_config import PRESETS, describe, param_count, to_hf_config  # noqa: E402


def log(*a):
    print(*a, flush=True)


def check_tokenizer_matches(tokens_dir, tokenizer_dir):
    """The token files must come from the tokenizer that goes into the checkpoint/GGUF."""
    import hashlib
    meta_path = os.path.join(tokens_dir, "meta.json")
    tj = os.path.join(tokenizer_dir, "tokenizer.json")
    if not (os.path.exists(meta_path) and os.path.exists(tj)):
        return
    with open(meta_path) as f:
        want = json.load(f).get("tokenizer_sha256")
    with open(tj, "rb") as f:
        have = hashlib.sha256(f.read()).hexdigest()
    if want and want != have:
        sys.exit(f"{tokens_dir} was made with another tokenizer.json (sha256 {want[:12]}, have {have[:12]}); "
                 "run train_tokenizer.py --no-train to re-tokenize")


def load_tokens(tokens_dir, vocab_size, split):
    path = os.path.join(tokens_dir, f"{split}.bin")
    if not os.path.exists(path):
        sys.exit(f"{path} missing: run prepare_data.py and train_tokenizer.py first")
    arr = np.fromfile(path, dtype=np.uint16)
    meta_path = os.path.join(tokens_dir, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("vocab_size") != vocab_size:
            sys.exit(f"tokens were made with vocab {meta.get('vocab_size')}, model has {vocab_size}")
    if arr.size and int(arr.max()) >= vocab_size:
        sys.exit("token id out of range")
    return arr


class Batcher:
    """Random windows from the token stream; a share of rows starts exactly at a
    document start (after <|endoftext|>), as chat prompts do at inference."""

    def __init__(self, arr, B, T, device, eot_id, doc_start_frac, seed):
        self.data = torch.from_numpy(arr.astype(np.int64)).to(device)
        self.B, self.T, self.device = B, T, device
        n = self.data.numel()
        assert n > T + 1, "not enough tokens for one window"
        starts = torch.nonzero(self.data[:-1] == eot_id).flatten() + 1
        starts = torch.cat([torch.zeros(1, dtype=torch.long, device=device), starts])
        self.doc_starts = starts[starts < n - T - 1]
        self.doc_start_frac = doc_start_frac
        self.g = torch.Generator(device=device).manual_seed(seed)
        self.offs = torch.arange(T + 1, device=device)

    def get(self):
        B, T, n = self.B, self.T, self.data.numel()
        r = torch.randint(0, n - T - 1, (B,), device=self.device, generator=self.g)
        d = self.doc_starts[torch.randint(0, self.doc_starts.numel(), (B,), device=self.device, generator=self.g)]
        use_doc = torch.rand(B, device=self.device, generator=self.g) < self.doc_start_frac
        s = torch.where(use_doc, d, r)
        w = self.data[s[:, None] + self.offs]
        return w[:, :-1], w[:, 1:]

    def fixed(self, k):
        """k deterministic windows (evaluation)."""
        n = self.data.numel()
        s = torch.linspace(0, n - self.T - 2, k, device=self.device).long()
        w = self.data[s[:, None] + self.offs]
        return w[:, :-1], w[:, 1:]


def param_groups(model, wd):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.ndim < 2 or "norm" in name or "embed_tokens" in name or "mlp.gate.weight" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def save_checkpoint(model, cfg, out_dir, tokenizer_dir, extra_meta):
    from safetensors.torch import save_file
    ck = os.path.join(out_dir, "checkpoint")
    os.makedirs(ck, exist_ok=True)
    sd = model.hf_state_dict()
    save_file(sd, os.path.join(ck, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(ck, "config.json"), "w") as f:
        json.dump(to_hf_config(cfg), f, indent=2)
    with open(os.path.join(ck, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg.bos_token_id, "eos_token_id": [cfg.eos_token_id, cfg.pad_token_id],
                   "pad_token_id": cfg.pad_token_id, "do_sample": False}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = os.path.join(tokenizer_dir, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(ck, name))
    with open(os.path.join(ck, "guild_demo.json"), "w") as f:
        json.dump({"config": describe(cfg), **extra_meta}, f, indent=1)
    return ck


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny config on CPU for a few steps")
    ap.add_argument("--preset", default=None, choices=sorted(PRESETS))
    ap.add_argument("--tokens-dir", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--tokenizer-dir", default=os.path.join(HERE, "tokenizer"))
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--device", default=None)
    ap.add_argument("--max-minutes", type=float, default=6.0, help="wall-time budget of the training loop")
    ap.add_argument("--max-steps", type=int, default=0, help="optional step cap (0 = none)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--seq-len", type=int, default=None)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=150)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--aux-coef", type=float, default=None, help="load-balancing loss coefficient")
    ap.add_argument("--doc-start-frac", type=float, default=0.5)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every-s", type=float, default=30.0)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    t_start = time.time()
    preset = args.preset or ("smoke" if args.smoke else "demo")
    cfg = PRESETS[preset]
    if args.aux_coef is not None:
        from dataclasses import replace
        cfg = replace(cfg, router_aux_loss_coef=args.aux_coef)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.smoke else "cpu"))
    B = args.batch_size or (4 if args.smoke else 128)
    T = args.seq_len or (64 if args.smoke else cfg.max_position_embeddings)
    max_steps = args.max_steps or (8 if args.smoke else 0)
    assert T <= cfg.max_position_embeddings
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out_dir, exist_ok=True)

    total, active = param_count(cfg)
    log(f"[train] preset={preset} device={device} params={total / 1e6:.2f}M (active {active / 1e6:.2f}M) "
        f"batch={B}x{T} budget={args.max_minutes} min torch={torch.__version__}")
    if device.type == "cuda":
        log(f"[train] gpu: {torch.cuda.get_device_name(device)}")

    corpus = os.path.join(HERE, "data", "corpus.jsonl")
    if not os.path.exists(os.path.join(args.tokens_dir, "train.bin")) and os.path.exists(corpus):
        log("[train] no token files; tokenizing data/corpus.jsonl with tokenizer/tokenizer.json")
        from tokenizers import Tokenizer
        from train_tokenizer import tokenize_corpus
        tokenize_corpus(Tokenizer.from_file(os.path.join(args.tokenizer_dir, "tokenizer.json")), corpus,
                        args.tokens_dir, 0.005, args.seed)
    check_tokenizer_matches(args.tokens_dir, args.tokenizer_dir)
    train_arr = load_tokens(args.tokens_dir, cfg.vocab_size, "train")
    val_arr = load_tokens(args.tokens_dir, cfg.vocab_size, "val")
    log(f"[train] tokens: train {train_arr.size:,} val {val_arr.size:,}")
    eot = 0
    train_b = Batcher(train_arr, B, T, device, eot, args.doc_start_frac, args.seed)
    val_b = Batcher(val_arr, min(B, 32), T, device, eot, 0.0, args.seed + 1)
    val_x, val_y = val_b.fixed(args.eval_batches * val_b.B)

    model = Qwen3MoeLM(cfg)
    model.init_weights(args.seed)
    model.to(device)
    use_amp = device.type == "cuda"
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=fused)
    fwd = torch.compile(model) if args.compile else model

    def autocast():
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_amp)

    @torch.no_grad()
    def evaluate():
        model.eval()
        losses = []
        for i in range(0, val_x.shape[0], val_b.B):
            with autocast():
                _, l, _, _ = model(val_x[i:i + val_b.B], val_y[i:i + val_b.B])  # uncompiled: no recompiles
            losses.append(l.float())
        model.train()
        return torch.stack(losses).mean().item()

    log_path = os.path.join(args.out_dir, "train_log.csv")
    logf = open(log_path, "w", newline="")
    writer = csv.writer(logf)
    writer.writerow(["step", "tokens", "elapsed_s", "lr", "loss", "aux_loss", "val_loss", "tokens_per_s",
                     "max_expert_share", "min_expert_share"])

    budget_s = args.max_minutes * 60.0
    usage = torch.zeros(cfg.num_hidden_layers, cfg.num_experts, device=device)
    loss_acc = torch.zeros((), device=device)
    aux_acc = torch.zeros((), device=device)
    n_acc = 0
    best = (float("inf"), None, 0)
    step, tokens = 0, 0
    val_loss = float("nan")
    t0 = time.time()
    last_eval = t0
    last_log_t, last_log_tokens = t0, 0
    first_step_s = None
    log(f"[train] startup {t0 - t_start:.1f}s; training...")
    while True:
        elapsed = time.time() - t0
        if elapsed >= budget_s or (max_steps and step >= max_steps):
            break
        frac = min(1.0, elapsed / budget_s)
        lr = args.lr * min(1.0, (step + 1) / args.warmup_steps)
        lr *= args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = train_b.get()
        with autocast():
            _, loss, aux, fr = fwd(x, y)
            total_loss = loss + cfg.router_aux_loss_coef * aux
        total_loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens += B * T
        loss_acc += loss.detach()
        aux_acc += aux.detach()
        usage += fr
        n_acc += 1
        if step == 1:
            if device.type == "cuda":
                torch.cuda.synchronize()
            first_step_s = time.time() - t0
            log(f"[train] first step {first_step_s:.1f}s (includes compile/warm-up), loss {loss.item():.3f}")
        now = time.time()
        do_eval = now - last_eval >= args.eval_every_s
        if step % args.log_every == 0 or do_eval or (max_steps and step >= max_steps):
            l = (loss_acc / n_acc).item()
            a = (aux_acc / n_acc).item()
            share = (usage / n_acc)
            mx, mn = share.max().item(), share.min().item()
            if do_eval:
                val_loss = evaluate()
                last_eval = time.time()
                if val_loss < best[0]:
                    best = (val_loss, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
            tps = (tokens - last_log_tokens) / max(1e-9, now - last_log_t)
            writer.writerow([step, tokens, f"{now - t0:.2f}", f"{lr:.6g}", f"{l:.5f}", f"{a:.5f}",
                             f"{val_loss:.5f}" if do_eval else "", f"{tps:.0f}", f"{mx:.4f}", f"{mn:.4f}"])
            logf.flush()
            log(f"[train] step {step} {now - t0:6.1f}s lr {lr:.2e} loss {l:.4f} aux {a:.3f}"
                + (f" val {val_loss:.4f}" if do_eval else "") + f" {tps / 1e3:.0f}k tok/s"
                f" expert share max {mx:.3f} min {mn:.4f}")
            last_log_t, last_log_tokens = now, tokens
            loss_acc.zero_()
            aux_acc.zero_()
            usage.zero_()
            n_acc = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.time() - t0
    final_val = evaluate()
    writer.writerow([step, tokens, f"{train_s:.2f}", "", "", "", f"{final_val:.5f}", "", "", ""])
    logf.close()
    chosen = "final"
    if best[1] is not None and best[0] < final_val - 0.02:
        model.load_state_dict(best[1])
        chosen = f"best (step {best[2]}, val {best[0]:.4f})"
    log(f"[train] done: {step} steps, {tokens / 1e6:.1f}M tokens in {train_s:.1f}s "
        f"({tokens / max(train_s, 1e-9) / 1e3:.0f}k tok/s); final val {final_val:.4f}; keeping {chosen}")
    summary = {"preset": preset, "steps": step, "tokens": tokens, "train_seconds": round(train_s, 2),
               "first_step_seconds": round(first_step_s or 0, 2), "final_val_loss": final_val,
               "best_val_loss": best[0], "kept": chosen, "batch": [B, T], "lr": args.lr,
               "compile": args.compile, "device": str(device),
               "train_tokens_available": int(train_arr.size),
               "epochs": round(tokens / max(1, train_arr.size), 2)}
    ck = save_checkpoint(model, cfg, args.out_dir, args.tokenizer_dir, {"training": summary})
    summary["wall_seconds_total"] = round(time.time() - t_start, 2)
    with open(os.path.join(args.out_dir, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log(f"[train] saved {ck} ; total wall {summary['wall_seconds_total']}s")


if __name__ == "__main__":
    main()
