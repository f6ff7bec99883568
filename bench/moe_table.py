#!/usr/bin/env python3
"""Issue 20's MoE speed table: rapid-mlx vs llama.cpp on the same mixture-of-experts GGUF (default:
the Qwen3-30B-A3B-shaped Q4_0 file of `scripts/moe_gguf.py --bench`), 1 and 2 threads, prefill of
a ~512-token prompt and 64 decode steps after it (targets: decode >= 1.5x, prefill >= 1.2x), and
decode bytes touched per token against the active parameters' bytes (build/model_moe_gguf_bench).

  rapid-mlx: `rapid-mlx run --raw --threads N --max-tokens 64 PROMPT` (its last stderr line),
             PROMPT = core_table.py's text x4 (its token count is reported);
  llama.cpp: bench/decode_bench.py --json --prompt 512 (llama-cpp-python), best of 3 inside.
The machine is shared: the load average is printed before and after; compare ratios of one run.

usage: bench/moe_table.py [--bin build/rapid-mlx] [--oracle PY] [--threads 1,2] [--reps 2] [GGUF...]
"""
import argparse
import os
import subprocess
import sys

import core_table
import run_stats

ROOT = core_table.ROOT
DEFAULT = os.path.join(core_table.CACHE, "bench", "qwen3-30b-a3b-shape", "q4_0.gguf")
PROMPT = " ".join([core_table.PROMPT] * 4)


def rapid(binary, model, threads, reps):
    best = {"prefill": 0.0, "decode": 0.0}
    for _ in range(reps):
        r = run_stats.run(binary, model, "--raw", "--threads", threads, "--max-tokens", 64, PROMPT)
        best["prompt"], best["generated"] = r["prompt"], r["generated"]
        best["prefill"] = max(best["prefill"], r["prefill"])
        best["decode"] = max(best["decode"], r["decode"])
    return best


def llama(oracle, model, threads):
    r = subprocess.run([oracle, os.path.join(ROOT, "bench", "decode_bench.py"), model, str(threads), "--json",
                        "--prompt", "512"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"decode_bench.py failed on {model}:\n{r.stderr[-2000:]}")
    return core_table.json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--oracle", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    models = a.models or [DEFAULT]
    threads = [int(t) for t in a.threads.split(",")]
    oracle = a.oracle if core_table.has_llama_cpp(a.oracle) else ""
    load0 = os.getloadavg()
    rows = []
    for m in models:
        for t in threads:
            r = rapid(a.bin, m, t, a.reps)
            l = llama(oracle, m, t) if oracle else None
            rows.append((m, t, r, l))
            print(f"  {os.path.basename(m)} threads={t}: rapid {r}, llama.cpp {l}", file=sys.stderr, flush=True)
    byte_lines = []
    probe = os.path.join(os.path.dirname(a.bin), "model_moe_gguf_bench")
    for m in models:
        if os.path.exists(probe):
            byte_lines.append(subprocess.run([probe, m, "2", "32"], capture_output=True, text=True,
                                             check=True).stdout.strip())
    load1 = os.getloadavg()
    print(f"CPU: {core_table.cpu_name()}; load average (1/5/15 min) before {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
          f"after {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}\n")
    print("| model | thr | prompt | rapid prefill | llama prefill (512) | ratio | rapid decode | llama decode | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, t, r, l in rows:
        name = os.path.relpath(m, core_table.CACHE) if m.startswith(core_table.CACHE) else m
        lp, ld = (l["prefill"], l["decode"]) if l else (None, None)
        pr = r["prefill"] / lp if lp else None
        dr = r["decode"] / ld if ld else None
        print(f"| {name} | {t} | {r['prompt']} | {core_table.fmt(r['prefill'])} | {core_table.fmt(lp)} | "
              f"{core_table.fmt(pr, '.2f')} | {core_table.fmt(r['decode'])} | {core_table.fmt(ld)} | "
              f"{core_table.fmt(dr, '.2f')} |")
    for line in byte_lines:
        print("\n" + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
