#!/usr/bin/env python3
"""A tiny random-weight GLM-4.7-Flash (model_type glm4_moe_lite), written by mlx-lm itself, with
greedy goldens from mlx-lm (mlx on CPU, float32) for tests/model_tiny_test.cpp and
tests/model_glm_test.cpp.

Config "glm" (what the real checkpoint has, smaller): DeepSeek-style multi-head latent attention
(q_lora_rank 64 with its RMSNorm, kv_lora_rank 64, a 64-wide no-rope and 16-wide interleaved-rope
query/key head, 32-wide value heads: V narrower than K), layer 0 a dense SwiGLU MLP
(first_k_dense_replace 1), layers 1-2 mixtures of 8 experts with sigmoid scores, a positive
e_score_correction_bias steering the choice (not the weights), grouped top-2 (n_group 2,
topk_group 1: only the best group's experts compete), renormalised weights times
routed_scaling_factor 1.8, and one shared expert; own lm_head.
As, under OUT/glm/:
  mlx-f32/  mlx_lm.utils.save_model: kv_b_proj split by mlx-lm's sanitize into per-head
            self_attn.embed_q.weight [heads, kv_lora, nope] and unembed_out.weight [heads, v, kv_lora],
            experts stacked as mlp.switch_mlp.{gate,up,down}_proj
  hf-f32/   the Hugging Face layout, as zai-org/GLM-4.7-Flash ships it: self_attn.kv_b_proj.weight
            [heads * (nope + v), kv_lora] (per head its nope key rows, then its value rows), experts per
            expert (mlp.experts.N.gate_proj.weight), shared experts as mlp.shared_experts.*, and the
            MTP layer's tensors (model.layers.3.*, num_nextn_predict_layers 1) that a reader must ignore
  mlx-q4/   mlx_lm.utils.quantize_model (affine, 4 bits, group 64; embed_q / unembed_out quantized
            along their last axis as mlx-lm's QuantizedMultiLinear)
plus the byte-level tokenizer.json and greedy.json of scripts/make_tiny_qwen35.py.

transformers is the family's reference but needs torch, which the test venv does not have: the
script instead checks, before writing anything, that transformers' formulas (its
Glm4MoeLiteAttention / Glm4MoeLiteTopkRouter / Glm4MoeLiteMoE, written out in numpy over the
hf-f32 tensors: expanded K/V from kv_b_proj, rotate-half output of the interleaved RoPE, -inf
masked groups) give mlx-lm's logits for every position of a prompt.

usage: .venv/bin/python scripts/make_tiny_glm.py [OUT]   (default $RAPID_MODEL_CACHE/glm-tiny)
"""
import copy
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.models import glm4_moe_lite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_moe import write_set  # noqa: E402

GLM = dict(model_type="glm4_moe_lite", architectures=["Glm4MoeLiteForCausalLM"], vocab_size=512, hidden_size=64,
           intermediate_size=128, moe_intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
           num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8, routed_scaling_factor=1.8,
           kv_lora_rank=64, q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=64, v_head_dim=32,
           topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True, n_group=2, topk_group=1,
           num_experts_per_tok=2, moe_layer_freq=1, first_k_dense_replace=1, max_position_embeddings=4096,
           rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None, partial_rotary_factor=1.0,
           attention_bias=False, tie_word_embeddings=False, num_nextn_predict_layers=1, hidden_act="silu",
           eos_token_id=0)


def glm_spread(k, v):
    """Decisive routing and a correction bias that moves the choice (random init: near-uniform
    router, zero bias). The bias stays positive, as trained ones are, so no expert of the chosen
    group scores below a masked one (transformers masks with -inf, mlx-lm with 0)."""
    if k.endswith("mlp.gate.weight"):
        return mx.random.normal(v.shape) * 0.5
    if k.endswith("e_score_correction_bias"):
        return mx.random.uniform(shape=v.shape) * 0.2
    if k.endswith("kv_a_proj_with_mqa.weight") or k.endswith("embed_q.weight") or k.endswith("unembed_out.weight"):
        return v * 2.0
    return None


def hf_glm(w, cfg):
    """kv_b_proj from embed_q / unembed_out, experts per expert, plus an MTP layer to ignore."""
    H, nh, nope, vd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    out = {}
    for k, v in w.items():
        if ".switch_mlp." in k:
            pre, rest = k.split(".switch_mlp.")
            for e in range(cfg["n_routed_experts"]):
                out["%s.experts.%d.%s" % (pre, e, rest)] = v[e]
        elif k.endswith("self_attn.embed_q.weight"):
            wv = w[k.replace("embed_q", "unembed_out")]
            rows = [mx.concatenate([v[h].T, wv[h]], axis=0) for h in range(nh)]  # [nope + v, kv_lora] per head
            out[k.replace("embed_q", "kv_b_proj")] = mx.concatenate(rows, axis=0)
        elif not k.endswith("self_attn.unembed_out.weight"):
            out[k] = v
    assert out["model.layers.0.self_attn.kv_b_proj.weight"].shape == (nh * (nope + vd), cfg["kv_lora_rank"])
    mtp = "model.layers.%d." % cfg["num_hidden_layers"]
    for name, shape in (("eh_proj.weight", (H, 2 * H)), ("enorm.weight", (H,)), ("hnorm.weight", (H,)),
                        ("self_attn.q_a_proj.weight", (cfg["q_lora_rank"], H)),
                        ("mlp.experts.0.gate_proj.weight", (cfg["moe_intermediate_size"], H)),
                        ("shared_head.head.weight", (cfg["vocab_size"], H))):
        out[mtp + name] = mx.random.normal(shape)
    check_transformers_formula(out, cfg, w)
    return out


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1 + np.exp(-x))


def hf_forward(t, cfg, ids):
    """transformers' Glm4MoeLiteForCausalLM over one prompt (no cache), in numpy f64: logits [T, V]."""
    g = lambda k: np.array(t[k], dtype=np.float64)  # noqa: E731
    eps, nh, nope, rd, vd = (cfg["rms_norm_eps"], cfg["num_attention_heads"], cfg["qk_nope_head_dim"],
                             cfg["qk_rope_head_dim"], cfg["v_head_dim"])
    T, E, G = len(ids), cfg["n_routed_experts"], cfg["n_group"]
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, rd, 2) / rd)
    ang = np.arange(T)[:, None] * inv[None]
    cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]

    def rope(x):  # apply_rotary_pos_emb_interleave: pairs (2i, 2i+1), output in rotate-half order
        a, b = x[..., 0::2], x[..., 1::2]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def mlp(x, p):
        return (silu(x @ g(p + "gate_proj.weight").T) * (x @ g(p + "up_proj.weight").T)) @ g(p + "down_proj.weight").T

    h = g("model.embed_tokens.weight")[ids]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        x = rms(h, g(p + "input_layernorm.weight"), eps)
        a = p + "self_attn."
        q = rms(x @ g(a + "q_a_proj.weight").T, g(a + "q_a_layernorm.weight"), eps) @ g(a + "q_b_proj.weight").T
        q = q.reshape(T, nh, nope + rd)
        ckv = x @ g(a + "kv_a_proj_with_mqa.weight").T
        lat, k_rot = rms(ckv[:, :-rd], g(a + "kv_a_layernorm.weight"), eps), ckv[:, None, -rd:]
        kv = (lat @ g(a + "kv_b_proj.weight").T).reshape(T, nh, nope + vd)
        qs = np.concatenate([q[..., :nope], rope(q[..., nope:])], axis=-1)
        ks = np.concatenate([kv[..., :nope], np.broadcast_to(rope(k_rot), (T, nh, rd))], axis=-1)
        s = np.einsum("qhd,khd->hqk", qs, ks) * (nope + rd) ** -0.5
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hqk,khd->qhd", s / s.sum(-1, keepdims=True), kv[..., nope:]).reshape(T, nh * vd)
        h = h + o @ g(a + "o_proj.weight").T
        x = rms(h, g(p + "post_attention_layernorm.weight"), eps)
        if i < cfg["first_k_dense_replace"]:
            h = h + mlp(x, p + "mlp.")
            continue
        sc = 1 / (1 + np.exp(-(x @ g(p + "mlp.gate.weight").T)))
        choice = sc + g(p + "mlp.gate.e_score_correction_bias")
        grp = np.sort(choice.reshape(T, G, -1), axis=-1)[..., -2:].sum(-1)
        keep = np.zeros((T, G), bool)
        np.put_along_axis(keep, np.argsort(-grp, axis=-1)[:, :cfg["topk_group"]], True, axis=-1)
        choice = np.where(np.repeat(keep, E // G, axis=-1), choice, -np.inf)
        top = np.argsort(-choice, axis=-1)[:, :cfg["num_experts_per_tok"]]
        wt = np.take_along_axis(sc, top, -1)
        wt = wt / (wt.sum(-1, keepdims=True) + 1e-20) * cfg["routed_scaling_factor"]
        y = mlp(x, p + "mlp.shared_experts.")
        for r in range(T):
            for j, e in enumerate(top[r]):
                y[r] += wt[r, j] * mlp(x[r:r + 1], p + "mlp.experts.%d." % e)[0]
        h = h + y
    return rms(h, g("model.norm.weight"), eps) @ g("lm_head.weight").T


def check_transformers_formula(hf, cfg, mlx_weights):
    """transformers' forward (numpy, from the HF tensors) = mlx-lm's model (from its own tensors)."""
    model = glm4_moe_lite.Model(glm4_moe_lite.ModelArgs.from_dict(cfg))
    model.load_weights(list(mlx_weights.items()))
    ids = [int(i) for i in np.random.default_rng(7).integers(0, cfg["vocab_size"], 24)]
    ref = hf_forward(hf, cfg, ids)
    got = np.array(model(mx.array([ids]))[0].astype(mx.float32))
    err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
    assert err < 1e-4, "transformers' formula and mlx-lm disagree (relative error %g)" % err
    assert (np.argmax(got, -1) == np.argmax(ref, -1)).all()


CONFIGS = {"glm": (lambda: copy.deepcopy(GLM), lambda c: glm4_moe_lite.Model(glm4_moe_lite.ModelArgs.from_dict(c)),
                   hf_glm)}
SEED_INDEX = {"glm": 0}


def main():
    write_set("glm-tiny", CONFIGS, SEED_INDEX, glm_spread, seeds=(7000, 7100, 8000))


if __name__ == "__main__":
    main()
