#!/usr/bin/env python3
"""Greedy-decoding parity goldens for the model forward pass, produced by transformers.

transformers dequantizes the GGUF to float32 (and undoes GGUF's Q/K row permutation), so its
logits are the exact f32 reference for our dequantized-f32 path, and its greedy tokens are the
reference for our quantized path. CI reads only the JSON written here (no torch needed).

usage: .venv-oracle/bin/python scripts/make_parity_goldens.py [GGUF] [OUT.json]
       .venv-oracle/bin/python scripts/make_parity_goldens.py --gemma3   (Gemma-3-270M Q4_K_M)
       .venv-oracle/bin/python scripts/make_parity_goldens.py --gemma3-long   (one long prompt)
Gemma prompts are in Gemma's chat format and start with <bos> (the model needs it).
"""
import json, os, sys
import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

GEMMA = "--gemma3" in sys.argv or "--gemma3-long" in sys.argv
LONG = "--gemma3-long" in sys.argv  # one 1287-token prompt: exercises the 512-token sliding window
ARGS = [a for a in sys.argv[1:] if not a.startswith("--gemma3")]
GGUF = ARGS[0] if len(ARGS) > 0 else os.path.expanduser(
    "~/.cache/rapid-mlx/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf" if GEMMA else
    "~/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = ARGS[1] if len(ARGS) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "tests", "golden", "model",
    "gemma3_270m_q4_k_m_long.json" if LONG else
    "gemma3_270m_q4_k_m_greedy.json" if GEMMA else "smollm2_q4_1_greedy.json")
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

GEMMA_PROMPTS = [
    "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>user\nWrite a Python function that reverses a string.<end_of_turn>\n<start_of_turn>model\n",
    "The quick brown fox",
    "Once upon a time, in a land far away,",
    "<start_of_turn>user\nYou are a helpful assistant.\n\nList three prime numbers.<end_of_turn>\n<start_of_turn>model\n",
]
if GEMMA:
    PROMPTS = GEMMA_PROMPTS
if LONG:
    PROMPTS = [" ".join(f"{i} is {'even' if i % 2 == 0 else 'odd'} and {i * i} is its square." for i in range(1, 90))
               + " 90 is"]
    STEPS = 32


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
        if GEMMA:
            ids = [tok.bos_token_id] + ids
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
