#!/usr/bin/env python3
"""RoPE frequency goldens from transformers' rope init functions (default, linear, llama3, yarn).

usage: .venv-oracle/bin/python scripts/make_rope_parity_goldens.py
"""
import json, os
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "model", "rope_cases.json")

CASES = [
    dict(head_dim=64, theta=10000.0, max_pos=2048, scaling={"rope_type": "default"}),
    dict(head_dim=128, theta=1000000.0, max_pos=32768, scaling={"rope_type": "default"}),
    dict(head_dim=64, theta=10000.0, max_pos=8192, scaling={"rope_type": "linear", "factor": 4.0}),
    dict(head_dim=128, theta=500000.0, max_pos=131072,
         scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}),
    dict(head_dim=128, theta=1000000.0, max_pos=131072,
         scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    dict(head_dim=64, theta=10000.0, max_pos=16384,
         scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096,
                  "beta_fast": 16.0, "beta_slow": 2.0}),
]


def main():
    out = []
    for c in CASES:
        rp = dict(c["scaling"], rope_theta=c["theta"])
        cfg = LlamaConfig(hidden_size=c["head_dim"] * 4, num_attention_heads=4, head_dim=c["head_dim"],
                          max_position_embeddings=c["max_pos"], rope_parameters=rp)
        t = rp["rope_type"]
        if t == "default":
            from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
            inv, att = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
        else:
            inv, att = ROPE_INIT_FUNCTIONS[t](cfg, None)
        out.append(dict(c, inv_freq=[float(x) for x in inv.float()], attention_factor=float(att)))
        print(t, len(inv), float(att))
    json.dump({"generator": "transformers " + __import__("transformers").__version__, "cases": out},
              open(OUT, "w"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
