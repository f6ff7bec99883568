#!/usr/bin/env python3
"""A random-weight Qwen3.5 with the 0.8B model's layer shapes (hidden 1024; DeltaNet 16 key and
16 value heads of 128, so the real 1 MiB f32 state per layer; gated attention 8 heads / 2 KV heads
of 256; MLP 3584), for benchmarks of the hybrid's serving path (the prefix cache's recurrent
checkpoints: bench/harness/engine_ratios.py --only agent). Written by mlx-lm itself (random init,
affine 4-bit, group 64), with the tiny byte-level tokenizer of scripts/make_tiny_qwen35.py (so the
vocabulary stays 512 and the embeddings small) and the real Qwen3.5 chat template.

usage: .venv/bin/python scripts/make_bench_qwen35.py OUT [--layers N] [--vocab V] [--dtype bfloat16|float32] [--bits B]
       [--template Qwen3.5-4B.jinja]
(--layers: 24 is the real depth; fewer keep a run on 2 cores short, every 4th is full attention;
--vocab 248320: the real vocabulary size, so the tied embedding / LM head has the released shape and
decode streams the released bytes: the byte-level tokenizer's 512 tokens are padded with
vocabulary entries "<|pad_N|>" that no text encodes to, up to V; a random model may generate them;
--dtype: the weights' dtype before quantizing, so also the scales' and biases': bfloat16 as the
released checkpoints (and mlx-community's conversions of them) have, float32 for mlx-lm on
mlx[cpu] as a peer, whose CPU backend emulates half-precision arithmetic)"""
import argparse
import json
import os
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.utils import quantize_model, save_config, save_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_qwen35 as tiny  # noqa: E402

SHAPE = {"hidden_size": 1024, "intermediate_size": 3584, "num_attention_heads": 8, "num_key_value_heads": 2,
         "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
         "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
         "tie_word_embeddings": True, "max_position_embeddings": 32768}


def pad_tokenizer(path, vocab):
    """Extends a tokenizer.json to `vocab` ids with vocabulary entries no merge produces (as a real
    248k-entry vocabulary is, not 248k added tokens: those cost tokenizers a pattern each)."""
    tj = json.loads(path.read_text())
    v = tj["model"]["vocab"]
    n = len(v) + sum(1 for t in tj["added_tokens"] if t["content"] not in v)
    for i in range(n, vocab):
        v[f"<|pad_{i}|>"] = i
    path.write_text(json.dumps(tj))


def main():
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--bits", type=int, choices=(2, 3, 4, 5, 6, 8), default=4, help="MLX affine bits (group 64)")
    ap.add_argument("--template", default=str(root / ".." / "shared" / "fixtures" / "chat-templates" /
                                              "Qwen3.5-4B.jinja"))
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    tc = dict(tiny.BASE, **SHAPE, num_hidden_layers=a.layers, vocab_size=a.vocab)
    tc["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(a.layers)]
    model = tiny.build(7, tc)
    model.set_dtype(getattr(mx, a.dtype))
    qmodel, qcfg = quantize_model(model, tiny.full_config(tc), 64, a.bits)
    out = Path(a.out)
    save_model(out, qmodel)
    save_config(qcfg, out / "config.json")
    tiny.write_tokenizer(out, min(512, a.vocab))
    if a.vocab > 512:
        pad_tokenizer(out / "tokenizer.json", a.vocab)
    (out / "tokenizer_config.json").write_text(json.dumps({"chat_template": Path(a.template).read_text()}))
    print("wrote", out)


if __name__ == "__main__":
    main()
