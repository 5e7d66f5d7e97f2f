"""PyTorch qwen3moe, computed the way llama.cpp (and transformers' Qwen3MoeForCausalLM) compute it.

  x = embed(tokens)
  per layer:
    h = RMSNorm(x)                                   (eps 1e-6, weight * x / rms)
    q, k, v = h Wq, h Wk, h Wv                       (no bias)
    q, k = RMSNorm_head(q), RMSNorm_head(k)          (per head, over head_dim)
    q, k = rope_neox(q), rope_neox(k)                (rotate halves, theta 1e6)
    x = x + softmax(q k^T / sqrt(hd) + causal) v Wo  (GQA: q head h uses kv head h // (nh / nkv))
    h = RMSNorm(x)
    p = softmax(h Wr) over all experts; top-k; weights renormalised to sum 1
    x = x + sum_k w_k * down_k(silu(gate_k h) * up_k h)
  logits = RMSNorm(x) W_lm (untied)

Parameter names are transformers' (v5 in-memory layout for the experts:
mlp.experts.gate_up_proj [E, 2F, H] with gate rows first, mlp.experts.down_proj
[E, H, F]); `hf_state_dict()` gives the per-expert on-disk names that both
transformers v4 and v5 (through its conversion mapping) load.

The expert FFN is computed densely for all experts and mixed with the sparse
top-k weights (zeros elsewhere): mathematically the top-k MoE (unselected
experts get exactly zero output weight and zero gradient) but free of
data-dependent shapes, so it is fast for these tiny experts and compiles well.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from model_config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf


def rope_tables(head_dim, max_pos, theta, device=None):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim))
    pos = torch.arange(max_pos, dtype=torch.float64, device=device)
    ang = torch.outer(pos, inv)  # [T, hd/2]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope_neox(x, cos, sin):
    """x [B, nh, T, hd]; NEOX style: pairs (i, i + hd/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, None], sin[None, None]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden_size, c.q_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.kv_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.kv_dim, bias=False)
        self.o_proj = nn.Linear(c.q_dim, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.c
        v = self.v_proj(x).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q = self.q_norm(self.q_proj(x).view(B, T, c.num_attention_heads, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, c.num_key_value_heads, c.head_dim)).transpose(1, 2)
        q = apply_rope_neox(q, cos[:T], sin[:T]).to(v.dtype)
        k = apply_rope_neox(k, cos[:T], sin[:T]).to(v.dtype)
        rep = c.num_attention_heads // c.num_key_value_heads
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(c.head_dim))
        return self.o_proj(o.transpose(1, 2).reshape(B, T, c.q_dim))


class Router(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c.num_experts, c.hidden_size))


class Experts(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        E, H, Fd = c.num_experts, c.hidden_size, c.moe_intermediate_size
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * Fd, H))  # rows [0, F) gate, [F, 2F) up
        self.down_proj = nn.Parameter(torch.empty(E, H, Fd))


class SparseMoe(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.gate = Router(c)
        self.experts = Experts(c)

    def route(self, h):
        """h [N, H] -> (probs [N, E] fp32, top-k weights [N, k], top-k ids [N, k])."""
        with torch.autocast(device_type=h.device.type, enabled=False):
            logits = F.linear(h.float(), self.gate.weight.float())
        probs = torch.softmax(logits, dim=-1)
        topv, topi = torch.topk(probs, self.c.num_experts_per_tok, dim=-1)
        if self.c.norm_topk_prob:
            topv = topv / topv.sum(dim=-1, keepdim=True)
        return probs, topv, topi

    def forward(self, h):
        B, T, H = h.shape
        c = self.c
        E, Fd = c.num_experts, c.moe_intermediate_size
        h = h.reshape(B * T, H)
        probs, topv, topi = self.route(h)
        w = torch.zeros_like(probs).scatter(1, topi, topv)  # [N, E], zero for unselected experts
        gu = F.linear(h, self.experts.gate_up_proj.reshape(E * 2 * Fd, H)).view(B * T, E, 2 * Fd)
        a = F.silu(gu[..., :Fd]) * gu[..., Fd:] * w.to(gu.dtype).unsqueeze(-1)  # [N, E, F]
        down = self.experts.down_proj.permute(1, 0, 2).reshape(H, E * Fd)  # [H, E*F]
        out = F.linear(a.reshape(B * T, E * Fd), down)
        # Switch-style load-balancing loss: E * sum_e f_e * P_e (1.0 when balanced)
        frac = torch.zeros_like(probs[0]).scatter_add(0, topi.reshape(-1), torch.ones_like(topv).reshape(-1))
        frac = frac / topi.numel()
        aux = E * torch.sum(frac * probs.mean(0))
        return out.view(B, T, H), aux, frac.detach()


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = SparseMoe(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        m, aux, frac = self.mlp(self.post_attention_layernorm(x))
        return x + m, aux, frac


class Inner(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Qwen3MoeLM(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.model = Inner(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        cos, sin = rope_tables(c.head_dim, c.max_position_embeddings, c.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self, seed=0):
        c = self.config
        g = torch.Generator().manual_seed(seed)
        std = c.initializer_range
        out_std = std / math.sqrt(2 * c.num_hidden_layers)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
                continue
            s = out_std if name.endswith(("o_proj.weight", "experts.down_proj")) else std
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * s)

    def forward(self, idx, targets=None):
        c = self.config
        B, T = idx.shape
        x = self.model.embed_tokens(idx)
        aux_total = 0.0
        fracs = []
        for layer in self.model.layers:
            x, aux, frac = layer(x, self.rope_cos, self.rope_sin)
            aux_total = aux_total + aux
            fracs.append(frac)
        logits = self.lm_head(self.model.norm(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.float().view(-1, c.vocab_size), targets.reshape(-1))
        aux_mean = aux_total / c.num_hidden_layers
        return logits, loss, aux_mean, torch.stack(fracs)

    # ---- checkpoint names -------------------------------------------------
    def hf_state_dict(self):
        """Per-expert tensor names (transformers' on-disk format for Qwen3MoE)."""
        c = self.config
        Fd = c.moe_intermediate_size
        out = {}
        for k, v in self.state_dict().items():
            if k.startswith("rope_"):
                continue
            v = v.detach().float().cpu().contiguous()
            if k.endswith("mlp.experts.gate_up_proj"):
                pre = k[: -len("gate_up_proj")]
                for e in range(c.num_experts):
                    out[f"{pre}{e}.gate_proj.weight"] = v[e, :Fd].clone()
                    out[f"{pre}{e}.up_proj.weight"] = v[e, Fd:].clone()
            elif k.endswith("mlp.experts.down_proj"):
                pre = k[: -len("down_proj")]
                for e in range(c.num_experts):
                    out[f"{pre}{e}.down_proj.weight"] = v[e].clone()
            else:
                out[k] = v
        return out

    def load_hf_state_dict(self, sd):
        """Accepts per-expert names (v4 / on-disk) or fused names (v5 in-memory)."""
        c = self.config
        own = {}
        for L in range(c.num_hidden_layers):
            pre = f"model.layers.{L}.mlp.experts."
            if pre + "gate_up_proj" in sd:
                continue
            if pre + "0.gate_proj.weight" in sd:
                gu = torch.stack([torch.cat([sd.pop(f"{pre}{e}.gate_proj.weight"), sd.pop(f"{pre}{e}.up_proj.weight")])
                                  for e in range(c.num_experts)])
                dn = torch.stack([sd.pop(f"{pre}{e}.down_proj.weight") for e in range(c.num_experts)])
                own[pre + "gate_up_proj"] = gu
                own[pre + "down_proj"] = dn
        sd = dict(sd)
        sd.update(own)
        missing, unexpected = self.load_state_dict(sd, strict=False)
        missing = [m for m in missing if not m.startswith("rope_")]
        if missing or unexpected:
            raise ValueError(f"checkpoint mismatch: missing {missing}, unexpected {unexpected}")
