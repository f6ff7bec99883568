#!/usr/bin/env python3
"""Golden file for tests/compute_test.cpp's MLX affine matmul checks, produced by mlx.core itself.

  .venv/bin/python scripts/make_mlx_matmul_goldens.py

Writes tests/golden/compute/mlx_matmul.json: one activation matrix x [n, cols] and, for every
bits in {2,3,4,5,6,8} x group size in {32,64,128} x scale dtype in {float32,float16,bfloat16}, a
weight quantized by mlx.core.quantize from a random matrix in that dtype:
  weight  packed uint32 words (row-major [rows, cols*bits/32])
  scales, biases  raw bits of the dtype (uint16 for f16/bf16, uint32 for f32), row-major
  y       mx.quantized_matmul(x, weight, scales, biases, transpose=True) in float32 (scales and
          biases widened to f32 first, so MLX computes in f32 and does not round y to bf16/f16)
  mag     sum over c of |dequantized w[r, c] * x[t, c]| (float64), the scale of the error bounds

and tests/golden/compute/mlx_matmul_tails.json: the same fields per case plus its cols (x: one
activation matrix per width), for rows whose width ends in a partial lane group of 1-7 blocks of 32
(288 ... 896 columns): 4-bit with bf16 scales at every group size that divides the width and with
f32 / f16 at the smallest, the other bit widths with bf16 at three of the widths. Ten rows, so that
decode's four-row passes meet a remainder, also when two threads split them.
"""
import json
import os

import mlx.core as mx
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "compute", "mlx_matmul.json")
OUT_TAILS = os.path.join(ROOT, "tests", "golden", "compute", "mlx_matmul_tails.json")
ROWS, COLS, N = 6, 256, 5  # n = 5: a 4-token tile plus one, so the tiled path is covered
TAIL_ROWS = 10
# Widths by their tail (blocks past the last whole 8-block group): 1, 2, 3, 4, 4 (over 3 groups), 5, 7.
TAIL_WIDTHS = (288, 576, 352, 640, 896, 416, 480)
OTHER_BITS_WIDTHS = (576, 352, 640)  # the other bit widths' tails: 2, 3 and 4 blocks


def raw_bits(a):
    if a.dtype == mx.float32:
        return np.array(a.view(mx.uint32)).ravel().tolist()
    return np.array(a.view(mx.uint16)).ravel().tolist()


DTYPES = ((mx.float32, "f32"), (mx.float16, "f16"), (mx.bfloat16, "bf16"))
GENERATOR = f"mlx {mx.__version__} (mx.quantize / mx.quantized_matmul, CPU)"


def quantized_case(rng, x, rows, bits, g, dt, name):
    w = mx.array(rng.standard_normal((rows, x.shape[1])).astype(np.float32) * 0.05).astype(dt)
    wq, s, b = mx.quantize(w, group_size=g, bits=bits)
    s32, b32 = s.astype(mx.float32), b.astype(mx.float32)
    y = mx.quantized_matmul(mx.array(x), wq, s32, b32, transpose=True, group_size=g, bits=bits)
    deq = np.array(mx.dequantize(wq, s32, b32, group_size=g, bits=bits), dtype=np.float64)
    mag = np.abs(x.astype(np.float64)) @ np.abs(deq).T
    return {"bits": bits, "group_size": g, "dtype": name, "weight": np.array(wq).ravel().tolist(),
            "scales": raw_bits(s), "biases": raw_bits(b), "y": np.array(y).ravel().tolist(),
            "mag": mag.ravel().tolist()}


def write(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)
    print(f"wrote {path} ({len(doc['cases'])} cases)")


def main():
    rng = np.random.default_rng(18)
    x = rng.standard_normal((N, COLS)).astype(np.float32)
    cases = [quantized_case(rng, x, ROWS, bits, g, dt, name)
             for bits in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128) for dt, name in DTYPES]
    write(OUT, {"generator": GENERATOR, "rows": ROWS, "cols": COLS, "n": N, "x": x.ravel().tolist(),
                "cases": cases})

    tails, xs = [], {}
    for cols in TAIL_WIDTHS:
        # Multiples of 1/64: exact in f32 and short in JSON.
        xt = (np.round(rng.standard_normal((N, cols)) * 64) / 64).astype(np.float32)
        xs[str(cols)] = xt.ravel().tolist()
        groups = [g for g in (32, 64, 128) if cols % g == 0]
        kinds = [(4, g, mx.bfloat16, "bf16") for g in groups]
        kinds += [(4, groups[0], dt, name) for dt, name in DTYPES[:2]]
        if cols in OTHER_BITS_WIDTHS:
            kinds += [(bits, groups[-1], mx.bfloat16, "bf16") for bits in (2, 3, 5, 6, 8)]
        for bits, g, dt, name in kinds:
            c = quantized_case(rng, xt, TAIL_ROWS, bits, g, dt, name)
            c["cols"] = cols
            tails.append(c)
    write(OUT_TAILS, {"generator": GENERATOR, "rows": TAIL_ROWS, "n": N, "x": xs, "cases": tails})


if __name__ == "__main__":
    main()
