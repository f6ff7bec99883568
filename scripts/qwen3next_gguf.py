#!/usr/bin/env python3
"""Qwen3-Next as GGUF files of llama.cpp's `qwen3next` architecture, written with llama.cpp's own
gguf-py (scripts/qwen35_gguf.py explains why not with convert_hf_to_gguf.py: it needs PyTorch).
The transforms are those of that converter's Qwen3NextModel (conversion/qwen.py, on top of
Qwen2MoeModel): in_proj_qkvz, interleaved per key head [q, k, v, z], split into attn_qkv (all q
heads, all k heads, then the value heads still grouped by key head) and attn_gate (z); in_proj_ba
kept fused as ssm_ba; A_log -> ssm_a = -exp(A_log), dt_bias -> ssm_dt.bias, conv1d squeezed to
[C, K], (1 + w) RMSNorm offsets folded (all but the gated DeltaNet norm); the per-expert tensors
stacked into ffn_{gate,up,down}_exps; MoE and DeltaNet sizes as expert_* / ssm.* keys.

llama.cpp's qwen3next routes in every layer (its loader requires a router in each), so the tiny
model is scripts/make_tiny_moe.py's qwen3_next config without the dense layer (mlp_only_layers
empty), written by make_tiny_moe's write_set (mlx-f32, hf-f32, mlx-q4, mlx-lm goldens) under
TINY_ROOT/qwen3-next/, plus:
  gguf-f32/model.gguf    every tensor f32
  gguf-q8_0/model.gguf   the 2-D and 3-D weights in Q8_0 (gguf-py's quantizer); the routers
                         (ffn_gate_inp, ffn_gate_inp_shexp), conv1d and 1-D tensors f32
  hf-deq-q8_0/           gguf-q8_0's weights dequantized by gguf-py as an HF f32 checkpoint, with
                         mlx-lm's goldens (the oracle of our Q8_0 run)
  gguf-f32-legacy/model.gguf   f32 with in_proj_qkvz whole as ssm_in (the converter's older layout)
  gguf-{f32,f32-legacy}/greedy.json   llama.cpp's greedy output on the f32 files (with llama-cpp-python)
and TINY_ROOT/qwen3-next-mtp/ (mtp_set): that model with a random MTP head, hf-f32/ and gguf-f32/.

usage: .venv/bin/python scripts/qwen3next_gguf.py [TINY_ROOT]  (default $RAPID_MODEL_CACHE/qwen3next-gguf-tiny)
Files already present are kept (delete one to regenerate it).
"""
import copy
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import qwen35_gguf  # noqa: E402
from moe_gguf import deq_goldens, ensure_set, gguf_copies, stacked_experts  # noqa: E402
from qwen35_gguf import (finish_gguf, import_gguf, llama_goldens, quantized_items, start_gguf,  # noqa: E402
                         tokenizer_from_json)

CONFIG = "qwen3-next"


def tiny_config():
    from make_tiny_moe import QWEN3_NEXT
    c = copy.deepcopy(QWEN3_NEXT)
    c.update(mlp_only_layers=[])
    return c


def split_qkvz(w, cfg):
    """in_proj_qkvz [Hk * (2 dk + 2 r dv), H] -> (qkv [2 Hk dk + Hv dv, H], z [Hv dv, H])."""
    hk, dk = cfg["linear_num_key_heads"], cfg["linear_key_head_dim"]
    rv = cfg["linear_num_value_heads"] // hk * cfg["linear_value_head_dim"]
    per = w.reshape(hk, 2 * dk + 2 * rv, w.shape[1])
    q, k, v, z = (per[:, :dk], per[:, dk:2 * dk], per[:, 2 * dk:2 * dk + rv], per[:, 2 * dk + rv:])
    flat = [x.reshape(-1, w.shape[1]) for x in (q, k, v, z)]
    return np.concatenate(flat[:3]), flat[3]


def hf_to_gguf_tensors(gguf, cfg, weights, legacy=False, mtp=False):
    """(gguf name, f32 array) for each HF qwen3_next tensor, as llama.cpp's converter writes them:
    in_proj_qkvz split and the experts stacked here, then Qwen3.5's transforms (qwen35_gguf), the
    value heads left grouped by key head. mtp: the mtp.* head too, as the nextn block after the
    trunk (write_gguf's n_mtp). legacy: in_proj_qkvz kept whole as ssm_in, as the
    converter wrote it before the split (many published Qwen3-Next GGUFs; llama.cpp still reads it)."""
    split, fused = {}, []
    for name, w in stacked_experts(weights, cfg["num_hidden_layers"], cfg["num_experts"]).items():
        if name.endswith(".in_proj_qkvz.weight") and legacy:
            fused.append((f"blk.{name.split('.')[2]}.ssm_in.weight", np.asarray(w, dtype=np.float32)))
        elif name.endswith(".in_proj_qkvz.weight"):
            split[name.replace("qkvz", "qkv")], split[name.replace("qkvz", "z")] = split_qkvz(np.asarray(w), cfg)
        else:
            split[name] = w
    return qwen35_gguf.hf_to_gguf_tensors(gguf, cfg, split, arch=gguf.MODEL_ARCH.QWEN3NEXT, tile=False, mtp=mtp) + fused


def write_gguf(path, cfg, tensors, tok, out_type="f32", n_mtp=0):
    """A llama.cpp qwen3next GGUF of the HF config dict; out_type f32 or q8_0 for the 2-D/3-D
    weights (see quantized; the rest f32); n_mtp MTP blocks among the tensors."""
    gguf = import_gguf()
    w = start_gguf(gguf, path, "qwen3next", "qwen3next-random", cfg, cfg["rope_theta"], n_mtp)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    w.add_recurrent_layers([t == "linear_attention" for t in cfg["layer_types"]] + [False] * n_mtp)
    w.add_full_attention_interval(cfg.get("full_attention_interval", 4))
    w.add_rope_dimension_count(int(head_dim * cfg.get("partial_rotary_factor", 0.25)))
    qt = {"f32": None, "q8_0": gguf.GGMLQuantizationType.Q8_0}[out_type]
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qt is None else gguf.LlamaFileType.MOSTLY_Q8_0)
    finish_gguf(w, path, tok, "qwen2", quantized_items(gguf, tensors, qt, quantized))


def quantized(gguf_name, a):
    """Whether write_gguf stores this tensor in the quantized type: the 2-D and 3-D weights but
    the routers (ffn_gate_inp, ffn_gate_inp_shexp) and the conv1d, which llama.cpp keeps f32."""
    return a.ndim >= 2 and ".ffn_gate_inp" not in gguf_name and ".ssm_conv1d." not in gguf_name


def dequantized_hf(gguf, weights, qt):
    """The HF tensors as a GGUF of type qt holds them (gguf-py's quantizer and dequantizer). The
    fused in_proj_qkvz is quantized in the GGUF's split order, but Q8_0 blocks run along a row
    and the split moves whole rows, so round-tripping the HF rows gives the same numbers."""
    out = {}
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        routers = name.endswith("mlp.gate.weight") or name.endswith("shared_expert_gate.weight")
        if w.ndim >= 2 and not routers and "conv1d" not in name:
            w = gguf.quants.dequantize(gguf.quants.quantize(w, qt), qt).reshape(w.shape).astype(np.float32)
        out[name] = w
    return out


def tiny(root):
    from safetensors.numpy import load_file
    from make_tiny_moe import CONFIGS
    d = root / CONFIG
    _, make, to_hf = CONFIGS[CONFIG]
    ensure_set(root, {CONFIG: (tiny_config, make, to_hf)}, {CONFIG: 3})
    gguf = import_gguf()
    hf = d / "hf-f32"
    cfg = json.load(open(hf / "config.json"))
    weights = load_file(str(hf / "model.safetensors"))
    tensors = hf_to_gguf_tensors(gguf, cfg, weights)
    tok = tokenizer_from_json(hf / "tokenizer.json")
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q))
    legacy = hf_to_gguf_tensors(gguf, cfg, weights, legacy=True)
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, legacy, tok), ("f32-legacy",))
    if not (d / "hf-deq-q8_0" / "greedy.json").exists():
        deq_goldens(d / "hf-deq-q8_0", hf, dequantized_hf(gguf, weights, gguf.GGMLQuantizationType.Q8_0), 4003)
    for g in ("gguf-f32", "gguf-f32-legacy"):
        llama_goldens(d / g, hf / "greedy.json")


def mtp_weights(weights, cfg, rng):
    """A random MTP head for the tiny model in the Hugging Face layout of Qwen3-Next's `mtp.*`: fc
    [H, 2H], its three norms (zero-centred, (1 + w)) and one decoder layer shaped like the trunk's
    full-attention layer (gated attention, routed experts, gated shared expert)."""
    H, last = cfg["hidden_size"], cfg["num_hidden_layers"] - 1
    src = f"model.layers.{last}."
    shapes = {"mtp.fc.weight": (H, 2 * H), "mtp.pre_fc_norm_embedding.weight": (H,),
              "mtp.pre_fc_norm_hidden.weight": (H,), "mtp.norm.weight": (H,)}
    shapes.update({"mtp.layers.0." + k[len(src):]: np.shape(v) for k, v in weights.items() if k.startswith(src)})
    out = {}
    for name, shp in sorted(shapes.items()):
        scale = 0.3 if len(shp) == 1 else 1.0 / np.sqrt(shp[-1])
        out[name] = (scale * rng.standard_normal(shp)).astype(np.float32)
    return out


def mtp_set(root):
    """root/qwen3-next-mtp: the tiny model plus a random MTP head, as HF (hf-f32) and as the
    converter's GGUF with the head's nextn block (gguf-f32). Plain decoding is the trunk's, so the
    qwen3-next set's goldens are this one's too."""
    from safetensors.numpy import load_file, save_file
    src, d = root / CONFIG / "hf-f32", root / (CONFIG + "-mtp")
    hf = d / "hf-f32"
    cfg = json.load(open(src / "config.json"))
    if not (hf / "model.safetensors").exists():
        weights = load_file(str(src / "model.safetensors"))
        weights.update(mtp_weights(weights, cfg, np.random.default_rng(4007)))
        tmp = hf.with_name("hf-f32.tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        for f in ("config.json", "tokenizer.json"):
            (tmp / f).write_bytes((src / f).read_bytes())
        save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tmp.rename(hf)
    weights = load_file(str(hf / "model.safetensors"))
    gguf = import_gguf()
    tensors = hf_to_gguf_tensors(gguf, cfg, weights, mtp=True)
    tok = tokenizer_from_json(hf / "tokenizer.json")
    n_mtp = qwen35_gguf.mtp_layer_count(weights)
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q, n_mtp=n_mtp), ("f32",))


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    root = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "qwen3next-gguf-tiny"))
    tiny(root)
    mtp_set(root)
