#!/usr/bin/env python3
"""Tiny random-weight Gemma 4 text models, written by mlx-lm itself, with greedy goldens from
mlx-lm (mlx on CPU, float32) for tests/model_tiny_test.cpp.

Configs (each exercises what the real checkpoints of its kind do):
  e2b   model_type gemma4 (the multimodal wrapper: the text model is language_model), like
        gemma-4-E2B/E4B: 6 layers sliding, sliding, full, sliding, sliding, full with an 8-token
        window (shorter than every prompt but the first two and than every generation); full layers
        with a wider head (global_head_dim 32 vs 16) and proportional RoPE turning a quarter of it;
        the last 3 layers kv-shared (layers 3 and 4 attend over layer 1's K/V, layer 5 over layer
        2's) with double-wide MLPs; per-layer token embeddings (hidden_size_per_layer_input 32);
        tied embeddings, final logit softcapping 30, non-unit layer scalars
  kv    model_type gemma4_text, like gemma-4-31B: full layers whose keys double as values
        (attention_k_eq_v) with their own KV head count (num_global_key_value_heads 1 vs 2), no
        kv sharing, no per-layer inputs, an own lm_head, no softcapping
  moe   model_type gemma4_text, like gemma-4-26B-A4B (enable_moe_block): 8 GELU experts, top-2,
        beside the dense MLP in every layer; the router normalises its own input (router.scale)
        and scales the top-k softmax by router.per_expert_scale
Each as, under OUT/<config>/:
  mlx-f32/  mlx_lm.utils.save_model
  hf-f32/   the Hugging Face layout of the same weights (e2b: model.language_model.* names, plus the
            k/v projections of the kv-shared layers and vision / audio tensors that a reader must
            ignore, as the real checkpoints carry them; moe: fused experts.gate_up_proj); mlx-lm's
            sanitize turns it back
  mlx-q4/   mlx_lm.utils.quantize_model (affine, 4 bits, group 64; modules whose input width is not a
            multiple of 64 stay f32, as mlx-lm leaves them)
plus the byte-level tokenizer.json and greedy.json of scripts/make_tiny_qwen35.py (5 prompts of
random ids, 64 greedy steps, computed by mlx_lm.utils.load_model of that very directory).

usage: .venv/bin/python scripts/make_tiny_gemma4.py [OUT]   (default $RAPID_MODEL_CACHE/gemma4-tiny)
"""
import copy
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.models import gemma4, gemma4_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_moe import write_set  # noqa: E402

ROPE = {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}

E2B_TEXT = dict(model_type="gemma4_text", vocab_size=512, vocab_size_per_layer_input=512, hidden_size=64,
                intermediate_size=96, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                global_head_dim=32, num_kv_shared_layers=3, hidden_size_per_layer_input=32, sliding_window=8,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2, rope_parameters=ROPE,
                final_logit_softcapping=30.0, use_double_wide_mlp=True, attention_k_eq_v=False,
                tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=4096,
                hidden_activation="gelu_pytorch_tanh", eos_token_id=0, bos_token_id=2, pad_token_id=0)

KV = dict(model_type="gemma4_text", architectures=["Gemma4ForCausalLM"], vocab_size=512, hidden_size=64,
          intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
          global_head_dim=32, attention_k_eq_v=True, num_global_key_value_heads=1, num_kv_shared_layers=0,
          hidden_size_per_layer_input=0, sliding_window=8, layer_types=["sliding_attention", "full_attention"] * 2,
          rope_parameters=ROPE, final_logit_softcapping=None, use_double_wide_mlp=False, tie_word_embeddings=False,
          rms_norm_eps=1e-6, max_position_embeddings=4096, hidden_activation="gelu_pytorch_tanh", eos_token_id=0)

MOE = dict(model_type="gemma4_text", architectures=["Gemma4ForCausalLM"], vocab_size=512, hidden_size=64,
           intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
           global_head_dim=32, num_kv_shared_layers=0, hidden_size_per_layer_input=0, sliding_window=8,
           layer_types=["sliding_attention", "full_attention"] * 2, rope_parameters=ROPE, final_logit_softcapping=30.0,
           enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=64,
           use_double_wide_mlp=False, tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=4096,
           hidden_activation="gelu_pytorch_tanh", eos_token_id=0)


def e2b_config():
    return {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "vocab_size": 512,
            "tie_word_embeddings": True, "text_config": copy.deepcopy(E2B_TEXT)}


def gemma4_spread(k, v):
    """Layer scalars away from 1 (random init leaves them at 1), and layer outputs (post norms)
    strong enough that the tied embedding does not dominate the residual stream (greedy output would
    echo the last token)."""
    if k.endswith("layer_scalar"):
        return 0.6 + 0.8 * mx.random.uniform(shape=v.shape)
    if k.endswith("router.proj.weight"):  # decisive routing (random init is near uniform)
        return mx.random.normal(v.shape) * 0.5
    if k.endswith("router.scale") or k.endswith("router.per_expert_scale"):
        return 1.0 + 0.3 * mx.random.normal(v.shape)
    if any(s in k for s in ("post_attention_layernorm", "post_feedforward_layernorm", "post_per_layer_input_norm")):
        return 3.0 + 0.5 * mx.random.normal(v.shape)
    return None


def hf_e2b(w, cfg):
    """model.language_model.* names; the unused tensors real checkpoints carry."""
    out = {"model.language_model." + k[len("language_model.model."):] if k.startswith("language_model.model.") else k: v
           for k, v in w.items()}
    H, hd, first_shared = cfg["hidden_size"], cfg["head_dim"], cfg["num_hidden_layers"] - cfg["num_kv_shared_layers"]
    for i in range(first_shared, cfg["num_hidden_layers"]):
        d = cfg["global_head_dim"] if cfg["layer_types"][i] == "full_attention" else hd
        p = "model.language_model.layers.%d.self_attn." % i
        out[p + "k_proj.weight"] = mx.random.normal((cfg["num_key_value_heads"] * d, H))
        out[p + "v_proj.weight"] = mx.random.normal((cfg["num_key_value_heads"] * d, H))
        out[p + "k_norm.weight"] = mx.random.normal((d,))
    out["model.vision_tower.encoder.layers.0.mlp.fc1.weight"] = mx.random.normal((8, 8))
    out["model.embed_vision.embedding_projection.weight"] = mx.random.normal((H, 8))
    out["model.audio_tower.conv.weight"] = mx.random.normal((8, 8))
    out["model.embed_audio.embedding_projection.weight"] = mx.random.normal((H, 8))
    return out


def hf_moe(w, cfg):
    """transformers' fused experts: experts.gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]."""
    out = {}
    for k, v in w.items():
        if ".experts.switch_glu.up_proj." in k:
            continue
        if ".experts.switch_glu.gate_proj." in k:
            out[k.split(".switch_glu.")[0] + ".gate_up_proj"] = mx.concatenate(
                [v, w[k.replace("gate_proj", "up_proj")]], axis=1)
        elif ".experts.switch_glu.down_proj." in k:
            out[k.split(".switch_glu.")[0] + ".down_proj"] = v
        else:
            out[k] = v
    return out


CONFIGS = {
    "e2b": (e2b_config, lambda c: gemma4.Model(gemma4.ModelArgs.from_dict(c)), hf_e2b),
    "kv": (lambda: copy.deepcopy(KV), lambda c: gemma4_text.Model(gemma4_text.ModelArgs.from_dict(c)),
           lambda w, c: dict(w)),
    "moe": (lambda: copy.deepcopy(MOE), lambda c: gemma4_text.Model(gemma4_text.ModelArgs.from_dict(c)), hf_moe),
}
SEED_INDEX = {"e2b": 0, "kv": 1, "moe": 2}  # fixed per config: adding one leaves the others as they were


def main():
    write_set("gemma4-tiny", CONFIGS, SEED_INDEX, gemma4_spread, seeds=(5000, 5100, 6000))


if __name__ == "__main__":
    main()
