#!/usr/bin/env python3
"""Regenerates tests/golden/server/smollm2_prompts.json: for fixed conversations and completion
prompts, the prompt token ids that Hugging Face transformers produces for SmolLM2-135M-Instruct
(tokenizer and chat template read from the GGUF itself), as apply_chat_template(tokenize=True,
add_generation_prompt=True) and tokenizer(prompt) do. The server e2e tests compare usage counts
with these, so CI needs no transformers.

usage: .venv-oracle/bin/python scripts/make_server_goldens.py [GGUF]
"""
import json
import os
import sys

from transformers import AutoTokenizer

CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
GGUF = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "server", "smollm2_prompts.json")

CHATS = {
    "hello": [{"role": "user", "content": "Say hello in one short sentence."}],
    "system": [{"role": "system", "content": "You are a terse assistant."},
               {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "user", "content": "Name a colour."},
                   {"role": "assistant", "content": "Blue."},
                   {"role": "user", "content": "Another one, with ünïcödé ✓?"}],
}
COMPLETIONS = {"fox": "The quick brown fox", "code": "def fibonacci(n):\n    "}


def main():
    tok = AutoTokenizer.from_pretrained(os.path.dirname(GGUF), gguf_file=os.path.basename(GGUF))
    out = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "chat": {}, "completion": {}}
    for name, msgs in CHATS.items():
        ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        out["chat"][name] = {"messages": msgs, "ids": list(map(int, ids))}
    for name, text in COMPLETIONS.items():
        ids = tok(text)["input_ids"]
        out["completion"][name] = {"prompt": text, "ids": list(map(int, ids))}
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
