"""Configuration of Guild's demo qwen3moe model (and the tiny smoke-test variant).

The field names follow transformers' Qwen3MoeConfig so `to_hf_config()` can be
written straight to config.json; `gguf_metadata()` gives the matching
llama.cpp-style qwen3moe.* GGUF keys.
"""
from dataclasses import asdict, dataclass, field, replace


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    head_dim: int = 32
    num_experts: int = 16
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    # Width of a dense FFN. No layer is dense (mlp_only_layers = []), so this is
    # unused by the math; like Qwen3-30B-A3B it is num_experts_per_tok *
    # moe_intermediate_size, and it becomes qwen3moe.feed_forward_length.
    intermediate_size: int = 256
    max_position_embeddings: int = 512
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    norm_topk_prob: bool = True
    router_aux_loss_coef: float = 0.003
    initializer_range: float = 0.02
    bos_token_id: int = 0   # <|endoftext|> (never added: add_bos_token = false)
    eos_token_id: int = 2   # <|im_end|> ends an assistant turn
    pad_token_id: int = 0   # <|endoftext|>
    name: str = "guild-demo-qwen3moe"
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def q_dim(self):
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self):
        return self.num_key_value_heads * self.head_dim


DEMO = ModelConfig()

# Tiny config for CPU smoke tests (all Q8_0 row lengths stay multiples of 32).
SMOKE = replace(DEMO, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                head_dim=32, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                intermediate_size=64, max_position_embeddings=128, name="guild-demo-qwen3moe-smoke")

PRESETS = {"demo": DEMO, "smoke": SMOKE}


def param_count(c: ModelConfig):
    """(total, active per token) parameter counts."""
    H, L, E, F = c.hidden_size, c.num_hidden_layers, c.num_experts, c.moe_intermediate_size
    attn = H * c.q_dim + 2 * H * c.kv_dim + c.q_dim * H + 2 * c.head_dim
    norms = 2 * H
    router = E * H
    expert = 3 * H * F
    per_layer_total = attn + norms + router + E * expert
    per_layer_active = attn + norms + router + c.num_experts_per_tok * expert
    emb = c.vocab_size * H
    head = c.vocab_size * H
    total = emb + head + H + L * per_layer_total
    active = head + H + L * per_layer_active  # the embedding lookup is not a matmul
    return total, active


def to_hf_config(c: ModelConfig):
    """config.json content for transformers' Qwen3MoeForCausalLM (v4 and v5)."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_position_embeddings,
        "initializer_range": c.initializer_range,
        "rms_norm_eps": c.rms_norm_eps,
        "use_cache": True,
        "tie_word_embeddings": False,
        # v4 reads rope_theta; v5 reads rope_parameters (and also accepts rope_theta)
        "rope_theta": c.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": c.num_hidden_layers,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "moe_intermediate_size": c.moe_intermediate_size,
        "num_experts": c.num_experts,
        "num_experts_per_tok": c.num_experts_per_tok,
        "norm_topk_prob": c.norm_topk_prob,
        "output_router_logits": False,
        "router_aux_loss_coef": c.router_aux_loss_coef,
        "bos_token_id": c.bos_token_id,
        "eos_token_id": c.eos_token_id,
        "pad_token_id": c.pad_token_id,
        "torch_dtype": "float32",
    }


def from_hf_config(d):
    rope = d.get("rope_theta") or (d.get("rope_parameters") or {}).get("rope_theta", 1e6)
    keys = {f for f in ModelConfig.__dataclass_fields__ if f not in ("name", "extra", "rope_theta")}
    return ModelConfig(rope_theta=float(rope), **{k: d[k] for k in keys if k in d})


def gguf_metadata(c: ModelConfig):
    """qwen3moe.* hyper-parameter keys as llama.cpp's converter writes them."""
    a = "qwen3moe"
    return [
        (f"{a}.block_count", "u32", c.num_hidden_layers),
        (f"{a}.context_length", "u32", c.max_position_embeddings),
        (f"{a}.embedding_length", "u32", c.hidden_size),
        (f"{a}.feed_forward_length", "u32", c.intermediate_size),
        (f"{a}.attention.head_count", "u32", c.num_attention_heads),
        (f"{a}.attention.head_count_kv", "u32", c.num_key_value_heads),
        (f"{a}.rope.freq_base", "f32", c.rope_theta),
        (f"{a}.attention.layer_norm_rms_epsilon", "f32", c.rms_norm_eps),
        (f"{a}.expert_used_count", "u32", c.num_experts_per_tok),
        (f"{a}.attention.key_length", "u32", c.head_dim),
        (f"{a}.attention.value_length", "u32", c.head_dim),
        (f"{a}.expert_count", "u32", c.num_experts),
        (f"{a}.expert_feed_forward_length", "u32", c.moe_intermediate_size),
    ]


def describe(c: ModelConfig):
    total, active = param_count(c)
    d = {k: v for k, v in asdict(c).items() if k != "extra"}
    d["params_total"] = total
    d["params_active_per_token"] = active
    return d


if __name__ == "__main__":
    import json
    for name, c in PRESETS.items():
        total, active = param_count(c)
        q8 = total * 34 / 32 / 2**20
        print(f"{name}: {total / 1e6:.2f} M params, {active / 1e6:.2f} M active/token, ~{q8:.1f} MiB at Q8_0")
    print(json.dumps(describe(DEMO), indent=1))
