#!/usr/bin/env python3
"""Writes a random-weight Qwen3-Embedding-shaped model: what sentence-transformers saves for
Qwen/Qwen3-Embedding-*. Weights of a bare Qwen3Model (no "model." prefix, no lm_head), the real
Qwen3 tokenizer with Qwen3-Embedding's post-processor (appends <|endoftext|>, the token whose
hidden state is pooled), and the sentence-transformers pipeline files: modules.json,
1_Pooling/config.json (pooling_mode_lasttoken, or --pooling mean|cls) and 2_Normalize.

  .venv/bin/python scripts/make_tiny_embedding_model.py OUT_DIR [--pooling lasttoken] [--no-normalize]
"""
import argparse
import json
import os
import sys

from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_chat_model  # noqa: E402

EOT = "<|endoftext|>"
EOT_ID = 151643


def write_pipeline(out, pooling, normalize, dim):
    """sentence-transformers' pipeline files: modules.json (Transformer, Pooling, optional
    Normalize) and 1_Pooling/config.json with the one pooling_mode_* flag `pooling` names."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    modes = {"cls_token": pooling == "cls", "mean_tokens": pooling == "mean", "max_tokens": False,
             "mean_sqrt_len_tokens": False, "weightedmean_tokens": False, "lasttoken": pooling == "lasttoken"}
    pool = {"word_embedding_dimension": dim, **{"pooling_mode_" + k: v for k, v in modes.items()},
            "include_prompt": True}
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump(pool, f, indent=2)


def make(out, pooling="lasttoken", normalize=True, hidden=64, layers=2, seed=0):
    make_tiny_chat_model.make(out, hidden=hidden, layers=layers, seed=seed)
    st = os.path.join(out, "model.safetensors")
    t = load_file(st)
    save_file({k[len("model."):]: v for k, v in t.items()}, st, metadata={"format": "pt"})
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["architectures"] = ["Qwen3Model"]
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    tok_path = os.path.join(out, "tokenizer.json")
    with open(tok_path) as f:
        tok = json.load(f)
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": EOT, "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": EOT, "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": EOT, "type_id": 1}}],
        "special_tokens": {EOT: {"id": EOT, "ids": [EOT_ID], "tokens": [EOT]}},
    }
    with open(tok_path, "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    write_pipeline(out, pooling, normalize, hidden)
    with open(os.path.join(out, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {"query": "Instruct: Given a query, retrieve relevant passages\nQuery:", "document": ""},
                   "default_prompt_name": None, "similarity_fn_name": "cosine"}, f, indent=2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pooling", choices=["lasttoken", "mean", "cls"], default="lasttoken")
    ap.add_argument("--no-normalize", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    make(a.out, pooling=a.pooling, normalize=not a.no_normalize, seed=a.seed)


if __name__ == "__main__":
    main()
