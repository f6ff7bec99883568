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
"""
import json
import os

import mlx.core as mx
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "compute", "mlx_matmul.json")
ROWS, COLS, N = 6, 256, 5  # n = 5: a 4-token tile plus one, so the tiled path is covered


def raw_bits(a):
    if a.dtype == mx.float32:
        return np.array(a.view(mx.uint32)).ravel().tolist()
    return np.array(a.view(mx.uint16)).ravel().tolist()


def main():
    rng = np.random.default_rng(18)
    x = rng.standard_normal((N, COLS)).astype(np.float32)
    cases = []
    for bits in (2, 3, 4, 5, 6, 8):
        for g in (32, 64, 128):
            for dt, name in ((mx.float32, "f32"), (mx.float16, "f16"), (mx.bfloat16, "bf16")):
                w = mx.array(rng.standard_normal((ROWS, COLS)).astype(np.float32) * 0.05).astype(dt)
                wq, s, b = mx.quantize(w, group_size=g, bits=bits)
                s32, b32 = s.astype(mx.float32), b.astype(mx.float32)
                y = mx.quantized_matmul(mx.array(x), wq, s32, b32, transpose=True, group_size=g, bits=bits)
                deq = np.array(mx.dequantize(wq, s32, b32, group_size=g, bits=bits), dtype=np.float64)
                mag = np.abs(x.astype(np.float64)) @ np.abs(deq).T
                cases.append({"bits": bits, "group_size": g, "dtype": name,
                              "weight": np.array(wq).ravel().tolist(), "scales": raw_bits(s),
                              "biases": raw_bits(b), "y": np.array(y).ravel().tolist(),
                              "mag": mag.ravel().tolist()})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"generator": f"mlx {mx.__version__} (mx.quantize / mx.quantized_matmul, CPU)",
                   "rows": ROWS, "cols": COLS, "n": N, "x": x.ravel().tolist(), "cases": cases}, f)
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
