#!/usr/bin/env python3
"""Tiny random-weight MoE models in MXFP4, for tests/model_mxfp4_test.cpp.

The weights are scripts/make_tiny_moe.py's (same configs, same seeds), written as, under
OUT/<config>/:
  mlx-mxfp4/   mlx_lm.utils.quantize_model(mode="mxfp4") + save_model: every Linear, Embedding and
               stacked expert (SwitchLinear) in MLX's MXFP4 (uint32 nibbles + uint8 E8M0 scales, no
               biases); gpt_oss's routers as its quant_predicate asks ({"bits": 8, "group_size": 64},
               no mode: affine). greedy.json from mlx_lm.utils.load_model of that directory.
gpt-oss only:
  hf-mxfp4/    the Hugging Face release layout: experts as gate_up_proj_blocks [E, 2I, H/32, 16]
               (rows = outputs, gate rows even, up rows odd) + gate_up_proj_scales [E, 2I, H/32],
               down_proj_blocks [E, H, I/32, 16] + down_proj_scales, biases [E, 2I] / [E, H];
               quantization_config {"quant_method": "mxfp4"}; every other tensor bf16. The blocks
               come from this file's numpy quantizer (nearest E2M1, scale 2^(floor(log2 amax) - 2)).
  hf-deq-bf16/ the same model with the experts dequantized by transformers' formula
               (integrations/mxfp4.py convert_moe_packed_tensors: low nibble first, ldexp by
               scale - 127, then the transpose to [E, H, 2I] / [E, I, H]), in numpy, stored bf16
               (exact: E2M1·2^k fits bf16): the reference the MXFP4 copy's logits must match.
  hf-bad-scales-dtype/, hf-bad-scales-shape/, mlx-bad-scales-dtype/: one scales tensor of layer 0
               corrupted (float16 instead of uint8, one group short, float16): must be refused.
usage: .venv/bin/python scripts/make_tiny_mxfp4.py [OUT]   (default $RAPID_MODEL_CACHE/mxfp4-tiny)
"""
import copy
import json
import os
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.utils import quantize_model, save_config, save_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_moe import SEED_INDEX, build  # noqa: E402
from make_tiny_qwen35 import goldens, write_tokenizer  # noqa: E402

FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
NAMES = ("gpt-oss", "qwen3-moe")


def quantize_mxfp4(w):
    """[..., rows, cols] float -> (blocks [..., rows, cols/32, 16] uint8, scales [..., rows, cols/32] uint8)."""
    w = np.asarray(w, dtype=np.float64)
    g = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = np.max(np.abs(g), axis=-1, keepdims=True)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, -127)  # amax/2^e in [4, 8)
    e = np.clip(e, -127, 127)
    v = g / np.exp2(e)
    codes = np.argmin(np.abs(v[..., None] - FP4[:8]), axis=-1)  # nearest magnitude
    codes = np.where((v < 0) & (codes > 0), codes + 8, codes).astype(np.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks.astype(np.uint8), (e + 127).astype(np.uint8)[..., 0]


def dequant_transformers(blocks, scales):
    """transformers' convert_moe_packed_tensors (numpy): [E, R, G, 16] -> [E, G*32, R] (transposed)."""
    *prefix, G, B = blocks.shape
    out = np.empty((*prefix, G, B * 2))
    out[..., 0::2] = FP4[blocks & 0x0F]
    out[..., 1::2] = FP4[blocks >> 4]
    out = np.ldexp(out, (scales.astype(np.int32) - 127)[..., None])
    return out.reshape(*prefix, G * B * 2).swapaxes(1, 2)


def bf16(a):
    return mx.array(np.asarray(a, dtype=np.float32)).astype(mx.bfloat16)


def hf_copies(w, d):
    """hf-mxfp4 and hf-deq-bf16 from the mlx-f32 weights w (experts.{gate,up,down}_proj [E, out, in])."""
    mxfp4, deq = {}, {}
    for k, v in w.items():
        if ".experts.up_proj." in k:
            continue
        if ".experts.gate_proj." in k or ".experts.down_proj." in k:
            pre, kind = k.split(".experts.")
            proj, what = kind.split(".")
            if proj == "gate_proj":
                up = np.array(w[k.replace("gate_proj", "up_proj")])
                both = np.stack([np.array(v), up], axis=2)  # gate/up rows (or bias entries) interleaved
                val = both.reshape(v.shape[0], -1, *v.shape[2:])
                name = pre + ".experts.gate_up_proj"
            else:
                val, name = np.array(v), pre + ".experts.down_proj"
            if what == "bias":
                mxfp4[name + "_bias"] = deq[name + "_bias"] = bf16(val)
                continue
            blocks, scales = quantize_mxfp4(val)
            mxfp4[name + "_blocks"], mxfp4[name + "_scales"] = mx.array(blocks), mx.array(scales)
            deq[name] = bf16(dequant_transformers(blocks, scales))
            assert np.array_equal(np.array(deq[name].astype(mx.float32)), dequant_transformers(blocks, scales)), \
                "bf16 does not hold the dequantized MXFP4 values exactly"
            continue
        mxfp4[k] = deq[k] = v.astype(mx.bfloat16)
    return mxfp4, deq


def corrupt(src, dst, key_part, fix):
    shutil.copytree(src, dst)
    w = mx.load(str(dst / "model.safetensors"))
    k = next(k for k in sorted(w) if key_part in k)
    w[k] = fix(w[k])
    mx.save_safetensors(str(dst / "model.safetensors"), w, metadata={"format": "pt" if "hf" in dst.name else "mlx"})
    (dst / "corrupt.txt").write_text(k + "\n")


def main():
    mx.set_default_device(mx.cpu)
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "mxfp4-tiny"))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for name in NAMES:
        i = SEED_INDEX[name]
        d = tmp / name
        cfg, model = build(name)
        V = cfg["vocab_size"]
        if name == "gpt-oss":
            save_model(d / "f32", model)  # the weights hf_copies starts from (not kept)
            w = mx.load(str(d / "f32" / "model.safetensors"))
            shutil.rmtree(d / "f32")
            for sub, tensors, qc in zip(("hf-mxfp4", "hf-deq-bf16"), hf_copies(w, d),
                                        ({"quant_method": "mxfp4", "modules_to_not_convert": ["router", "lm_head",
                                          "embed_tokens", "self_attn"]}, None)):
                (d / sub).mkdir(parents=True)
                mx.save_safetensors(str(d / sub / "model.safetensors"), tensors, metadata={"format": "pt"})
                c = dict(cfg, torch_dtype="bfloat16")
                if qc:
                    c["quantization_config"] = qc
                (d / sub / "config.json").write_text(json.dumps(c, indent=2))
                write_tokenizer(d / sub, V)
        qmodel, qcfg = quantize_model(model, copy.deepcopy(cfg), None, None, mode="mxfp4")
        save_model(d / "mlx-mxfp4", qmodel)
        save_config(qcfg, d / "mlx-mxfp4" / "config.json")
        write_tokenizer(d / "mlx-mxfp4", V)
        goldens(d / "mlx-mxfp4", 4000 + i)
        if name == "gpt-oss":
            corrupt(d / "hf-mxfp4", d / "hf-bad-scales-dtype", "layers.0.mlp.experts.gate_up_proj_scales",
                    lambda s: s.astype(mx.float16))
            corrupt(d / "hf-mxfp4", d / "hf-bad-scales-shape", "layers.0.mlp.experts.down_proj_scales",
                    lambda s: s[..., :-1])
            corrupt(d / "mlx-mxfp4", d / "mlx-bad-scales-dtype", "layers.0.mlp.experts.down_proj.scales",
                    lambda s: s.astype(mx.float16))
    # Complete or absent: the tests generate the set when the directory is missing.
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
