#!/usr/bin/env python3
"""Train the demo model's byte-level BPE tokenizer and pre-tokenize the corpus.

  python3 tools/demo-model/train_tokenizer.py            # train + tokenize
  python3 tools/demo-model/train_tokenizer.py --no-train # reuse tokenizer/tokenizer.json, only tokenize

Tokenizer: byte-level BPE exactly like Qwen2's (so a GGUF with
tokenizer.ggml.model = "gpt2" and tokenizer.ggml.pre = "qwen2" reproduces the
ids in llama.cpp-compatible runtimes):
  * no normalizer
  * pre-tokenizer: Split(Qwen2 regex, isolated) then ByteLevel(no prefix space, no regex)
  * BPE without byte fallback, no unk token, ignore_merges = false
  * vocab 8192 = 3 special tokens (ids 0..2) + 256 byte symbols + 7933 merges

Outputs:
  tools/demo-model/tokenizer/tokenizer.json          (committed)
  tools/demo-model/tokenizer/tokenizer_config.json   (committed; chat template, special tokens)
  tools/demo-model/data/tokens/train.bin, val.bin    (uint16 token ids, documents joined by <|endoftext|>)
  tools/demo-model/data/tokens/meta.json
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chat_format import CHAT_TEMPLATE, EOT, IM_END, SPECIAL_TOKENS  # noqa: E402

# Qwen2's pre-tokenizer regex (llama.cpp: LLAMA_VOCAB_PRE_TYPE_QWEN2); single digits.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def training_pieces(path):
    """Texts with the special markers cut out (the trainer does not extract
    added tokens itself, and encoding always splits them off first)."""
    pat = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS))
    for text in read_texts(path):
        for piece in pat.split(text):
            if piece:
                yield piece


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    tok = Tokenizer(models.BPE(byte_fallback=False, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def train(corpus, vocab_size, out_dir):
    from tokenizers import pre_tokenizers, trainers
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_pieces(corpus), trainer=trainer)
    assert tok.get_vocab_size() == vocab_size, f"vocab is {tok.get_vocab_size()}, wanted {vocab_size}"
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    # tokenizer_config.json so transformers' AutoTokenizer (and chat templates) work
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 512,
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": EOT,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "rstrip": False, "normalized": False,
                                          "single_word": False, "special": True}
                                 for i, s in enumerate(SPECIAL_TOKENS)},
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump({"eos_token": IM_END, "pad_token": EOT}, f, indent=2)
    print(f"saved {path}", file=sys.stderr)
    return path


def sanity_check(tok):
    vocab = tok.get_vocab()
    bad = [t for t in vocab if "<|" in t and t not in SPECIAL_TOKENS]
    assert not bad, f"tokens that swallowed chat markup: {bad[:10]}"
    for s in ["Hello, world!  What's 1234 + 56?\n\nNew\tline  ", "The cat's toy; it's 'quoted'.",
              "<|im_start|>user\nWhat does dog mean?<|im_end|>\n<|im_start|>assistant\n", "naïve café — ok"]:
        ids = tok.encode(s).ids
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == s, (s, back)
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>").ids
    assert ids[0] == 1 and ids[-1] == 2, ids


def tokenize_corpus(tok, corpus, out_dir, val_frac, seed):
    texts = list(read_texts(corpus))
    rng = random.Random(seed)
    idx = list(range(len(texts)))
    rng.shuffle(idx)
    n_val = max(1, int(len(texts) * val_frac))
    splits = {"val": [texts[i] for i in idx[:n_val]], "train": [texts[i] for i in idx[n_val:]]}
    eot = tok.token_to_id(EOT)
    os.makedirs(out_dir, exist_ok=True)
    meta = {}
    for name, docs in splits.items():
        arrs = []
        for b in range(0, len(docs), 4096):
            for enc in tok.encode_batch(docs[b:b + 4096]):
                arrs.append(np.asarray(enc.ids + [eot], dtype=np.uint16))
        arr = np.concatenate(arrs)
        arr.tofile(os.path.join(out_dir, f"{name}.bin"))
        meta[name] = {"docs": len(docs), "tokens": int(arr.size)}
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus.jsonl"))
    ap.add_argument("--tokenizer-dir", default=os.path.join(HERE, "tokenizer"))
    ap.add_argument("--tokens-dir", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--val-frac", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-train", action="store_true", help="reuse the existing tokenizer.json")
    args = ap.parse_args()

    from tokenizers import Tokenizer
    path = os.path.join(args.tokenizer_dir, "tokenizer.json")
    if not args.no_train:
        train(args.corpus, args.vocab_size, args.tokenizer_dir)
    tok = Tokenizer.from_file(path)
    sanity_check(tok)
    meta = tokenize_corpus(tok, args.corpus, args.tokens_dir, args.val_frac, args.seed)
    with open(path, "rb") as f:
        meta["tokenizer_sha256"] = hashlib.sha256(f.read()).hexdigest()
    meta["vocab_size"] = tok.get_vocab_size()
    meta["dtype"] = "uint16"
    with open(os.path.join(args.tokens_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    n_bytes = os.path.getsize(args.corpus)
    print(json.dumps(meta), file=sys.stderr)
    print(f"corpus {n_bytes / 1e6:.1f} MB -> {meta['train']['tokens'] + meta['val']['tokens']} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
