#!/usr/bin/env python3
"""Tiny Qwen3.5 models with random MTP heads (the `mtp.*` tensors of the released Qwen3.5
checkpoints) and an independent reference of the head, for tests/model_qwen35_test.cpp (the head
against the reference) and tests/engine_qwen35_mtp_test.cpp / tests/python/test_qwen35.py
(speculation with the head).

  .venv/bin/python scripts/make_qwen35_mtp.py [OUT]   (default $RAPID_MODEL_CACHE/qwen35-tiny-mtp)

For each config of scripts/make_tiny_qwen35.py (dense-tied: tied lm_head; vheads-untied: own
lm_head) it copies the Hugging Face layout (hf-f32) and adds seeded random MTP weights in that
layout (zero-centred (1 + w) norms): mtp.fc [H, 2H], mtp.pre_fc_norm_embedding,
mtp.pre_fc_norm_hidden, mtp.layers.0 (a gated full-attention decoder layer: q_proj gives per
head the query and its output gate, q/k norms, partial rotary, SiLU MLP) and mtp.norm.
gguf-f32/model.gguf is the same checkpoint as llama.cpp's converter writes it with the head
(scripts/qwen35_gguf.py: the head as the nextn block after the trunk).
mtp_ref.json holds, for random tokens t_0..t_{T-1}:
  hidden      the target's final-normed hidden rows h_i, computed by mlx-lm (the target model)
  mtp_logits  row i: the head at position i fed (h_i, t_{i+1}), as vLLM's
              Qwen3NextMultiTokenPredictor computes it: x = fc(cat[norm_e(embed(t_{i+1})),
              norm_h(h_i)]), the MTP layer (causal over the head's positions 0..i), mtp.norm,
              the lm_head. The layer is numpy written here, and checked against mlx-lm's own
              Qwen3.5 full-attention DecoderLayer loaded with the same weights (1e-5).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import mlx.core as mx
from mlx_lm.models import qwen3_5
from mlx_lm.utils import load_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import qwen35_gguf  # noqa: E402
CONFIGS = ["dense-tied", "vheads-untied"]
T = 12


def rms1p(x, w, eps):  # the (1 + w) RMSNorm of Qwen3.5 (weights stored zero-centred)
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def rope_partial(x, pos, rot, theta):  # rotate-half over the first `rot` dims of each head
    half = rot // 2
    inv = 1.0 / (theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot))
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)


def gated_attention_layer(W, p, x, tc):
    H, nh, nkv, hd, eps = tc["hidden_size"], tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"], tc["rms_norm_eps"]
    rp = tc["rope_parameters"]
    rot = int(hd * rp["partial_rotary_factor"])
    n = x.shape[0]
    pos = np.arange(n)
    h = rms1p(x, W[p + "input_layernorm.weight"], eps)
    qg = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(n, nh, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:]
    k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd)
    v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd)
    q = rope_partial(rms1p(q, W[p + "self_attn.q_norm.weight"], eps), pos, rot, rp["rope_theta"])
    k = rope_partial(rms1p(k, W[p + "self_attn.k_norm.weight"], eps), pos, rot, rp["rope_theta"])
    g = nh // nkv
    out = np.zeros((n, nh, hd))
    for hh in range(nh):
        s = q[:, hh, :] @ k[:, hh // g, :].T / np.sqrt(hd)
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        out[:, hh, :] = s @ v[:, hh // g, :]
    out = out / (1.0 + np.exp(-gate))
    x = x + out.reshape(n, -1) @ W[p + "self_attn.o_proj.weight"].T
    h = rms1p(x, W[p + "post_attention_layernorm.weight"], eps)
    a = h @ W[p + "mlp.gate_proj.weight"].T
    u = h @ W[p + "mlp.up_proj.weight"].T
    return x + ((a / (1 + np.exp(-a))) * u) @ W[p + "mlp.down_proj.weight"].T


def mtp_weights(tc, rng):
    H, I, nh, nkv, hd = (tc["hidden_size"], tc["intermediate_size"], tc["num_attention_heads"],
                         tc["num_key_value_heads"], tc["head_dim"])
    L = "mtp.layers.0."
    shapes = {"mtp.fc.weight": (H, 2 * H), "mtp.pre_fc_norm_embedding.weight": (H,),
              "mtp.pre_fc_norm_hidden.weight": (H,), "mtp.norm.weight": (H,),
              L + "input_layernorm.weight": (H,), L + "post_attention_layernorm.weight": (H,),
              L + "self_attn.q_proj.weight": (2 * nh * hd, H), L + "self_attn.k_proj.weight": (nkv * hd, H),
              L + "self_attn.v_proj.weight": (nkv * hd, H), L + "self_attn.o_proj.weight": (H, nh * hd),
              L + "self_attn.q_norm.weight": (hd,), L + "self_attn.k_norm.weight": (hd,),
              L + "mlp.gate_proj.weight": (I, H), L + "mlp.up_proj.weight": (I, H), L + "mlp.down_proj.weight": (H, I)}
    out = {}
    for name, shp in shapes.items():
        scale = 0.3 if len(shp) == 1 else 1.0 / np.sqrt(shp[1])
        out[name] = (scale * rng.standard_normal(shp)).astype(np.float32)
    return out


def check_against_mlx(W, tc, x):
    """The numpy layer vs mlx-lm's Qwen3.5 full-attention DecoderLayer with the same weights."""
    args = qwen3_5.TextModelArgs.from_dict(tc)
    layer = qwen3_5.DecoderLayer(args, tc["full_attention_interval"] - 1)
    norms = (".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight", ".k_norm.weight")
    ws = []
    for k, v in W.items():
        if k.startswith("mtp.layers.0."):
            v = v + 1.0 if k.endswith(norms) else v  # mlx-lm's sanitize folds the (1 + w) offset
            ws.append((k[len("mtp.layers.0."):], mx.array(v)))
    layer.load_weights(ws, strict=True)
    got = np.array(layer(mx.array(x[None].astype(np.float32)), mask="causal", cache=None)[0]).astype(np.float64)
    want = gated_attention_layer(W, "mtp.layers.0.", x, tc)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-5, f"numpy MTP layer disagrees with mlx-lm's DecoderLayer: {err}"
    return err


def make(src, dst, seed):
    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.load(open(src / "config.json"))
    tc = cfg["text_config"]
    W = {k: np.array(v).astype(np.float32) for k, v in mx.load(str(src / "model.safetensors")).items()}
    rng = np.random.default_rng(seed)
    W.update(mtp_weights(tc, rng))
    mx.save_safetensors(str(dst / "model.safetensors"), {k: mx.array(v) for k, v in W.items()},
                        metadata={"format": "pt"})
    shutil.copy(src / "config.json", dst / "config.json")
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")

    model, _ = load_model(src)  # the target, as mlx-lm computes it
    V, eps = tc["vocab_size"], tc["rms_norm_eps"]
    tokens = [int(t) for t in rng.integers(1, V, T)]
    hid = np.array(model.language_model.model(mx.array([tokens]))[0].astype(mx.float32)).astype(np.float64)
    embed = W["model.language_model.embed_tokens.weight"].astype(np.float64)
    head = embed if tc["tie_word_embeddings"] else W["lm_head.weight"].astype(np.float64)
    e = rms1p(embed[tokens[1:]], W["mtp.pre_fc_norm_embedding.weight"], eps)
    h = rms1p(hid[:-1], W["mtp.pre_fc_norm_hidden.weight"], eps)
    x = np.concatenate([e, h], axis=-1) @ W["mtp.fc.weight"].T.astype(np.float64)
    err = check_against_mlx(W, tc, x)
    y = rms1p(gated_attention_layer(W, "mtp.layers.0.", x, tc), W["mtp.norm.weight"], eps)
    logits = y @ head.T
    json.dump({"tokens": tokens, "hidden": hid.astype(np.float32).tolist(),
               "mtp_logits": logits.astype(np.float32).tolist(),
               "generator": "numpy (layer checked against mlx-lm DecoderLayer, max rel err %.1e)" % err},
              open(dst / "mtp_ref.json", "w"))
    print(dst, "layer vs mlx-lm %.1e" % err, flush=True)
    print("wrote", qwen35_gguf.mtp_copy(dst), flush=True)


def main():
    mx.set_default_device(mx.cpu)
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "qwen35-tiny-mtp"))
    base = out.parent / "qwen35-tiny"
    if not (base / "vheads-untied" / "mlx-q4" / "greedy.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_qwen35.py"), str(base)], check=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for i, name in enumerate(CONFIGS):
        make(base / name / "hf-f32", tmp / name, 3000 + i)
    shutil.rmtree(out, ignore_errors=True)  # complete or absent
    tmp.rename(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
