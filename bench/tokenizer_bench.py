#!/usr/bin/env python3
"""Encode throughput, single-threaded: rapid-mlx (bench/tokenizer_bench.cpp) vs Hugging Face
tokenizers (TOKENIZERS_PARALLELISM=false, Tokenizer.encode per document) on the same corpus.

usage: .venv/bin/python bench/tokenizer_bench.py [path/to/tokenizer_bench binary]
Prints tokens/s for both and the ratio rapid/HF per tokenizer.
"""
import json
import os
import struct
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "..", "shared", "fixtures", "tokenizers")
NAMES = ["gpt2", "llama2", "llama3_1", "qwen3", "qwen2_5", "mistral_nemo", "gemma3"]


def corpus():
    raw = subprocess.run(["zstd", "-d", "-c", os.path.join(ROOT, "tests/corpus/tokenizer_corpus.bin.zst")],
                         check=True, capture_output=True).stdout
    docs, p = [], 0
    while p < len(raw):
        (kl,) = struct.unpack_from("<I", raw, p); p += 4 + kl
        (n,) = struct.unpack_from("<I", raw, p); p += 4
        docs.append(raw[p:p + n].decode("utf-8", errors="replace")); p += n
    return docs


def hf_rate(name, docs, min_time=2.0):
    tok = Tokenizer.from_file(os.path.join(FIX, name, "tokenizer.json"))
    for d in docs:  # warm the caches, as the C++ benchmark's repetitions do
        tok.encode(d)
    n, t0 = 0, time.perf_counter()
    while True:
        for d in docs:
            n += len(tok.encode(d).ids)
        el = time.perf_counter() - t0
        if el >= min_time:
            return n / el


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tokenizer_bench")
    out = subprocess.run([binary, "--benchmark_filter=encode/", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    ours = {b["name"].split("/")[1]: b["tokens_per_s"] for b in json.loads(out)["benchmarks"]}
    docs = corpus()
    print(f"{'tokenizer':14} {'rapid tok/s':>12} {'HF tok/s':>12} {'ratio':>6}")
    for name in NAMES:
        hf = hf_rate(name, docs)
        print(f"{name:14} {ours[name]:12.0f} {hf:12.0f} {ours[name] / hf:6.2f}")


if __name__ == "__main__":
    main()
