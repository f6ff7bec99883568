#!/usr/bin/env python3
"""Greedy-decoding parity goldens for an MLX-quantized checkpoint, produced by mlx_lm (mlx on CPU).

The model is loaded with mlx_lm's own loader and cast to float32 (the bf16 scales, biases and
norms convert exactly), so mlx's quantized matmuls give the f32 reference for our exact path
(which dequantizes the same weights to f32). Prompts and prompt token ids are those of
tests/golden/model/smollm2_q4_1_greedy.json (same tokenizer; the MLX copy carries tokenizer.gguf,
which mlx_lm cannot read). Output has the same shape as make_parity_goldens.py's.

usage: .venv-oracle/bin/python scripts/make_parity_goldens_mlx.py [MLX_DIR] [OUT.json]
"""
import json, os, sys
import numpy as np
import mlx.core as mx
import mlx_lm
from mlx_lm.utils import load_model
from mlx_lm.models.cache import make_prompt_cache

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/rapid-mlx/models/smollm2-135m-instruct/mlx-q4")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    ROOT, "tests", "golden", "model", "smollm2_mlx_q4_greedy.json")
SRC = os.path.join(ROOT, "tests", "golden", "model", "smollm2_q4_1_greedy.json")
STEPS = 64
TOPN = 8


def main():
    mx.set_default_device(mx.cpu)
    src = json.load(open(SRC))
    model, _ = load_model(__import__("pathlib").Path(DIR))
    model.set_dtype(mx.float32)
    model.eval()
    probe = src["probe_ids"]
    cases = []
    for c in src["cases"]:
        ids = c["prompt_ids"]
        cache = make_prompt_cache(model)
        out = model(mx.array([ids]), cache=cache)
        logits = np.array(out[0, -1].astype(mx.float32)).astype(np.float64)
        steps = []
        for _ in range(STEPS):
            nxt = int(np.argmax(logits))
            top = np.argsort(-logits)[:TOPN]
            steps.append({
                "token": nxt,
                "max_abs_logit": float(np.max(np.abs(logits))),
                "top_ids": [int(i) for i in top],
                "top_logits": [float(logits[i]) for i in top],
                "probe_logits": [float(logits[i]) for i in probe],
            })
            out = model(mx.array([[nxt]]), cache=cache)
            logits = np.array(out[0, -1].astype(mx.float32)).astype(np.float64)
        cases.append({"prompt": c["prompt"], "prompt_ids": ids, "steps": steps})
        print(repr(c["prompt"][:40]), "->", [s["token"] for s in steps][:12], flush=True)
    json.dump({"model": os.path.basename(os.path.normpath(DIR)), "generator": "mlx_lm " + mlx_lm.__version__ +
               " (mlx " + mx.__version__ + ", cpu, float32)", "probe_ids": probe, "cases": cases},
              open(OUT, "w"), separators=(",", ":"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
