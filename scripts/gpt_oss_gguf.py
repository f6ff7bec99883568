#!/usr/bin/env python3
"""gpt-oss as GGUF files of llama.cpp's `gpt-oss` architecture, written with llama.cpp's own gguf-py
(scripts/qwen35_gguf.py explains why not with convert_hf_to_gguf.py: it needs PyTorch). The
transforms are those of that converter's GptOssModel (conversion/gpt_oss.py) on the bf16/f32
releases' transformers layout (not MXFP4): experts.gate_up_proj [E, H, 2I] transposed and its
interleaved columns split into ffn_gate_exps (even) / ffn_up_exps (odd) [E, I, H], its bias
likewise into ffn_{gate,up}_exps.bias [E, I]; experts.down_proj [E, I, H] transposed to
ffn_down_exps [E, H, I]; self_attn.sinks as attn_sinks.weight; the router as ffn_gate_inp; the
sliding window and the experts' width as attention.sliding_window / expert_feed_forward_length,
YaRN as rope.scaling.*.

The tiny model is scripts/make_tiny_moe.py's gpt_oss (4 layers alternating sliding window 12 and
full attention, biases, sinks, YaRN, expert pre-activations past the SwiGLU clamp), written by
make_tiny_moe's write_set (the same seeds, so the same weights as moe-tiny/gpt-oss) under
TINY_ROOT/gpt-oss/ (mlx-f32, hf-f32, mlx-q4; mlx-lm's goldens of mlx-f32, which mlx-lm can load), plus:
  gguf-f32/model.gguf    every tensor f32
  gguf-q8_0/model.gguf   the 2-D and 3-D weights in Q8_0 (gguf-py's quantizer) but the router;
                         biases, sinks and norms f32
  gguf-mxfp4/model.gguf  the experts' weights in GGML's MXFP4 (gguf-py's quantizer; the type of the
                         released gpt-oss GGUFs), the rest f32
  mlx-deq-{q8_0,mxfp4}/  those files' weights dequantized by gguf-py in mlx-f32's layout, with
                         mlx-lm's goldens (the oracles of our Q8_0 / MXFP4 runs)
  gguf-{f32,mxfp4}/greedy.json   llama.cpp's greedy output on those files (with llama-cpp-python;
                         on MXFP4 its kernel quantizes the activations, so no exact oracle)

usage: .venv/bin/python scripts/gpt_oss_gguf.py [TINY_ROOT]  (default $RAPID_MODEL_CACHE/gpt-oss-gguf-tiny)
       .venv/bin/python scripts/gpt_oss_gguf.py --bench [OUT_DIR] [LAYERS]
  --bench: OUT_DIR/mxfp4.gguf, a gpt-oss-20b-shaped model (its released config, LAYERS layers,
  default 6) as the released GGUFs store it: experts MXFP4, the other 2-D weights Q8_0, router,
  biases, sinks and norms f32. Random weights written directly as block bytes (random codes and
  int8s at scales that keep activations finite; quantizing 1.6 GB f32 tensors in numpy would not
  fit in memory), the real Qwen2/3 vocabulary padded to 201088 rows (moe_gguf.py's; gpt-oss's own
  o200k is not in the sdist). Default $RAPID_MODEL_CACHE/bench/gpt-oss-20b-shape.
Files already present are kept (delete one to regenerate it).
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from moe_gguf import deq_goldens, ensure_set, gguf_copies, vocab_tokenizer  # noqa: E402
from qwen35_gguf import (finish_gguf, import_gguf, llama_goldens, quantized_items, start_gguf,  # noqa: E402
                         tokenizer_from_json)

CONFIG = "gpt-oss"


def hf_to_gguf_tensors(gguf, cfg, weights):
    """(gguf name, f32 array) for each HF gpt_oss tensor, as llama.cpp's converter writes them."""
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GPT_OSS, cfg["num_hidden_layers"])

    def named(name, w):
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        return g, np.ascontiguousarray(w)

    out = []
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        if name.endswith(".experts.gate_up_proj"):
            wt = np.swapaxes(w, 1, 2)  # [E, 2I, H], gate rows even, up rows odd
            out += [named(name.replace("gate_up_proj", "gate_proj.weight"), wt[:, ::2]),
                    named(name.replace("gate_up_proj", "up_proj.weight"), wt[:, 1::2])]
        elif name.endswith(".experts.gate_up_proj_bias"):
            out += [named(name.replace("gate_up_proj_bias", "gate_proj.bias"), w[:, ::2]),
                    named(name.replace("gate_up_proj_bias", "up_proj.bias"), w[:, 1::2])]
        elif name.endswith(".experts.down_proj"):
            out.append(named(name + ".weight", np.swapaxes(w, 1, 2)))
        elif name.endswith(".experts.down_proj_bias"):
            out.append(named(name.replace("down_proj_bias", "down_proj.bias"), w))
        elif name.endswith(".sinks"):
            out.append(named(name + ".weight", w))
        else:
            out.append(named(name, w))
    return out


def quantized(name, a):
    """Whether write_gguf stores this tensor in Q8_0: the 2-D and 3-D weights but the router
    (ffn_gate_inp); the bias matrices of the experts ([E, I]) stay f32."""
    return a.ndim >= 2 and name.endswith(".weight") and ".ffn_gate_inp." not in name


def expert_weight(name, a):
    """Whether write_gguf stores this tensor in MXFP4: the experts' weights only, as the converter
    writes the released (MXFP4) checkpoints."""
    return name.endswith("_exps.weight")


def start_gpt_oss(gguf, path, name, cfg):
    """A GGUFWriter with the gpt-oss keys of the HF config dict (the converter's) but the file type."""
    w = start_gguf(gguf, path, "gpt-oss", name, cfg, cfg["rope_theta"])
    rs = cfg["rope_scaling"]
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_expert_count(cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_sliding_window(cfg["sliding_window"])
    w.add_expert_feed_forward_length(cfg["intermediate_size"])
    return w


def write_gguf(path, cfg, tensors, tok, out_type="f32"):
    """A llama.cpp gpt-oss GGUF of the HF config dict (the converter's keys); out_type f32 or q8_0
    for the weights `quantized` selects."""
    gguf = import_gguf()
    w = start_gpt_oss(gguf, path, "gpt-oss-random", cfg)
    qt, ftype, which = {"f32": (None, gguf.LlamaFileType.ALL_F32, None),
                        "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0, quantized),
                        "mxfp4": (gguf.GGMLQuantizationType.MXFP4, gguf.LlamaFileType.MOSTLY_MXFP4_MOE, expert_weight)}[out_type]
    w.add_file_type(ftype)
    finish_gguf(w, path, tok, "gpt-4o", quantized_items(gguf, tensors, qt, which))


def dequantized_mlx(gguf, weights, qt, experts_only=False):
    """mlx-f32's tensors as a GGUF of type qt holds them (experts_only: just the experts, as in the
    MXFP4 file): its expert weights ([E, I, H] / [E, H, I]) are oriented as the GGUF's, so a round
    trip along the same rows gives the same numbers."""
    out = {}
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        pick = ".experts." in name if experts_only else not name.endswith("mlp.router.weight")
        if w.ndim >= 2 and name.endswith(".weight") and pick:
            w = gguf.quants.dequantize(gguf.quants.quantize(w, qt), qt).reshape(w.shape).astype(np.float32)
        out[name] = w
    return out


def tiny(root):
    from safetensors.numpy import load_file
    from make_tiny_moe import CONFIGS, SEED_INDEX
    d = root / CONFIG
    ensure_set(root, {CONFIG: CONFIGS[CONFIG]}, SEED_INDEX, hf_goldens_from_mlx={CONFIG})
    gguf = import_gguf()
    hf = d / "hf-f32"
    cfg = json.load(open(hf / "config.json"))
    tok = tokenizer_from_json(hf / "tokenizer.json")
    tensors = hf_to_gguf_tensors(gguf, cfg, load_file(str(hf / "model.safetensors")))
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q))
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q), ("mxfp4",))
    mlx = d / "mlx-f32"
    for q in ("q8_0", "mxfp4"):
        if not (d / f"mlx-deq-{q}" / "greedy.json").exists():
            qt = getattr(gguf.GGMLQuantizationType, q.upper())
            w = dequantized_mlx(gguf, load_file(str(mlx / "model.safetensors")), qt, experts_only=q == "mxfp4")
            deq_goldens(d / f"mlx-deq-{q}", mlx, w, 4000 + SEED_INDEX[CONFIG])
    llama_goldens(d / "gguf-f32", hf / "greedy.json")
    llama_goldens(d / "gguf-mxfp4", d / "mlx-deq-mxfp4" / "greedy.json")


# openai/gpt-oss-20b's config.json (the dimensions that matter here; layers set by --bench).
GPT_OSS_20B = {"vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
               "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
               "num_experts_per_tok": 4, "sliding_window": 128, "rms_norm_eps": 1e-05, "rope_theta": 150000.0,
               "max_position_embeddings": 131072, "swiglu_limit": 7.0,
               "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                                "beta_fast": 32.0, "beta_slow": 1.0}}


def bench_tensors(gguf, cfg, rng):
    """(name, data, raw GGML type or None) of a random gpt-oss of cfg, each made when written."""
    H, V, E, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_local_experts"], cfg["intermediate_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Q8, FP4 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.MXFP4

    def q8_0(rows, cols):  # uniform int8 (rms 73.6) at d = 1/(73.6·sqrt(cols)): rms 1/sqrt(cols)
        d = np.full((rows, cols // 32, 1), 1 / (73.6 * np.sqrt(cols)), np.float16).view(np.uint8)
        q = rng.integers(-127, 128, (rows, cols // 32, 32), dtype=np.int8).view(np.uint8)
        return np.concatenate([d, q], axis=-1).reshape(rows, -1), Q8

    def mxfp4(e, rows, cols):  # uniform E2M1 codes (rms 2.93) at 2^(s-127) ~ 1/(2.93·sqrt(cols))
        s = np.uint8(round(127 + np.log2(1 / (2.93 * np.sqrt(cols)))))
        b = rng.integers(0, 256, (e, rows, cols // 32, 17), dtype=np.uint8)
        b[..., 0] = s
        return b.reshape(e, rows, -1), FP4

    def f32(*shape, v=0.0):
        return np.full(shape, v, np.float32), None

    yield ("token_embd.weight", *q8_0(V, H))
    yield ("output_norm.weight", *f32(H, v=1.0))
    yield ("output.weight", *q8_0(V, H))
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        yield (b + "attn_norm.weight", *f32(H, v=1.0))
        yield (b + "post_attention_norm.weight", *f32(H, v=1.0))
        for part, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            yield (b + f"attn_{part}.weight", *q8_0(rows, H))
            yield (b + f"attn_{part}.bias", *f32(rows))
        yield (b + "attn_output.weight", *q8_0(H, nh * hd))
        yield (b + "attn_output.bias", *f32(H))
        yield (b + "attn_sinks.weight", *f32(nh))
        router = rng.standard_normal((E, H), dtype=np.float32) * np.float32(4.0 / np.sqrt(H))  # decisive routing
        yield b + "ffn_gate_inp.weight", router, None
        yield (b + "ffn_gate_inp.bias", *f32(E))
        for part, rows, cols in (("gate", I, H), ("up", I, H), ("down", H, I)):
            yield (b + f"ffn_{part}_exps.weight", *mxfp4(E, rows, cols))
            yield (b + f"ffn_{part}_exps.bias", *f32(E, rows))


def bench(out, layers):
    f = out / "mxfp4.gguf"
    if f.exists():
        print("exists", f)
        return
    gguf = import_gguf()
    cfg = dict(GPT_OSS_20B, num_hidden_layers=layers)
    w = start_gpt_oss(gguf, f, "gpt-oss-20b-shape-random", cfg)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    finish_gguf(w, f, vocab_tokenizer(gguf, cfg["vocab_size"]), "qwen2", bench_tensors(gguf, cfg, np.random.default_rng(0)))
    print("wrote", f, flush=True)


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    args = sys.argv[1:]
    if args[:1] == ["--bench"]:
        bench(Path(args[1] if len(args) > 1 else os.path.join(cache, "bench", "gpt-oss-20b-shape")),
              int(args[2]) if len(args) > 2 else 6)
    else:
        tiny(Path(args[0] if args else os.path.join(cache, "gpt-oss-gguf-tiny")))
