#!/usr/bin/env python3
"""Writes a random-weight Qwen3 chat model with the real Qwen3 tokenizer and chat template (a
thinking template that drops earlier turns' reasoning when it re-renders history), for tests and
benchmarks of multi-turn behaviour. Seeded: the same arguments give the same files.

  .venv/bin/python scripts/make_tiny_chat_model.py OUT_DIR [--hidden 64] [--layers 2] [--seed 0]

The tokenizer files come from ../shared/fixtures/tokenizers/qwen3 (Hugging Face's, unchanged).
Weights are f32 safetensors in the Hugging Face Qwen3ForCausalLM layout, tied embeddings.
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "tokenizers", "qwen3")
VOCAB = 151936  # Qwen3's padded embedding rows (the tokenizer has 151669 ids)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in blobs:
            f.write(a.tobytes())


def make(out, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, inter=128, seed=0, ctx=8192):
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.05):
        return rng.standard_normal(shape, dtype=np.float32) * scale

    t = {"model.embed_tokens.weight": w(VOCAB, hidden, scale=1.0), "model.norm.weight": np.ones(hidden, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(heads * head_dim, hidden)
        t[p + "self_attn.k_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.v_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.o_proj.weight"] = w(hidden, heads * head_dim)
        t[p + "self_attn.q_norm.weight"] = np.ones(head_dim, np.float32)
        t[p + "self_attn.k_norm.weight"] = np.ones(head_dim, np.float32)
        t[p + "mlp.gate_proj.weight"] = w(inter, hidden)
        t[p + "mlp.up_proj.weight"] = w(inter, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, inter)
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": head_dim, "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": inter, "max_position_embeddings": ctx,
        "num_attention_heads": heads, "num_hidden_layers": layers, "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
        "vocab_size": VOCAB,
    }
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_safetensors(os.path.join(tmp, "model.safetensors"), t)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643]}, f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(FIXTURE, name), os.path.join(tmp, name))
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--inter", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    make(a.out, hidden=a.hidden, layers=a.layers, inter=a.inter, seed=a.seed)


if __name__ == "__main__":
    main()
