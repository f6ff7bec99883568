#!/usr/bin/env python3
"""Tiny random-weight Qwen3.5 (Gated DeltaNet hybrid) text models, written by mlx-lm itself,
with greedy goldens from mlx-lm (mlx on CPU, float32) for tests/model_qwen35_test.cpp.

For each config (dense with tied embeddings; untied with linear_num_value_heads >
linear_num_key_heads and GQA) it writes, under OUT/<config>/:
  mlx-f32/  mlx_lm.utils.save_model of the randomly initialised model (the mlx-community layout:
            `language_model.model.*` names, conv1d weights [C, K, 1], (1 + w) norms folded)
  hf-f32/   the same weights in the Hugging Face checkpoint layout (`model.language_model.*`,
            conv1d [C, 1, K], norms stored as w - 1), which mlx_lm's sanitize turns back
  mlx-q4/   mlx_lm.utils.quantize_model (affine, 4 bits, group 64) of the f32 model
and in each directory a byte-level BPE tokenizer.json of the model's vocabulary and greedy.json: 5 prompts of random token ids, 64 greedy steps each, with the
token, top-8 logits and 64 probe logits per step, computed by mlx_lm.utils.load_model of that very
directory (prompt in one call, then one token per call with mlx-lm's own cache).

usage: .venv/bin/python scripts/make_tiny_qwen35.py [OUT]   (default $RAPID_MODEL_CACHE/qwen35-tiny)
"""
import copy
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import mlx.core as mx
import mlx.nn as nn
import mlx_lm
from mlx.utils import tree_flatten
from mlx_lm.models import qwen3_5
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model, quantize_model, save_config, save_model
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

STEPS = 64
TOPN = 8
PROMPT_LENS = [1, 5, 13, 31, 58]

BASE = {
    "model_type": "qwen3_5_text",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 4096,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 32,
    "linear_value_head_dim": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 2,
    "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    "eos_token_id": 0,
    "bos_token_id": None,
}

CONFIGS = {
    # 3 DeltaNet layers then one full-attention layer; lm_head tied to the embeddings.
    "dense-tied": dict(num_hidden_layers=4, full_attention_interval=4, tie_word_embeddings=True),
    # 2 value heads per key head in the DeltaNet layers, one KV head for 4 query heads, own lm_head.
    "vheads-untied": dict(num_hidden_layers=6, full_attention_interval=3, tie_word_embeddings=False,
                          num_key_value_heads=1, head_dim=16, linear_num_key_heads=2,
                          linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=32,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                           "partial_rotary_factor": 0.5}),
}

# The (1 + w) norms mlx-lm's sanitize folds (the gated DeltaNet norm is a plain w norm).
FOLDED_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
                ".q_norm.weight", ".k_norm.weight")


def text_config(name):
    c = copy.deepcopy(BASE)
    c.update(copy.deepcopy(CONFIGS[name]))
    n, every = c["num_hidden_layers"], c["full_attention_interval"]
    c["layer_types"] = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    return c


def full_config(tc):
    # The released checkpoints' wrapper: the LM in text_config, tie flag on both levels.
    return {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
            "tie_word_embeddings": tc["tie_word_embeddings"], "text_config": tc}


def build(seed, tc):
    mx.random.seed(seed)
    return spread(qwen3_5.Model(qwen3_5.ModelArgs.from_dict(full_config(tc))))


def spread(model, extra=lambda k, v: None):
    """Random init leaves norms at 1, dt_bias at 1, and greedy output stuck on one token: spread
    them so that a wrong offset, a swapped half or a missing gate changes the output. `extra(k, v)`
    may give a parameter its own value first (None: the rules below)."""
    upd = {}
    for k, v in tree_flatten(model.parameters()):
        if (x := extra(k, v)) is not None:
            upd[k] = x
        elif k.endswith("norm.weight"):
            upd[k] = 1.0 + 0.3 * mx.random.normal(v.shape)
        elif k.endswith("dt_bias"):
            upd[k] = mx.random.normal(v.shape)
        elif k.endswith("embed_tokens.weight") or k.endswith("lm_head.weight"):
            upd[k] = mx.random.normal(v.shape) * (0.3 if "embed" in k else 0.5)
        elif k.endswith("conv1d.weight"):
            upd[k] = mx.random.normal(v.shape) * 0.5
        elif k.endswith("proj.weight") or k.endswith("proj_qkv.weight"):
            upd[k] = v * 2.0  # layers that move the residual stream away from the input embedding
    model.load_weights(list(upd.items()), strict=False)
    mx.eval(model.parameters())
    return model


def hf_tensor(k, v):
    """One mlx-lm tensor (name, value) in the Hugging Face layout."""
    if k.startswith("language_model.model."):
        nk = "model.language_model." + k[len("language_model.model."):]
    elif k.startswith("language_model.lm_head."):
        nk = "lm_head." + k[len("language_model.lm_head."):]
    else:
        raise SystemExit("unexpected tensor " + k)
    return nk, hf_value(k, v)


def hf_value(k, v):
    """A tensor's Hugging Face value: conv1d [C, 1, K], (1 + w) norms stored as w."""
    if "conv1d.weight" in k:
        return v.moveaxis(2, 1)  # [C, K, 1] -> [C, 1, K]
    if any(k.endswith(s) for s in FOLDED_NORMS):
        return v - 1.0
    return v


def write_hf_copy(src_dir, dst_dir, tc):
    """The Hugging Face layout of the same weights (what mlx_lm.sanitize undoes)."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    w = mx.load(str(src_dir / "model.safetensors"))
    out = dict(hf_tensor(k, v) for k, v in w.items())
    mx.save_safetensors(str(dst_dir / "model.safetensors"), out, metadata={"format": "pt"})
    with open(dst_dir / "config.json", "w") as f:
        json.dump(full_config(tc), f, indent=2)


def write_tokenizer(model_dir, vocab_size):
    """A byte-level BPE of the model's vocabulary size (id 0 = <|endoftext|>, the eos), trained on
    this file's own text, so that the CLI can run the tiny models on text."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(open(__file__).read().splitlines(), trainer)
    tok.save(str(model_dir / "tokenizer.json"))


def goldens(model_dir, seed):
    model, _ = load_model(model_dir)
    model.eval()
    rng = np.random.default_rng(seed)
    V = model.args.text_config["vocab_size"] if hasattr(model.args, "text_config") else model.args.vocab_size
    probe = sorted(int(i) for i in rng.choice(V, 64, replace=False))
    cases = []
    for n in PROMPT_LENS:
        ids = [int(i) for i in rng.integers(0, V, n)]
        cache = make_prompt_cache(model)
        logits = np.array(model(mx.array([ids]), cache=cache)[0, -1].astype(mx.float32)).astype(np.float64)
        steps = []
        for _ in range(STEPS):
            nxt = int(np.argmax(logits))
            top = np.argsort(-logits, kind="stable")[:TOPN]
            steps.append({"token": nxt, "max_abs_logit": float(np.max(np.abs(logits))),
                          "top_ids": [int(i) for i in top], "top_logits": [float(logits[i]) for i in top],
                          "probe_logits": [float(logits[i]) for i in probe]})
            logits = np.array(model(mx.array([[nxt]]), cache=cache)[0, -1].astype(mx.float32)).astype(np.float64)
        cases.append({"prompt": "random ids, %d tokens" % n, "prompt_ids": ids, "steps": steps})
    g = {"model": str(model_dir), "generator": "mlx_lm %s (mlx %s, cpu, float32)" % (mlx_lm.__version__, mx.__version__),
         "probe_ids": probe, "cases": cases}
    with open(model_dir / "greedy.json", "w") as f:
        json.dump(g, f, separators=(",", ":"))
    print(model_dir, [s["token"] for s in cases[-1]["steps"]][:16], flush=True)


def main():
    mx.set_default_device(mx.cpu)
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "qwen35-tiny"))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for i, name in enumerate(CONFIGS):
        tc = text_config(name)
        d = tmp / name
        model = build(1000 + i, tc)
        save_model(d / "mlx-f32", model)
        save_config(full_config(tc), d / "mlx-f32" / "config.json")
        write_hf_copy(d / "mlx-f32", d / "hf-f32", tc)
        qmodel, qcfg = quantize_model(model, full_config(tc), 64, 4)
        save_model(d / "mlx-q4", qmodel)
        save_config(qcfg, d / "mlx-q4" / "config.json")
        for sub in ("mlx-f32", "hf-f32", "mlx-q4"):
            write_tokenizer(d / sub, tc["vocab_size"])
            goldens(d / sub, 2000 + i)
    # Complete or absent: the tests generate the set when the directory is missing.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
