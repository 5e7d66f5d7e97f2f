#!/usr/bin/env python3
"""Export the demo checkpoint to GGUF v3 (qwen3moe), numpy only.

  python3 tools/demo-model/export_gguf.py CHECKPOINT_DIR OUT.gguf [--type q8_0|f16|f32] [--check]
  python3 tools/demo-model/export_gguf.py --check-only OUT.gguf [--checkpoint CHECKPOINT_DIR]

CHECKPOINT_DIR holds config.json, model.safetensors (transformers Qwen3MoE
names, per-expert or fused experts) and tokenizer.json (+ tokenizer_config.json).

Our own GGUF writer/reader and Q8_0 quantizer (no gguf-py):
  * header "GGUF", version 3, u64 tensor count, u64 KV count; KV pairs; tensor
    infos (name, n_dims, ne[] with ne0 = row length, ggml type, offset); data
    section aligned to 32 bytes, every tensor padded to 32.
  * Q8_0: blocks of 32 along the row; d = max|x| / 127 stored as fp16, then 32
    int8 q = roundf(x / d) (half away from zero, like ggml's reference).
  * norms (1-D) and the router (ffn_gate_inp) stay F32, like llama.cpp's converter.
Metadata and tensor names/shapes are those llama.cpp's convert_hf_to_gguf.py
writes for Qwen3MoeForCausalLM.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_config import from_hf_config, gguf_metadata  # noqa: E402
from chat_format import CHAT_TEMPLATE  # noqa: E402

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
              T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
TYPE_BY_NAME = {"u8": T_U8, "i8": T_I8, "u16": T_U16, "i16": T_I16, "u32": T_U32, "i32": T_I32, "f32": T_F32,
                "bool": T_BOOL, "str": T_STR, "u64": T_U64, "i64": T_I64, "f64": T_F64}

# ggml tensor types
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
GGML_NAME = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0"}
QK8_0 = 32
Q8_0_BLOCK_BYTES = 2 + QK8_0
# general.file_type (llama_ftype)
FTYPE = {"f32": 0, "f16": 1, "q8_0": 7}

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4

MAX_RETURN_BYTES = 16 * 2**20


# --------------------------------------------------------------------------
# safetensors (read with numpy only)

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dt = info["dtype"]
            b, e = info["data_offsets"]
            buf = raw[base + b:base + e]
            if dt == "BF16":
                a = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(buf, dtype=ST_DTYPES[dt])
            out[name] = np.asarray(a.reshape(info["shape"]), dtype=np.float32)
    return out


# --------------------------------------------------------------------------
# quantization

def quantize_q8_0(x):
    """x float32 [..., K] with K % 32 == 0 -> uint8 bytes of Q8_0 blocks (same leading shape)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % QK8_0 == 0, f"row length {x.shape[-1]} is not a multiple of {QK8_0}"
    blocks = x.reshape(-1, QK8_0)
    amax = np.max(np.abs(blocks), axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d > 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = blocks * idv[:, None]
    q = np.trunc(v + np.copysign(np.float32(0.5), v)).astype(np.int8)  # roundf: half away from zero
    out = np.empty((blocks.shape[0], Q8_0_BLOCK_BYTES), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def dequantize_q8_0(raw, n):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q8_0_BLOCK_BYTES)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)[:n]


def tensor_bytes(ggml_type, n_elems):
    if ggml_type == GGML_F32:
        return 4 * n_elems
    if ggml_type == GGML_F16:
        return 2 * n_elems
    if ggml_type == GGML_Q8_0:
        return n_elems // QK8_0 * Q8_0_BLOCK_BYTES
    raise ValueError(ggml_type)


# --------------------------------------------------------------------------
# GGUF writer

class GGUFWriter:
    def __init__(self):
        self.kv = []        # (key, type, value, elem_type)
        self.tensors = []   # (name, ne list, ggml type, bytes)

    def add(self, key, typ, value):
        if isinstance(typ, str):
            typ = TYPE_BY_NAME[typ]
        self.kv.append((key, typ, value, None))

    def add_array(self, key, elem_type, values):
        if isinstance(elem_type, str):
            elem_type = TYPE_BY_NAME[elem_type]
        self.kv.append((key, T_ARR, list(values), elem_type))

    def add_tensor(self, name, array, ggml_type):
        """array: numpy float32 in PyTorch/row-major order; ne = reversed shape."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        ne = list(reversed(a.shape))
        if ggml_type == GGML_F32:
            data = a.tobytes()
        elif ggml_type == GGML_F16:
            data = a.astype(np.float16).tobytes()
        elif ggml_type == GGML_Q8_0:
            data = quantize_q8_0(a).tobytes()
        else:
            raise ValueError(ggml_type)
        assert len(data) == tensor_bytes(ggml_type, a.size)
        self.tensors.append((name, ne, ggml_type, data))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _value(self, typ, value, elem_type=None):
        if typ == T_STR:
            return self._str(value)
        if typ == T_ARR:
            out = [struct.pack("<IQ", elem_type, len(value))]
            if elem_type == T_STR:
                out.extend(self._str(v) for v in value)
            else:
                out.append(np.asarray(value, dtype=np.dtype(SCALAR_FMT[elem_type])).tobytes())
            return b"".join(out)
        return struct.pack(SCALAR_FMT[typ], value)

    def write(self, path):
        head = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))]
        for key, typ, value, et in self.kv:
            head.append(self._str(key) + struct.pack("<I", typ) + self._value(typ, value, et))
        offset = 0
        for name, ne, gt, data in self.tensors:
            head.append(self._str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                        + struct.pack("<IQ", gt, offset))
            offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        header = b"".join(head)
        with open(path, "wb") as f:
            f.write(header)
            f.write(b"\0" * (-len(header) % ALIGNMENT))
            for name, ne, gt, data in self.tensors:
                f.write(data)
                f.write(b"\0" * (-len(data) % ALIGNMENT))
        return os.path.getsize(path)


# --------------------------------------------------------------------------
# GGUF reader (for --check)

class GGUFFile:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise ValueError("not a GGUF file")
        self.version, n_t, n_kv = struct.unpack("<IQQ", self._take(20))
        self.kv = {}
        for _ in range(n_kv):
            key = self._string()
            typ = self._u32()
            self.kv[key] = self._read_value(typ)
        align = self.kv.get("general.alignment", ALIGNMENT)
        self.tensors = {}
        for _ in range(n_t):
            name = self._string()
            nd = self._u32()
            ne = list(struct.unpack(f"<{nd}Q", self._take(8 * nd)))
            gt, off = struct.unpack("<IQ", self._take(12))
            if name in self.tensors:
                raise ValueError(f"duplicate tensor {name}")
            self.tensors[name] = {"ne": ne, "type": gt, "offset": off}
        self.data_start = (self.pos + align - 1) // align * align
        self.alignment = align

    def _take(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError("truncated file")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def _u32(self):
        return struct.unpack("<I", self._take(4))[0]

    def _string(self):
        n = struct.unpack("<Q", self._take(8))[0]
        return self._take(n).decode("utf-8")

    def _read_value(self, typ):
        if typ == T_STR:
            return self._string()
        if typ == T_ARR:
            et, n = struct.unpack("<IQ", self._take(12))
            if et == T_STR:
                return [self._string() for _ in range(n)]
            dt = np.dtype(SCALAR_FMT[et])
            return np.frombuffer(self._take(dt.itemsize * n), dtype=dt).tolist()
        fmt = SCALAR_FMT[typ]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def tensor_data(self, name):
        t = self.tensors[name]
        n = int(np.prod(t["ne"]))
        start = self.data_start + t["offset"]
        raw = self.buf[start:start + tensor_bytes(t["type"], n)]
        if t["type"] == GGML_F32:
            a = np.frombuffer(raw, dtype=np.float32)
        elif t["type"] == GGML_F16:
            a = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        else:
            a = dequantize_q8_0(raw, n)
        return a.reshape(list(reversed(t["ne"])))


# --------------------------------------------------------------------------
# checkpoint -> GGUF

def load_checkpoint(ck):
    with open(os.path.join(ck, "config.json")) as f:
        hf = json.load(f)
    cfg = from_hf_config(hf)
    sd = read_safetensors(os.path.join(ck, "model.safetensors"))
    return cfg, hf, sd


def expert_stack(sd, L, cfg):
    """(gate [E,F,H], up [E,F,H], down [E,H,F]) from per-expert or fused names."""
    pre = f"model.layers.{L}.mlp.experts."
    Fd = cfg.moe_intermediate_size
    if pre + "gate_up_proj" in sd:
        gu = sd[pre + "gate_up_proj"]
        dn = sd[pre + "down_proj"]
        if gu.shape == (cfg.num_experts, cfg.hidden_size, 2 * Fd):  # some layouts store [E, H, 2F]
            gu = gu.transpose(0, 2, 1)
        if dn.shape == (cfg.num_experts, Fd, cfg.hidden_size):
            dn = dn.transpose(0, 2, 1)
        return gu[:, :Fd], gu[:, Fd:], dn
    gate = np.stack([sd[f"{pre}{e}.gate_proj.weight"] for e in range(cfg.num_experts)])
    up = np.stack([sd[f"{pre}{e}.up_proj.weight"] for e in range(cfg.num_experts)])
    down = np.stack([sd[f"{pre}{e}.down_proj.weight"] for e in range(cfg.num_experts)])
    return gate, up, down


def gguf_tensors(cfg, sd):
    """[(gguf name, float32 array in row-major torch order, is_matrix_weight)]"""
    out = [("token_embd.weight", sd["model.embed_tokens.weight"], True)]
    for L in range(cfg.num_hidden_layers):
        p = f"model.layers.{L}."
        b = f"blk.{L}."
        gate, up, down = expert_stack(sd, L, cfg)
        out += [
            (b + "attn_norm.weight", sd[p + "input_layernorm.weight"], False),
            (b + "attn_q.weight", sd[p + "self_attn.q_proj.weight"], True),
            (b + "attn_k.weight", sd[p + "self_attn.k_proj.weight"], True),
            (b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"], True),
            (b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"], True),
            (b + "attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"], False),
            (b + "attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"], False),
            (b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"], False),
            (b + "ffn_gate_inp.weight", sd[p + "mlp.gate.weight"], False),  # router: F32
            (b + "ffn_gate_exps.weight", gate, True),
            (b + "ffn_up_exps.weight", up, True),
            (b + "ffn_down_exps.weight", down, True),
        ]
    out += [("output_norm.weight", sd["model.norm.weight"], False),
            ("output.weight", sd["lm_head.weight"], True)]
    return out


def expected_shapes(cfg):
    """ggml ne (row length first) for every tensor."""
    H, V, E, Fd, hd = cfg.hidden_size, cfg.vocab_size, cfg.num_experts, cfg.moe_intermediate_size, cfg.head_dim
    s = {"token_embd.weight": [H, V], "output_norm.weight": [H], "output.weight": [H, V]}
    for L in range(cfg.num_hidden_layers):
        b = f"blk.{L}."
        s.update({b + "attn_norm.weight": [H], b + "attn_q.weight": [H, cfg.q_dim], b + "attn_k.weight": [H, cfg.kv_dim],
                  b + "attn_v.weight": [H, cfg.kv_dim], b + "attn_output.weight": [cfg.q_dim, H],
                  b + "attn_q_norm.weight": [hd], b + "attn_k_norm.weight": [hd], b + "ffn_norm.weight": [H],
                  b + "ffn_gate_inp.weight": [H, E], b + "ffn_gate_exps.weight": [H, Fd, E],
                  b + "ffn_up_exps.weight": [H, Fd, E], b + "ffn_down_exps.weight": [Fd, H, E]})
    return s


def load_tokenizer(ck):
    with open(os.path.join(ck, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    assert model["type"] == "BPE", model["type"]
    vocab = dict(model["vocab"])
    special = set()
    user_defined = set()
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        (special if t.get("special") else user_defined).add(t["content"])
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    missing = [i for i, t in enumerate(tokens) if t is None]
    if missing:
        raise ValueError(f"vocabulary has holes at ids {missing[:10]}")
    types = [TOKEN_CONTROL if t in special else TOKEN_USER_DEFINED if t in user_defined else TOKEN_NORMAL
             for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    for m in merges:
        assert m.count(" ") == 1, f"merge with a space inside a token: {m!r}"
    chat_template = CHAT_TEMPLATE
    tc = os.path.join(ck, "tokenizer_config.json")
    if os.path.exists(tc):
        with open(tc) as f:
            chat_template = json.load(f).get("chat_template") or chat_template
    return tokens, types, merges, chat_template


def build(ck, out_path, qtype, name=None):
    cfg, hf, sd = load_checkpoint(ck)
    tokens, types, merges, chat_template = load_tokenizer(ck)
    if len(tokens) != cfg.vocab_size:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, model vocab is {cfg.vocab_size}")
    matrix_type = {"q8_0": GGML_Q8_0, "f16": GGML_F16, "f32": GGML_F32}[qtype]
    w = GGUFWriter()
    w.add("general.architecture", "str", "qwen3moe")
    w.add("general.type", "str", "model")
    w.add("general.name", "str", name or cfg.name)
    w.add("general.description", "str",
          "Guild's small demo chat model (qwen3moe architecture, trained from scratch) on chat exchanges "
          "generated from WordNet 3.0 and King James Version prose. Contains information from WordNet 3.0: "
          "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. "
          "See tools/demo-model/DATA_LICENSES.md in the Guild repository.")
    w.add("general.license", "str", "other")
    w.add("general.license.name", "str", "guild-demo-model (training data: WordNet 3.0 license; KJV public domain)")
    w.add("general.file_type", "u32", FTYPE[qtype])
    w.add("general.quantization_version", "u32", 2)
    for key, typ, val in gguf_metadata(cfg):
        w.add(key, typ, val)
    w.add("tokenizer.ggml.model", "str", "gpt2")
    w.add("tokenizer.ggml.pre", "str", "qwen2")
    w.add_array("tokenizer.ggml.tokens", T_STR, tokens)
    w.add_array("tokenizer.ggml.token_type", T_I32, types)
    w.add_array("tokenizer.ggml.merges", T_STR, merges)
    w.add("tokenizer.ggml.bos_token_id", "u32", cfg.bos_token_id)
    w.add("tokenizer.ggml.eos_token_id", "u32", cfg.eos_token_id)
    w.add("tokenizer.ggml.padding_token_id", "u32", cfg.pad_token_id)
    w.add("tokenizer.ggml.add_bos_token", "bool", False)
    w.add("tokenizer.chat_template", "str", chat_template)
    for tname, arr, is_matrix in gguf_tensors(cfg, sd):
        w.add_tensor(tname, arr, matrix_type if is_matrix else GGML_F32)
    size = w.write(out_path)
    return cfg, size


def check(path, ck=None, expect_type=None):
    """Read the file back with our reader; verify metadata, shapes, sizes, offsets and (with the
    checkpoint) values. Returns a dict report; raises on failure."""
    g = GGUFFile(path)
    assert g.version == GGUF_VERSION, g.version
    kv = g.kv
    assert kv["general.architecture"] == "qwen3moe"
    from model_config import ModelConfig
    a = "qwen3moe."
    cfg = ModelConfig(
        vocab_size=len(kv["tokenizer.ggml.tokens"]), hidden_size=kv[a + "embedding_length"],
        num_hidden_layers=kv[a + "block_count"], num_attention_heads=kv[a + "attention.head_count"],
        num_key_value_heads=kv[a + "attention.head_count_kv"], head_dim=kv[a + "attention.key_length"],
        num_experts=kv[a + "expert_count"], num_experts_per_tok=kv[a + "expert_used_count"],
        moe_intermediate_size=kv[a + "expert_feed_forward_length"], intermediate_size=kv[a + "feed_forward_length"],
        max_position_embeddings=kv[a + "context_length"], rope_theta=kv[a + "rope.freq_base"],
        rms_norm_eps=kv[a + "attention.layer_norm_rms_epsilon"])
    assert kv[a + "attention.value_length"] == cfg.head_dim
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "qwen2"
    n_vocab = len(kv["tokenizer.ggml.tokens"])
    assert len(kv["tokenizer.ggml.token_type"]) == n_vocab
    assert len(set(kv["tokenizer.ggml.tokens"])) == n_vocab, "duplicate token strings"
    for m in kv["tokenizer.ggml.merges"]:
        l, _, r = m.partition(" ")
        assert l and r, m
    for k in ("bos_token_id", "eos_token_id", "padding_token_id"):
        assert 0 <= kv["tokenizer.ggml." + k] < n_vocab
    assert kv["tokenizer.ggml.token_type"][kv["tokenizer.ggml.eos_token_id"]] == TOKEN_CONTROL
    assert kv["tokenizer.ggml.add_bos_token"] is False
    assert "tokenizer.chat_template" in kv
    exp = expected_shapes(cfg)
    assert set(exp) == set(g.tensors), (set(exp) ^ set(g.tensors))
    file_size = len(g.buf)
    ends = []
    for tname, t in g.tensors.items():
        assert t["ne"] == exp[tname], (tname, t["ne"], exp[tname])
        assert t["offset"] % g.alignment == 0, tname
        is_vec = len(t["ne"]) == 1 or tname.endswith("ffn_gate_inp.weight")
        if is_vec:
            assert t["type"] == GGML_F32, (tname, t["type"])
        elif expect_type is not None:
            assert t["type"] == expect_type, (tname, GGML_NAME.get(t["type"]))
        nbytes = tensor_bytes(t["type"], int(np.prod(t["ne"])))
        ends.append((t["offset"], t["offset"] + nbytes, tname))
    ends.sort()
    for (s0, e0, n0), (s1, _, n1) in zip(ends, ends[1:]):
        assert e0 <= s1, f"tensors overlap: {n0} / {n1}"
    assert g.data_start + ends[-1][1] <= file_size, "file truncated"
    assert file_size - (g.data_start + ends[-1][1]) < g.alignment, "trailing bytes"
    report = {"file": os.path.basename(path), "bytes": file_size, "mib": round(file_size / 2**20, 3),
              "tensors": len(g.tensors), "kv": len(kv), "vocab": n_vocab, "merges": len(kv["tokenizer.ggml.merges"]),
              "types": sorted({GGML_NAME[t["type"]] for t in g.tensors.values()})}
    if ck:
        cfg2, _, sd = load_checkpoint(ck)
        worst = 0.0
        for tname, arr, _ in gguf_tensors(cfg2, sd):
            back = g.tensor_data(tname)
            assert back.shape == arr.shape, (tname, back.shape, arr.shape)
            t = g.tensors[tname]["type"]
            err = float(np.max(np.abs(back - arr)))
            if t == GGML_F32:
                assert err == 0.0, (tname, err)
            elif t == GGML_F16:
                assert err <= 1e-3 * max(1.0, float(np.max(np.abs(arr)))), (tname, err)
            else:  # Q8_0: at most half a step per block (+ fp16 rounding of d)
                blocks = arr.reshape(-1, QK8_0)
                d = (np.max(np.abs(blocks), axis=1) / np.float32(127)).astype(np.float32)
                d16 = d.astype(np.float16).astype(np.float32)
                bound = 0.5 * d + 127 * np.abs(d16 - d) + 1e-6 * d + 1e-12
                e = np.abs(back.reshape(-1, QK8_0) - blocks)
                assert np.all(e <= bound[:, None]), tname
            worst = max(worst, err)
        report["max_abs_error_vs_checkpoint"] = worst
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "f16", "f32"])
    ap.add_argument("--name", default=None)
    ap.add_argument("--check", action="store_true", help="read the file back and verify it")
    ap.add_argument("--check-only", metavar="GGUF")
    ap.add_argument("--max-bytes", type=int, default=MAX_RETURN_BYTES,
                    help="warn when the file is larger (16 MiB: the GPU machine's return limit)")
    args = ap.parse_args()

    if args.check_only:
        rep = check(args.check_only, args.checkpoint)
        print(json.dumps(rep))
        return
    if not args.checkpoint or not args.out:
        ap.error("CHECKPOINT_DIR and OUT.gguf are required")
    cfg, size = build(args.checkpoint, args.out, args.type, args.name)
    print(f"[export] wrote {args.out}: {size:,} bytes ({size / 2**20:.2f} MiB), type {args.type}")
    if size > args.max_bytes:
        print(f"[export] WARNING: larger than {args.max_bytes / 2**20:.0f} MiB", file=sys.stderr)
    if args.check:
        want = {"q8_0": GGML_Q8_0, "f16": GGML_F16, "f32": GGML_F32}[args.type]
        rep = check(args.out, args.checkpoint, want)
        print("[export] check OK " + json.dumps(rep))


if __name__ == "__main__":
    main()
