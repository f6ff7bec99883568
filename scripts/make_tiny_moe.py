#!/usr/bin/env python3
"""Tiny random-weight mixture-of-experts models, written by mlx-lm itself, with greedy goldens from
mlx-lm (mlx on CPU, float32) for tests/model_moe_test.cpp.

Configs (8 experts, top-2; each MoE layer's experts are stacked by mlx-lm's sanitize):
  qwen3-moe     model_type qwen3_moe: Qwen3 attention, MoE MLPs except layer 2 (mlp_only_layers),
                no renormalisation of the top-k weights (norm_topk_prob false), own lm_head
  qwen35-moe    model_type qwen3_5_moe: the Qwen3.5 hybrid (3 Gated DeltaNet layers, 1 gated
                full-attention layer) with MoE MLPs and a sigmoid-gated shared expert, tied lm_head
  qwen3-next    model_type qwen3_next: the same hybrid with Qwen3-Next's fused DeltaNet projections
                (in_proj_qkvz, in_proj_ba, interleaved per key head, 2 value heads per key head),
                MoE MLPs with a gated shared expert except layer 1 (mlp_only_layers), renormalised
                top-k, partial rotary from the top-level config, own lm_head
Each as, under OUT/<config>/:
  mlx-f32/  mlx_lm.utils.save_model (experts stacked as mlp.switch_mlp.{gate,up,down}_proj [E, ., .])
  hf-f32/   the Hugging Face layout of the same weights, which mlx-lm's sanitize turns back:
            qwen3_moe per expert (mlp.experts.N.gate_proj.weight, as the Qwen3-MoE releases ship
            and transformers 5 saves them); qwen3_5_moe fused (mlp.experts.gate_up_proj [E, 2I, H],
            mlp.experts.down_proj [E, H, I], as transformers 5 writes it), model.language_model.*
            names, conv1d [C, 1, K], (1 + w) norms stored as w; qwen3_next per expert (transformers
            5 maps it to qwen2_moe's per-expert checkpoint names), model.* names, conv1d [C, 1, K],
            (1 + w) norms stored as w
  mlx-q4/   mlx_lm.utils.quantize_model (affine, 4 bits, group 64; the routers as mlx-lm decides)
plus the byte-level tokenizer.json and greedy.json of scripts/make_tiny_qwen35.py (5 prompts of
random ids, 64 greedy steps, computed by mlx_lm.utils.load_model of that very directory).

usage: .venv/bin/python scripts/make_tiny_moe.py [OUT]   (default $RAPID_MODEL_CACHE/moe-tiny)
"""
import copy
import json
import os
import shutil
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.models import qwen3_5_moe, qwen3_moe, qwen3_next
from mlx_lm.utils import quantize_model, save_config, save_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_qwen35 import goldens, hf_tensor, hf_value, spread, write_tokenizer  # noqa: E402

MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64}

QWEN3_MOE = dict(MOE, model_type="qwen3_moe", vocab_size=512, hidden_size=64, intermediate_size=96,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=4096, tie_word_embeddings=False,
                 decoder_sparse_step=1, mlp_only_layers=[2], norm_topk_prob=False, eos_token_id=0,
                 architectures=["Qwen3MoeForCausalLM"])

QWEN35_TEXT = dict(MOE, model_type="qwen3_5_moe_text", vocab_size=512, hidden_size=64, intermediate_size=128,
                   shared_expert_intermediate_size=64, num_hidden_layers=4, full_attention_interval=4,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
                   max_position_embeddings=4096, linear_conv_kernel_dim=4, linear_key_head_dim=16,
                   linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                   attention_bias=False, tie_word_embeddings=True, eos_token_id=0, bos_token_id=None,
                   layer_types=["linear_attention"] * 3 + ["full_attention"],
                   rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                    "mrope_section": [11, 11, 10], "mrope_interleaved": True})

QWEN3_NEXT = dict(MOE, model_type="qwen3_next", vocab_size=512, hidden_size=64, intermediate_size=128,
                  shared_expert_intermediate_size=64, num_hidden_layers=4, full_attention_interval=4,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
                  rope_theta=10000000.0, partial_rotary_factor=0.25, max_position_embeddings=4096,
                  linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                  linear_num_key_heads=2, linear_num_value_heads=4, decoder_sparse_step=1, mlp_only_layers=[1],
                  norm_topk_prob=True, attention_bias=False, tie_word_embeddings=False, eos_token_id=0,
                  layer_types=["linear_attention"] * 3 + ["full_attention"], architectures=["Qwen3NextForCausalLM"])


def qwen35_config():
    return {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
            "tie_word_embeddings": True, "text_config": copy.deepcopy(QWEN35_TEXT)}


def moe_spread(k, v):
    """A decisive router (random init makes it near uniform) and a visible shared-expert gate."""
    if k.endswith("mlp.gate.weight"):
        return mx.random.normal(v.shape) * 0.5
    if k.endswith("shared_expert_gate.weight"):
        return mx.random.normal(v.shape) * 0.3
    if k.endswith("in_proj_qkvz.weight"):
        return v * 2.0  # as spread does for Qwen3.5's in_proj_qkv
    return None


def hf_qwen3_moe(w, cfg):
    out = {}
    for k, v in w.items():
        if ".switch_mlp." in k:  # model.layers.N.mlp.switch_mlp.gate_proj.weight -> per expert
            pre, rest = k.split(".switch_mlp.")
            for e in range(cfg["num_experts"]):
                out["%s.experts.%d.%s" % (pre, e, rest)] = v[e]
        else:
            out[k] = v
    return out


def hf_qwen35_moe(w, cfg):
    out = {}
    for k, v in w.items():
        nk, v = hf_tensor(k, v)
        if ".switch_mlp.gate_proj." in nk:
            pre = nk.split(".switch_mlp.")[0]
            up = w[k.replace("gate_proj", "up_proj")]
            out[pre + ".experts.gate_up_proj"] = mx.concatenate([v, up], axis=1)
            continue
        if ".switch_mlp.up_proj." in nk:
            continue
        if ".switch_mlp.down_proj." in nk:
            out[nk.split(".switch_mlp.")[0] + ".experts.down_proj"] = v
            continue
        out[nk] = v
    return out


def hf_qwen3_next(w, cfg):
    return {k: hf_value(k, v) for k, v in hf_qwen3_moe(w, cfg).items()}


CONFIGS = {
    "qwen3-moe": (lambda: copy.deepcopy(QWEN3_MOE), lambda c: qwen3_moe.Model(qwen3_moe.ModelArgs.from_dict(c)),
                  hf_qwen3_moe),
    "qwen35-moe": (qwen35_config, lambda c: qwen3_5_moe.Model(qwen3_5_moe.ModelArgs.from_dict(c)), hf_qwen35_moe),
    "qwen3-next": (lambda: copy.deepcopy(QWEN3_NEXT), lambda c: qwen3_next.Model(qwen3_next.ModelArgs.from_dict(c)),
                   hf_qwen3_next),
}


def main():
    mx.set_default_device(mx.cpu)
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "moe-tiny"))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for i, (name, (config, make, to_hf)) in enumerate(CONFIGS.items()):
        cfg = config()
        d = tmp / name
        mx.random.seed(3000 + i)
        model = make(cfg)
        # Fixed seeds. Top-k routing has ties of measure zero, but a near-tie (two experts' router
        # probabilities within f32 rounding) lets two correct f32 implementations pick different
        # experts for one token; another seed for this spread showed one such step (logits off by
        # 2.5e-4 relative at steps 11-12 of one prompt, mlx-q4 qwen3_5_moe), this one none.
        mx.random.seed(3100 + i)
        model = spread(model, moe_spread)
        save_model(d / "mlx-f32", model)
        save_config(cfg, d / "mlx-f32" / "config.json")
        (d / "hf-f32").mkdir(parents=True)
        w = mx.load(str(d / "mlx-f32" / "model.safetensors"))
        mx.save_safetensors(str(d / "hf-f32" / "model.safetensors"), to_hf(w, cfg.get("text_config", cfg)),
                            metadata={"format": "pt"})
        with open(d / "hf-f32" / "config.json", "w") as f:
            json.dump(cfg, f, indent=2)
        qmodel, qcfg = quantize_model(model, copy.deepcopy(cfg), 64, 4)
        save_model(d / "mlx-q4", qmodel)
        save_config(qcfg, d / "mlx-q4" / "config.json")
        V = cfg.get("text_config", cfg)["vocab_size"]
        for sub in ("mlx-f32", "hf-f32", "mlx-q4"):
            write_tokenizer(d / sub, V)
            goldens(d / sub, 4000 + i)
    # Complete or absent: the tests generate the set when the directory is missing.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
