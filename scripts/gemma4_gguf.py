#!/usr/bin/env python3
"""Gemma 4 text models as GGUF files of llama.cpp's `gemma4` architecture, written with llama.cpp's
own gguf-py (scripts/qwen35_gguf.py explains why not with convert_hf_to_gguf.py: it needs PyTorch).
The transforms are those of that converter's Gemma4Model (conversion/gemma.py, on top of
Gemma3Model and TextModel) on the transformers layout (hf-f32):
  - names by gguf-py's TensorNameMap of MODEL_ARCH.GEMMA4 after the converter's renames:
    layer_scalar -> layer_scalar.weight (blk.N.layer_output_scale), experts.{gate_up,down}_proj ->
    *.weight (blk.N.ffn_gate_up_exps [E, 2I, H], gate rows first, and ffn_down_exps [E, H, I], as
    transformers stacks them), router.scale -> blk.N.ffn_gate_inp.scale, router.per_expert_scale ->
    blk.N.ffn_down_exps.scale; vision / audio towers left out (the mmproj file's);
  - no (1 + w) norm shift (Gemma 4's RMSNorms are plain w, unlike Gemma 3's);
  - token_embd cut to the tokenizer's size (the vocabulary plus its added tokens);
  - rope_freqs.weight: global_head_dim / 2 frequency divisors, 1 for the first partial_rotary_factor
    of the full layers' frequencies and 1e30 for the rest (they then do not turn): llama.cpp's form
    of "proportional" RoPE, read by the full-attention layers only;
  - keys: sliding_window_pattern (a bool per layer, true = sliding), shared_kv_layers,
    embedding_length_per_layer_input, key/value_length = global_head_dim and *_swa = head_dim,
    rope.dimension_count = global_head_dim (its divisors do the rest) and _swa = head_dim,
    rope.freq_base (full layers) and freq_base_swa, feed_forward_length one per layer when
    use_double_wide_mlp (2x in the kv-shared layers), head_count_kv one per layer when the full
    layers have their own (num_global_key_value_heads), final_logit_softcapping when set,
    expert_count / expert_used_count (top_k_experts) / expert_feed_forward_length.
The vocabulary is the tiny models' byte-level BPE written as tokenizer "gpt2" (pre-tokenizer "gpt-2",
the GPT-2 regex of its ByteLevel pre-tokenizer) (the converter writes
Gemma 4's own SentencePiece-style vocabulary as tokenizer "gemma4"; the tiny models do not have one).

For each tiny model of scripts/make_tiny_gemma4.py (TINY_ROOT/<e2b|kv|moe>/hf-f32) writes
  gguf-f32/model.gguf    every tensor f32
  gguf-f32-qkv/model.gguf  the f32 file with the converter's --fuse-qkv (attn_qkv where a layer has
                         all of q / k / v), and its greedy.json by llama-cpp-python
  gguf-q8_0/model.gguf   every 2-D / 3-D weight in Q8_0 (gguf-py's quantizer) but the router; norms,
                         scalars, scales and rope_freqs f32
  mlx-deq-q8_0/          mlx-f32 with the weights the Q8_0 file holds (dequantized by gguf-py), and
                         mlx-lm's goldens of it (the oracle of a Q8_0 run)
  gguf-f32/greedy.json   llama-cpp-python's greedy output on hf-f32/greedy.json's prompts
Files already present are kept (delete one to regenerate it).

usage: .venv/bin/python scripts/gemma4_gguf.py [TINY_ROOT]   (default $RAPID_MODEL_CACHE/gemma4-tiny)
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from moe_gguf import deq_goldens, gguf_copies  # noqa: E402
from qwen35_gguf import finish_gguf, import_gguf, llama_goldens, quantized_items, tokenizer_from_json  # noqa: E402

CONFIGS = ("e2b", "kv", "moe")
SEED_INDEX = {"e2b": 0, "kv": 1, "moe": 2}
SKIP = ("model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio.")


def text_config(cfg):
    return cfg.get("text_config", cfg)


def hf_name(name):
    """The converter's view of an HF name: the language model's prefix gone, its renames applied;
    None for the vision / audio towers."""
    if name.startswith(SKIP):
        return None
    if name.startswith("model.language_model."):
        name = "model." + name[len("model.language_model."):]
    if name.endswith("layer_scalar"):
        name += ".weight"
    if ".experts." in name and not name.endswith(".weight"):
        name += ".weight"
    return name


def hf_to_gguf_tensors(gguf, cfg, weights, n_vocab):
    """(gguf name, f32 array) for each HF Gemma 4 text tensor, as llama.cpp's converter writes them."""
    tc = text_config(cfg)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA4, tc["num_hidden_layers"])
    out = []
    for name, w in weights.items():
        w = np.ascontiguousarray(np.asarray(w, dtype=np.float32))
        name = hf_name(name)
        if name is None:
            continue
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if name.endswith(".router.scale"):
            out.append((f"blk.{layer}.ffn_gate_inp.scale", w))
            continue
        if name.endswith(".router.per_expert_scale"):
            out.append((f"blk.{layer}.ffn_down_exps.scale", w))
            continue
        if name.endswith("embed_tokens.weight"):
            w = w[:n_vocab]
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        out.append((g, w))
    # Proportional RoPE on the full layers: the unrotated frequencies get divisor 1e30.
    full = tc["rope_parameters"]["full_attention"]
    assert full["rope_type"] == "proportional"
    hd = tc["global_head_dim"]
    n_rot = int(hd * full["partial_rotary_factor"] / 2)
    out.append(("rope_freqs.weight", np.array([1.0] * n_rot + [1e30] * (hd // 2 - n_rot), dtype=np.float32)))
    return out


def fused_qkv(tensors):
    """The converter's --fuse-qkv: in every layer with all of attn_q / attn_k / attn_v (not the
    full layers whose keys are values), their rows concatenated as blk.N.attn_qkv.weight."""
    by = dict(tensors)
    out = []
    for name, a in tensors:
        part = name.split(".")[2] if name.startswith("blk.") else ""
        b = name[:name.index(part)] if part else ""
        if part in ("attn_q", "attn_k", "attn_v") and all(f"{b}attn_{x}.weight" in by for x in "qkv"):
            if part == "attn_q":
                out.append((b + "attn_qkv.weight", np.concatenate([by[f"{b}attn_{x}.weight"] for x in "qkv"], axis=0)))
            continue
        out.append((name, a))
    return out


def add_gemma4_keys(gguf, w, tc):
    """The gemma4 keys the converter writes from the text config tc."""
    L = tc["num_hidden_layers"]
    swa = [t == "sliding_attention" for t in tc["layer_types"]]
    rope = tc["rope_parameters"]
    w.add_block_count(L)
    w.add_context_length(tc.get("max_position_embeddings", 131072))
    w.add_embedding_length(tc["hidden_size"])
    shared = tc.get("num_kv_shared_layers", 0)
    if tc.get("use_double_wide_mlp"):
        n_ff = tc["intermediate_size"]
        w.add_feed_forward_length([n_ff if i < L - shared else 2 * n_ff for i in range(L)])
    else:
        w.add_feed_forward_length(tc["intermediate_size"])
    w.add_head_count(tc["num_attention_heads"])
    if tc.get("num_global_key_value_heads") is not None:
        w.add_head_count_kv([tc["num_key_value_heads"] if s else tc["num_global_key_value_heads"] for s in swa])
    else:
        w.add_head_count_kv(tc["num_key_value_heads"])
    w.add_rope_freq_base(rope["full_attention"]["rope_theta"])
    w.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])
    w.add_layer_norm_rms_eps(tc.get("rms_norm_eps", 1e-6))
    if tc.get("enable_moe_block"):
        w.add_expert_count(tc["num_experts"])
        w.add_expert_used_count(tc["top_k_experts"])
        w.add_expert_feed_forward_length(tc["moe_intermediate_size"])
    if tc.get("final_logit_softcapping"):
        w.add_final_logit_softcapping(tc["final_logit_softcapping"])
    w.add_sliding_window(tc["sliding_window"])
    w.add_shared_kv_layers(shared)
    w.add_embedding_length_per_layer_input(tc.get("hidden_size_per_layer_input") or 0)
    w.add_sliding_window_pattern(swa)
    w.add_key_length(tc["global_head_dim"])
    w.add_value_length(tc["global_head_dim"])
    w.add_key_length_swa(tc["head_dim"])
    w.add_value_length_swa(tc["head_dim"])
    w.add_rope_dimension_count(tc["global_head_dim"])
    w.add_rope_dimension_count_swa(tc["head_dim"])


def quantized(name, a):
    """Whether the Q8_0 file stores this tensor in Q8_0: the 2-D and 3-D weights but the router."""
    return a.ndim >= 2 and name.endswith(".weight") and ".ffn_gate_inp." not in name


def write_gguf(path, cfg, tensors, tok, out_type="f32"):
    gguf = import_gguf()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path) + ".part", "gemma4")
    w.add_name("gemma4-random")
    add_gemma4_keys(gguf, w, text_config(cfg))
    qt, ftype = {"f32": (None, gguf.LlamaFileType.ALL_F32),
                 "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0)}[out_type]
    w.add_file_type(ftype)
    finish_gguf(w, path, tok, "gpt-2", quantized_items(gguf, tensors, qt, quantized))


def dequantized_mlx(gguf, mlx_weights, qt):
    """mlx-f32's tensors with the values the Q8_0 file holds. The Q8_0 rows are those of the GGUF
    (= the transformers layout); mlx-lm keeps every weight in that orientation, but its experts are
    split (switch_glu gate / up [E, I, H]) where the GGUF has them fused, which quantizes alike
    (Q8_0 blocks run along H, within one row)."""
    out = {}
    for name, w in mlx_weights.items():
        w = np.asarray(w, dtype=np.float32)
        router = name.endswith("router.proj.weight")
        if w.ndim >= 2 and name.endswith(".weight") and not router:
            w = gguf.quants.dequantize(gguf.quants.quantize(w, qt), qt).reshape(w.shape).astype(np.float32)
        out[name] = w
    return out


def tiny(root):
    from safetensors.numpy import load_file
    gguf = import_gguf()
    for c in CONFIGS:
        d = root / c
        hf = d / "hf-f32"
        if not (hf / "greedy.json").exists():
            raise SystemExit(f"{hf} missing: run scripts/make_tiny_gemma4.py first")
        cfg = json.load(open(hf / "config.json"))
        tj = json.load(open(hf / "tokenizer.json"))
        n_vocab = len(tj["model"]["vocab"]) + len(tj["added_tokens"])
        tok = tokenizer_from_json(hf / "tokenizer.json")
        tensors = hf_to_gguf_tensors(gguf, cfg, load_file(str(hf / "model.safetensors")), n_vocab)
        gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q))
        fused = d / "gguf-f32-qkv" / "model.gguf"
        if not fused.exists():
            write_gguf(fused, cfg, fused_qkv(tensors), tok)
            print("wrote", fused, flush=True)
        mlx = d / "mlx-f32"
        if not (d / "mlx-deq-q8_0" / "greedy.json").exists():
            w = dequantized_mlx(gguf, load_file(str(mlx / "model.safetensors")), gguf.GGMLQuantizationType.Q8_0)
            deq_goldens(d / "mlx-deq-q8_0", mlx, w, 7000 + SEED_INDEX[c])
        llama_goldens(d / "gguf-f32", hf / "greedy.json")
        llama_goldens(d / "gguf-f32-qkv", hf / "greedy.json")


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    tiny(Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "gemma4-tiny")))
