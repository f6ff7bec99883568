#!/usr/bin/env python3
"""Golden file for tests/compute_mxfp4_test.cpp, produced by mlx.core itself (mode "mxfp4").

  .venv/bin/python scripts/make_mxfp4_goldens.py

Writes tests/golden/compute/mxfp4_matmul.json: one activation matrix x [n, cols] and cases
  quantized-f32 / quantized-bf16   mx.quantize(w, group_size=32, bits=4, mode="mxfp4") of a random
                                   matrix in that dtype
  raw                              random nibbles and E8M0 exponents (0, 1, 100..150, 127) written
                                   directly, so every code and edge scale is covered
each with
  weight  the packed uint32 words (row-major [rows, cols/8])
  scales  the uint8 E8M0 exponents ([rows, cols/32])
  deq     mx.dequantize(..., mode="mxfp4") as float32 (the dequantizer's bitwise reference)
  y       mx.quantized_matmul(x, weight, scales, transpose=True, mode="mxfp4") in float32
  mag     sum over c of |deq[r, c] * x[t, c]| (float64), the scale of the error bounds
The script also checks that transformers' gpt-oss MXFP4 dequantization (integrations/mxfp4.py,
reproduced in numpy: low nibble first, ldexp by scale - 127) of the same bytes viewed as HF
*_blocks [rows, cols/32, 16] gives mx.dequantize's values: the two layouts are the same bytes.

  .venv/bin/python scripts/make_mxfp4_goldens.py --ggml

Writes tests/golden/compute/mxfp4_ggml.json from the committed mxfp4_matmul.json: each case's
values as GGML's MXFP4 blocks (GGUF type 39: per 32 elements the E8M0 byte, then element j in the
low nibble of byte j and j + 16 in the high one), `blocks` [rows, cols/32, 17] as bytes, after
checking that llama.cpp's gguf-py dequantizes those bytes to the case's `deq` exactly (so
tests/compute_mxfp4_test.cpp can hold our reading of the layout to gguf-py's).
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "compute", "mxfp4_matmul.json")
OUT_GGML = os.path.join(ROOT, "tests", "golden", "compute", "mxfp4_ggml.json")
ROWS, COLS, N = 6, 256, 5  # n = 5: a 4-token tile plus one
FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def transformers_dequant(blocks, scales):
    """transformers' convert_moe_packed_tensors, before its final transpose (numpy, float64)."""
    *prefix, G, B = blocks.shape
    out = np.empty((*prefix, G, B * 2))
    out[..., 0::2] = FP4[blocks & 0x0F]
    out[..., 1::2] = FP4[blocks >> 4]
    out = np.ldexp(out, (scales.astype(np.int32) - 127)[..., None])
    return out.reshape(*prefix, G * B * 2)


def ggml_blocks(words, scales, rows, cols):
    """MLX's packed words (8 codes per uint32, LSB first) and E8M0 scales as GGML MXFP4 blocks."""
    words = np.asarray(words, dtype=np.uint32).reshape(rows, cols // 8)
    codes = ((words[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF).astype(np.uint8)
    codes = codes.reshape(rows, cols // 32, 32)  # element order
    qs = codes[..., :16] | (codes[..., 16:] << 4)
    e = np.asarray(scales, dtype=np.uint8).reshape(rows, cols // 32, 1)
    return np.concatenate([e, qs], axis=-1)


def ggml_main():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from qwen35_gguf import import_gguf  # llama.cpp's gguf-py, from the pinned sdist
    gguf = import_gguf()
    g = json.load(open(OUT))
    rows, cols = g["rows"], g["cols"]
    cases = []
    for c in g["cases"]:
        blocks = ggml_blocks(c["weight"], c["scales"], rows, cols)
        deq = gguf.quants.dequantize(blocks.reshape(rows, -1), gguf.GGMLQuantizationType.MXFP4)
        want = np.array(c["deq"], dtype=np.float32).reshape(rows, cols)
        # Equal as values: the only differing bits are code 8's zero (-0 in MLX, +0 in gguf-py and ours).
        assert deq.dtype == np.float32 and np.array_equal(deq, want), \
            c["name"] + ": gguf-py's dequantization of the GGML blocks differs from mx.dequantize's"
        cases.append({"name": c["name"], "blocks": blocks.ravel().tolist()})
    with open(OUT_GGML, "w") as f:
        json.dump({"generator": "gguf-py 0.3.36 (llama.cpp's, quants.dequantize MXFP4) on mxfp4_matmul.json's cases",
                   "rows": rows, "cols": cols, "cases": cases}, f)
    print(f"wrote {OUT_GGML} ({len(cases)} cases)")


def main():
    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    rng = np.random.default_rng(20)
    x = rng.standard_normal((N, COLS)).astype(np.float32)
    cases = []
    for name in ("quantized-f32", "quantized-bf16", "raw"):
        if name == "raw":
            wq = mx.array(rng.integers(0, 2**32, (ROWS, COLS // 8), dtype=np.uint64).astype(np.uint32))
            e = rng.integers(100, 151, (ROWS, COLS // 32))
            e[0, :4] = [0, 1, 127, 150]
            s = mx.array(e.astype(np.uint8))
        else:
            dt = mx.float32 if name.endswith("f32") else mx.bfloat16
            w = mx.array(rng.standard_normal((ROWS, COLS)).astype(np.float32) * 0.05).astype(dt)
            wq, s = mx.quantize(w, group_size=32, bits=4, mode="mxfp4")
        deq = mx.dequantize(wq, s, group_size=32, bits=4, mode="mxfp4").astype(mx.float32)
        y = mx.quantized_matmul(mx.array(x), wq, s, transpose=True, group_size=32, bits=4, mode="mxfp4")
        deq = np.array(deq)
        blocks = np.array(wq).view(np.uint8).reshape(ROWS, COLS // 32, 16)
        hf = transformers_dequant(blocks, np.array(s))
        assert np.array_equal(hf.astype(np.float32), deq), name + ": HF and MLX MXFP4 layouts differ"
        mag = np.abs(x.astype(np.float64)) @ np.abs(deq.astype(np.float64)).T
        cases.append({"name": name, "weight": np.array(wq).ravel().tolist(), "scales": np.array(s).ravel().tolist(),
                      "deq": deq.ravel().tolist(), "y": np.array(y.astype(mx.float32)).ravel().tolist(),
                      "mag": mag.ravel().tolist()})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"generator": f"mlx {mx.__version__} (mx.quantize / mx.dequantize / mx.quantized_matmul, "
                                "mode mxfp4, CPU)", "rows": ROWS, "cols": COLS, "n": N, "x": x.ravel().tolist(),
                   "cases": cases}, f)
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    ggml_main() if sys.argv[1:] == ["--ggml"] else main()
