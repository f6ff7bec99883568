#!/usr/bin/env python3
"""llama.cpp reference for the SmolLM2 GGUF parity test (llama-cpp-python, run on the GGUF itself).

For each prompt of tests/golden/model/smollm2_q4_1_greedy.json (written by make_parity_goldens.py):
llama.cpp's own free-running greedy tokens (64, one token per eval like a decode loop), and its
logits teacher-forced on transformers' tokens at the same top/probe vocabulary indices.

usage: .venv-oracle/bin/python scripts/make_parity_goldens_llamacpp.py [GGUF]
       .venv-oracle/bin/python scripts/make_parity_goldens_llamacpp.py --gemma3   (Gemma-3-270M)
"""
import json, os, sys
import numpy as np
from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GEMMA = "--gemma3" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--gemma3"]
GGUF = ARGS[0] if len(ARGS) > 0 else os.path.expanduser(
    "~/.cache/rapid-mlx/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf" if GEMMA else
    "~/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
STEM = "gemma3_270m_q4_k_m" if GEMMA else "smollm2_q4_1"
SRC = os.path.join(ROOT, "tests", "golden", "model", STEM + "_greedy.json")
OUT = os.path.join(ROOT, "tests", "golden", "model", STEM + "_llamacpp.json")


def main():
    g = json.load(open(SRC))
    probe = g["probe_ids"]
    llm = Llama(model_path=GGUF, n_ctx=512, n_batch=512, n_threads=2, logits_all=True, verbose=False)
    import llama_cpp
    cases = []
    for c in g["cases"]:
        ids = c["prompt_ids"]
        hf_tokens = [s["token"] for s in c["steps"]]
        # Teacher-forced logits (batched eval of prompt + transformers' tokens).
        llm.reset()
        llm.eval(ids + hf_tokens[:-1])
        scores = np.array(llm.scores[: len(ids) + len(hf_tokens) - 1], dtype=np.float64)
        steps = []
        for k, s in enumerate(c["steps"]):
            row = scores[len(ids) - 1 + k]
            steps.append({"top_logits": [float(row[i]) for i in s["top_ids"]],
                          "probe_logits": [float(row[i]) for i in probe],
                          "argmax": int(np.argmax(row))})
        # Free-running greedy, one token per eval (llama.cpp's decode path).
        llm.reset()
        llm.eval(ids)
        greedy = []
        for _ in range(len(hf_tokens)):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            greedy.append(t)
            llm.eval([t])
        cases.append({"greedy": greedy, "steps": steps})
        same = sum(a == b for a, b in zip(greedy, hf_tokens))
        print(f"{c['prompt'][:30]!r}: llama.cpp greedy == transformers on {same}/{len(hf_tokens)}", flush=True)
    json.dump({"generator": "llama-cpp-python " + llama_cpp.__version__, "cases": cases},
              open(OUT, "w"), separators=(",", ":"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
