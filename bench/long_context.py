#!/usr/bin/env python3
"""Prefill and decode at long contexts: rapid-mlx vs llama.cpp on the same GGUF.

An agent's requests carry thousands of tokens of history, and every decoded token then reads the
whole KV cache: at 8k tokens SmolLM2's f16 KV (23 KB a token) is twice its weights. For each
context (approximate: the prompt is core_table.py's text repeated), rapid-mlx `run --raw` decodes
--max-tokens after the prompt, and llama.cpp (bench/decode_bench.py) the same number after a prompt
of the same token count. The decode bound column is the DRAM read bandwidth (stream_probe) over
what one decode step must read: the GGUF file plus the KV of the context.

usage: python3 bench/long_context.py [--oracle .venv/bin/python] [--contexts 1024,3072,7680] [GGUF]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core_table  # noqa: E402
import run_stats  # noqa: E402
from memory import cache_geometry  # noqa: E402

ROOT = core_table.ROOT
DEFAULT_MODEL = os.path.join(os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models")),
                             "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")


def rapid(binary, model, threads, words_times, max_tokens, reps):
    prompt = core_table.PROMPT * words_times
    best = None
    for _ in range(reps):
        r = run_stats.run(binary, model, "--raw", "--threads", threads, "--max-tokens", max_tokens, prompt)
        if best is None:
            best = r
        best = {**r, "prefill": max(best["prefill"], r["prefill"]), "decode": max(best["decode"], r["decode"])}
    return best


def llama(oracle, model, threads, prompt_tokens):
    if not oracle:
        return None
    r = subprocess.run([oracle, os.path.join(ROOT, "bench", "decode_bench.py"), model, str(threads), "--json",
                        "--prompt", str(prompt_tokens)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"decode_bench.py failed on {model}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default=DEFAULT_MODEL)
    ap.add_argument("--bin", default=os.environ.get("RAPID_MLX_BIN", os.path.join(ROOT, "build", "rapid-mlx")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contexts", default="1024,3072,7680", help="approximate prompt tokens (comma-separated; prompt + --max-tokens must fit the model)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2, help="rapid-mlx runs per context, best kept (llama.cpp: 3 inside)")
    ap.add_argument("--oracle", default=os.path.join(ROOT, ".venv", "bin", "python"),
                    help="python with llama_cpp (llama-cpp-python); '' to skip llama.cpp")
    ap.add_argument("--quick", action="store_true", help="smoke run: one 256-token context, 4 tokens, no llama.cpp")
    a = ap.parse_args(argv)
    if not os.path.exists(a.model):
        print(f"no model at {a.model} (scripts/fetch_models.sh)", file=sys.stderr)
        return 2
    contexts = [int(c) for c in a.contexts.split(",") if c]
    if a.quick:
        contexts, a.max_tokens, a.reps, a.oracle = [256], 4, 1, ""
    oracle = a.oracle if core_table.has_llama_cpp(a.oracle) else ""
    if a.oracle and not oracle:
        print(f"note: {a.oracle} has no llama_cpp: llama.cpp columns left empty", file=sys.stderr)
    probe = core_table.build_probe("/tmp")
    gbps = core_table.bandwidth(probe, 64 if a.quick else 256, a.threads)[a.threads]
    kv_token = cache_geometry(a.model)[0]
    size = os.path.getsize(a.model)
    # Tokens per repetition of the text, from a one-repetition run.
    per_rep = run_stats.run(a.bin, a.model, "--raw", "--threads", a.threads, "--max-tokens", 1, core_table.PROMPT)["prompt"]
    load = os.getloadavg()[0]
    rows = []
    for ctx in contexts:
        r = rapid(a.bin, a.model, a.threads, max(1, ctx // per_rep), a.max_tokens, a.reps)
        n = r["prompt"]
        l = llama(oracle, a.model, a.threads, n)
        bound = gbps * 1e9 / (size + kv_token * (n + a.max_tokens // 2))
        rows.append((n, r, l, bound))
        print(f"  context {n}: done", file=sys.stderr)
    print(f"{os.path.basename(a.model)}, {a.threads} threads; load average at start {load:.2f}; DRAM read "
          f"{gbps:.1f} GB/s; KV {kv_token / 1024:.1f} KiB a token; best of {a.reps} (llama.cpp: 3)\n")
    print("| context | rapid prefill | llama prefill | ratio | rapid decode | llama decode | ratio | decode bound | decode / bound |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    f = core_table.fmt
    for n, r, l, bound in rows:
        lp, ld = (l["prefill"], l["decode"]) if l else (None, None)
        print(f"| {n} | {f(r['prefill'])} | {f(lp)} | {f(r['prefill'] / lp if lp else None, '.2f')} | "
              f"{f(r['decode'])} | {f(ld)} | {f(r['decode'] / ld if ld else None, '.2f')} | {f(bound)} | "
              f"{f(r['decode'] / bound, '.2f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
