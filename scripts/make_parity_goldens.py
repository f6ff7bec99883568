#!/usr/bin/env python3
"""Greedy-decoding parity goldens for the model forward pass, produced by transformers.

transformers dequantizes the GGUF to float32 (and undoes GGUF's Q/K row permutation), so its
logits are the exact f32 reference for our dequantized-f32 path, and its greedy tokens are the
reference for our quantized path. CI reads only the JSON written here (no torch needed).

usage: .venv-oracle/bin/python scripts/make_parity_goldens.py [GGUF] [OUT.json]
"""
import json, os, sys
import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(__file__), "..", "tests", "golden", "model", "smollm2_q4_1_greedy.json")
STEPS = 64
PROBE = 64  # fixed vocab indices whose logits are stored every step (besides the top ones)
TOPN = 8

PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox",
    "Once upon a time, in a land far away,",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nList three prime numbers.<|im_end|>\n<|im_start|>assistant\n",
]


def main():
    torch.manual_seed(0)
    d, f = os.path.dirname(GGUF), os.path.basename(GGUF)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()
    vocab = model.config.vocab_size
    rng = np.random.default_rng(1234)
    probe = sorted(int(i) for i in rng.choice(vocab, PROBE, replace=False))
    cases = []
    for text in PROMPTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        cur = list(ids)
        steps = []
        with torch.no_grad():
            out = model(torch.tensor([cur]), use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].double().numpy()
            for s in range(STEPS):
                nxt = int(np.argmax(logits))
                top = np.argsort(-logits)[:TOPN]
                steps.append({
                    "token": nxt,
                    "max_abs_logit": float(np.max(np.abs(logits))),
                    "top_ids": [int(i) for i in top],
                    "top_logits": [float(logits[i]) for i in top],
                    "probe_logits": [float(logits[i]) for i in probe],
                })
                cur.append(nxt)
                out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].double().numpy()
        cases.append({"prompt": text, "prompt_ids": ids, "steps": steps})
        print(repr(text[:40]), "->", repr(tok.decode([s["token"] for s in steps])[:80]), flush=True)
    json.dump({"model": os.path.basename(GGUF), "generator": "transformers " + __import__("transformers").__version__,
               "probe_ids": probe, "cases": cases}, open(OUT, "w"), separators=(",", ":"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
