#!/usr/bin/env python3
"""Golden files for tests/model_loader_test.cpp, produced by the reference implementations
(run with .venv-oracle: gguf, mlx, mlx-lm, transformers, torch, safetensors).

  .venv-oracle/bin/python scripts/make_loader_goldens.py

Writes tests/golden/model_loader/:
  ggml_types.gguf                 one [4, 256] tensor "t.<TYPE>" per GGML type (Q4_0..Q6_K, Q8_0,
                                  IQ1_S..IQ4_XS, F16, BF16, F32); legacy types quantized by
                                  gguf.quants.quantize, K- and IQ types random blocks with sane f16
                                  scales (gguf-py can only dequantize those)
  ggml_types_expected.safetensors "t.<TYPE>" = gguf.quants.dequantize of the same bytes (f32)
  llama3_rope.gguf                metadata-only llama GGUF with llama.cpp's rope_freqs for a llama3 rope_scaling
  mlx_quant.safetensors           for bits b and group size g: "b<b>g<g>.w" (f32 input),
                                  ".weight"/".scales"/".biases" = mlx.core.quantize(w),
                                  ".expected" = mlx.core.dequantize (f32); "bf16.*" with bf16 input
  smollm2_rows.safetensors        (only if the SmolLM2 GGUF is in the model cache) rows of
                                  transformers' de-permuted, dequantized weights from the GGUF
  gemma3_rows.safetensors         (if the Gemma 3 270M GGUF is cached) the same for Gemma 3, whose
                                  GGUF stores RMSNorm weights as 1 + w
  tiny-llama-mlx-q4/              mlx_lm.convert -q (4 bit, group 64) of tests/golden/tiny/llama
  tiny-qwen3-mlx-q8/              mlx_lm.convert -q (8 bit, group 32) of tests/golden/tiny/qwen3 (bf16)
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "model_loader")
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
SMOLLM = os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")


def f16_bytes(rng, n, lo, hi):
    return rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_kquant_blocks(rng, qtype, nblocks):
    """Random K-quant blocks whose f16 super-block scales are finite and moderate."""
    from gguf import GGML_QUANT_SIZES
    _, bsize = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(nblocks, bsize), dtype=np.uint8)
    name = qtype.name
    if name == "Q2_K":   # scales[16] qs[64] d dmin
        b[:, 80:82] = f16_bytes(rng, nblocks, 0.01, 0.1)
        b[:, 82:84] = f16_bytes(rng, nblocks, 0.001, 0.05)
    elif name == "Q3_K":  # hmask[32] qs[64] scales[12] d
        b[:, 108:110] = f16_bytes(rng, nblocks, 0.001, 0.05)
    elif name in ("Q4_K", "Q5_K"):  # d dmin ...
        b[:, 0:2] = f16_bytes(rng, nblocks, 0.001, 0.05)
        b[:, 2:4] = f16_bytes(rng, nblocks, 0.001, 0.05)
    elif name == "Q6_K":  # ql[128] qh[64] scales[16] d
        b[:, 208:210] = f16_bytes(rng, nblocks, 0.0005, 0.01)
    elif name in ("IQ4_NL", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S"):
        b[:, 0:2] = f16_bytes(rng, nblocks, 0.0005, 0.01)  # d first (then each type's indices, signs, scales)
    elif name == "IQ1_M":  # qs[32] qh[16] scales[4] (u16): d's 16 bits in the top nibbles of the scales
        d = f16_bytes(rng, nblocks, 0.0005, 0.01).view(np.uint16).reshape(nblocks)
        sc = b[:, 48:56].copy().view(np.uint16) & np.uint16(0x0fff)
        for k in range(4):
            sc[:, k] |= ((d >> np.uint16(4 * k)) & np.uint16(15)) << np.uint16(12)
        b[:, 48:56] = sc.view(np.uint8)
    return b


def ggml_goldens():
    import gguf
    from gguf import GGMLQuantizationType as T
    from safetensors.numpy import save_file
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(os.path.join(OUT, "ggml_types.gguf"), "test")
    expected = {}
    rows, cols = 4, 256
    for name in ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                 "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS",
                 "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]:
        qt = T[name]
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        if name == "F32":
            data = x
        elif name == "F16":
            data = x.astype(np.float16)
        elif name.endswith("_K") or name.startswith("IQ"):
            data = random_kquant_blocks(rng, qt, rows * cols // gguf.GGML_QUANT_SIZES[qt][0]).reshape(rows, -1)
        else:
            data = gguf.quants.quantize(x, qt)
        if name in ("F32", "F16"):
            w.add_tensor(f"t.{name}", data)
            deq = data.astype(np.float32)
        else:
            w.add_tensor(f"t.{name}", data, raw_dtype=qt)
            deq = gguf.quants.dequantize(data, qt).astype(np.float32)
        assert deq.shape == (rows, cols), (name, deq.shape)
        expected[f"t.{name}"] = np.ascontiguousarray(deq)
    w.add_uint32("test.some_u32", 7)
    w.add_array("test.nested", [[1, 2], [3]])
    w.add_string("test.str", "héllo")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file(expected, os.path.join(OUT, "ggml_types_expected.safetensors"))
    os.chmod(os.path.join(OUT, "ggml_types_expected.safetensors"), 0o644)
    print("wrote ggml goldens")


def llama3_rope_gguf():
    """Metadata-only llama GGUF with a rope_freqs tensor computed as llama.cpp's converter does for
    rope_scaling {llama3, factor 8, low 1, high 4, original 8192} (head_dim 64, base 500000)."""
    import math
    import gguf
    base, dim, factor, low, high, orig = 500000.0, 64, 8.0, 1.0, 4.0, 8192
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / base ** (i / dim)
        wavelen = 2 * math.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    w = gguf.GGUFWriter(os.path.join(OUT, "llama3_rope.gguf"), "llama")
    w.add_block_count(1)
    w.add_context_length(131072)
    w.add_embedding_length(128)
    w.add_feed_forward_length(256)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(base)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("rope_freqs.weight", np.array(out, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote llama3_rope.gguf")


def mlx_goldens():
    import mlx.core as mx
    from safetensors.numpy import save_file
    rng = np.random.default_rng(99)
    out = {}
    for bits in (2, 3, 4, 5, 6, 8):
        for g in (32, 64, 128):
            w = rng.standard_normal((4, 256)).astype(np.float32)
            w[0, :g] = np.abs(w[0, :g])  # one all-positive group, one exact-zero edge case
            w[1, :g] = 0.0
            wq, s, b = mx.quantize(mx.array(w), group_size=g, bits=bits)
            deq = mx.dequantize(wq, s, b, group_size=g, bits=bits)
            k = f"b{bits}g{g}"
            out[k + ".w"] = w
            out[k + ".weight"] = np.array(wq)
            out[k + ".scales"] = np.array(s)
            out[k + ".biases"] = np.array(b)
            out[k + ".expected"] = np.array(deq.astype(mx.float32))
    w = rng.standard_normal((4, 256)).astype(np.float32)
    wb = mx.array(w).astype(mx.bfloat16)
    wq, s, b = mx.quantize(wb, group_size=64, bits=4)
    out["bf16.w"] = np.array(wb.astype(mx.float32))
    out["bf16.weight"] = np.array(wq)
    # Our reference computes in f32 (MLX would round its bf16 output): dequantize with f32 copies
    # of the bf16 scales/biases.
    out["bf16.expected"] = np.array(mx.dequantize(wq, s.astype(mx.float32), b.astype(mx.float32),
                                                  group_size=64, bits=4))
    # numpy has no bf16: write through torch, moving the raw bf16 bits.
    import torch
    from safetensors.torch import save_file as save_torch
    tens = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}
    tens["bf16.scales"] = torch.from_numpy(np.array(s.view(mx.int16))).view(torch.bfloat16)
    tens["bf16.biases"] = torch.from_numpy(np.array(b.view(mx.int16))).view(torch.bfloat16)
    save_torch(tens, os.path.join(OUT, "mlx_quant.safetensors"))
    os.chmod(os.path.join(OUT, "mlx_quant.safetensors"), 0o644)
    print("wrote mlx goldens")


def smollm_goldens():
    if not os.path.exists(SMOLLM):
        print("SmolLM2 GGUF not in cache; skipping smollm2_rows", file=sys.stderr)
        return
    import torch
    import transformers as tf
    from safetensors.numpy import save_file
    m = tf.AutoModelForCausalLM.from_pretrained(os.path.dirname(SMOLLM), gguf_file=os.path.basename(SMOLLM),
                                                dtype=torch.float32)
    sd = m.state_dict()
    out = {}
    for name in ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                 "model.layers.29.self_attn.q_proj.weight", "model.layers.29.self_attn.k_proj.weight",
                 "model.layers.0.self_attn.v_proj.weight", "model.layers.0.mlp.down_proj.weight",
                 "model.embed_tokens.weight"]:
        t = sd[name].float().numpy()
        # q/k: 72 rows (more than one 64-row head, so the row permutation shows) x first 64 columns;
        # others: 4 full rows. Keeps the golden small.
        out[name] = np.ascontiguousarray(t[:72, :64] if "_proj" in name and ("q_" in name or "k_" in name) else t[:4])
    out["model.norm.weight"] = sd["model.norm.weight"].float().numpy()
    out["model.layers.3.input_layernorm.weight"] = sd["model.layers.3.input_layernorm.weight"].float().numpy()
    save_file(out, os.path.join(OUT, "smollm2_rows.safetensors"))
    os.chmod(os.path.join(OUT, "smollm2_rows.safetensors"), 0o644)
    c = m.config
    with open(os.path.join(OUT, "smollm2_config.json"), "w") as f:
        json.dump({k: getattr(c, k) for k in ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                              "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                                              "rms_norm_eps", "bos_token_id", "eos_token_id", "tie_word_embeddings"]}
                  | {"rope_theta": c.rope_parameters["rope_theta"]}, f, indent=1)
    print("wrote smollm2 goldens")


GEMMA = os.path.join(CACHE, "gemma-3-270m", "gemma-3-270m-q4_k_m.gguf")


def gemma_goldens():
    """Rows of transformers' view of the Gemma 3 270M GGUF (K-quants, Q5_0, Q8_0; norms un-shifted)."""
    if not os.path.exists(GEMMA):
        print("Gemma 3 GGUF not in cache; skipping gemma3_rows", file=sys.stderr)
        return
    import torch
    import transformers as tf
    from safetensors.numpy import save_file
    m = tf.AutoModelForCausalLM.from_pretrained(os.path.dirname(GEMMA), gguf_file=os.path.basename(GEMMA),
                                                dtype=torch.float32)
    sd = m.state_dict()
    out = {}
    for name, t in sd.items():
        if not name.startswith("model.layers.0.") and name not in ("model.embed_tokens.weight", "model.norm.weight"):
            continue
        a = t.float().numpy()
        out[name] = np.ascontiguousarray(a[:3] if a.ndim == 2 else a)
    save_file(out, os.path.join(OUT, "gemma3_rows.safetensors"))
    os.chmod(os.path.join(OUT, "gemma3_rows.safetensors"), 0o644)
    c = m.config
    keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "bos_token_id",
            "eos_token_id", "sliding_window", "query_pre_attn_scalar", "layer_types"]
    with open(os.path.join(OUT, "gemma3_config.json"), "w") as f:
        json.dump({k: getattr(c, k, None) for k in keys} | {"rope_parameters": c.rope_parameters}, f, indent=1)
    print("wrote gemma3 goldens")


def mlx_lm_convert(arch="llama", bits=4, group=64):
    src = os.path.join(ROOT, "tests", "golden", "tiny", arch)
    dst = os.path.join(OUT, f"tiny-{arch}-mlx-q{bits}")
    shutil.rmtree(dst, ignore_errors=True)
    # mlx_lm.convert insists on a tokenizer; any real one does (the tiny model has none).
    import tempfile
    tmp = tempfile.mkdtemp()
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), tmp)
    tok = os.path.join(ROOT, "..", "shared", "fixtures", "tokenizers", "gpt2")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), tmp)
    subprocess.check_call([sys.executable, "-m", "mlx_lm", "convert", "--hf-path", tmp, "--mlx-path", dst,
                           "-q", "--q-bits", str(bits), "--q-group-size", str(group)])
    for f in os.listdir(dst):
        if f not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(dst, f))
    shutil.rmtree(tmp)
    print("wrote", dst)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    if sys.argv[1:] == ["smollm"]:
        smollm_goldens()
        sys.exit(0)
    if sys.argv[1:] == ["mlxlm"]:
        mlx_lm_convert("llama", 4, 64)
        mlx_lm_convert("qwen3", 8, 32)
        sys.exit(0)
    if sys.argv[1:] == ["rope"]:
        llama3_rope_gguf()
        sys.exit(0)
    if sys.argv[1:] == ["ggml"]:
        ggml_goldens()
        sys.exit(0)
    if sys.argv[1:] == ["gemma"]:
        gemma_goldens()
        sys.exit(0)
    ggml_goldens()
    llama3_rope_gguf()
    mlx_goldens()
    mlx_lm_convert("llama", 4, 64)
    mlx_lm_convert("qwen3", 8, 32)
    smollm_goldens()
    gemma_goldens()
