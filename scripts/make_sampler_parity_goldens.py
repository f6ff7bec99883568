#!/usr/bin/env python3
"""Goldens for the sampler: transformers' logits processors/warpers applied to random logits.

Each case: raw logits, prompt/generated ids, params, and the processed scores transformers'
pipeline yields (RepetitionPenalty → Temperature → TopK → TopP → MinP; logit_bias and the
OpenAI presence/frequency penalties, which have no transformers processor, are applied first
with their documented formulas), plus torch's log_softmax of the raw logits.

usage: .venv-oracle/bin/python scripts/make_sampler_parity_goldens.py
"""
import json, os
import numpy as np
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
    TopKLogitsWarper, TopPLogitsWarper)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "model",
                   "sampler_cases.json")
V = 400

PARAMS = [
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=20),
    dict(temperature=1.3, top_p=0.9),
    dict(temperature=0.8, top_k=50, top_p=0.8),
    dict(temperature=1.0, min_p=0.05),
    dict(temperature=0.6, top_p=0.95, min_p=0.1),
    dict(temperature=1.0, repetition_penalty=1.3),
    dict(temperature=0.9, repetition_penalty=0.8, top_k=40),
    dict(temperature=1.0, presence_penalty=0.7, frequency_penalty=0.3, top_p=0.7),
    dict(temperature=1.0, logit_bias={"5": 4.0, "17": -100.0, "300": 2.5}, top_k=10),
    dict(temperature=0.0, repetition_penalty=1.2),
    dict(temperature=2.0, top_k=1),
]


def main():
    rng = np.random.default_rng(7)
    cases = []
    for i, p in enumerate(PARAMS):
        logits = (rng.standard_normal(V) * 3).astype(np.float32)
        prompt = [int(x) for x in rng.integers(0, V, 12)]
        gen = [int(x) for x in rng.integers(0, V, 10)] + [int(prompt[0])] * 3
        s = torch.tensor(logits, dtype=torch.float32)[None].clone()
        for k, b in p.get("logit_bias", {}).items():
            s[0, int(k)] += b
        ids = torch.tensor([prompt + gen])
        if p.get("repetition_penalty", 1.0) != 1.0:
            s = RepetitionPenaltyLogitsProcessor(p["repetition_penalty"])(ids, s)
        if p.get("presence_penalty") or p.get("frequency_penalty"):
            counts = np.bincount(gen, minlength=V)
            for t in np.nonzero(counts)[0]:
                s[0, t] -= p.get("presence_penalty", 0) + p.get("frequency_penalty", 0) * counts[t]
        if p["temperature"] > 0:
            s = TemperatureLogitsWarper(p["temperature"])(ids, s)
            if p.get("top_k"):
                s = TopKLogitsWarper(p["top_k"])(ids, s)
            if p.get("top_p", 1.0) < 1.0:
                s = TopPLogitsWarper(p["top_p"])(ids, s)
            if p.get("min_p"):
                s = MinPLogitsWarper(p["min_p"])(ids, s)
        lsm = torch.log_softmax(torch.tensor(logits, dtype=torch.float64), -1).numpy()
        out = s[0].numpy()
        cases.append({
            "params": p, "logits": [float(x) for x in logits], "prompt": prompt, "generated": gen,
            "processed": [None if not np.isfinite(x) else float(x) for x in out],
            "greedy": int(np.argmax(out)),
            "log_softmax": [float(x) for x in lsm],
        })
    json.dump({"generator": "transformers " + __import__("transformers").__version__, "cases": cases},
              open(OUT, "w"), separators=(",", ":"))
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
