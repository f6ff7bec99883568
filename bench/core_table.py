#!/usr/bin/env python3
"""Issue #3's speed table: rapid-mlx vs llama.cpp, 1 and 2 threads, prefill and decode tok/s,
their ratios (targets: decode >= 0.8, prefill >= 0.5) and the fraction of the DRAM read-bandwidth
bound that rapid-mlx's decode reaches (decode tok/s x model bytes streamed per token / read
bandwidth at the same thread count, from bench/stream_probe.cpp). Run it on a quiet machine.
MLX rows (a model directory: the same SmolLM2 weights as MLX affine 4-bit / 8-bit, from
scripts/derive_models.sh) have no llama.cpp column; their bytes are the safetensors files'.

Shape of both runs: a ~128-token prompt, 64 decode steps, best of --reps.
  rapid-mlx: `rapid-mlx run --raw --threads N --max-tokens 64 PROMPT` (its last stderr line);
  llama.cpp: bench/decode_bench.py --json under .venv-oracle (llama-cpp-python), same shape.
Standard library only (llama.cpp's column is left empty when .venv-oracle has no llama_cpp).

usage: bench/core_table.sh [--bin build/rapid-mlx] [--threads 1,2] [--reps 3] [--quick] [--json OUT] [GGUF|MLX dir...]
"""
import argparse
import json
import os
import subprocess
import sys

import run_stats

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
DEFAULT_MODELS = [
    os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q8_0.gguf"),
    os.path.join(CACHE, "smollm2-135m-instruct", "mlx-q4"),
    os.path.join(CACHE, "smollm2-135m-instruct", "mlx-q8"),
    os.path.join(CACHE, "bench", "qwen2.5-0.5b-shape", "q4_1.gguf"),
    os.path.join(CACHE, "bench", "qwen2.5-0.5b-shape", "q8_0.gguf"),
    # Issue #17: the Qwen3.5-0.8B shape (Gated DeltaNet hybrid), `scripts/qwen35_gguf.py --bench`.
    os.path.join(CACHE, "bench", "qwen3.5-0.8b-shape", "q4_0.gguf"),
    os.path.join(CACHE, "bench", "qwen3.5-0.8b-shape", "q8_0.gguf"),
    os.path.join(CACHE, "bench", "qwen3.5-0.8b-shape", "q5_k_m.gguf"),
]
# ~128 tokens with the SmolLM2 and Qwen2.5 tokenizers (the exact count is reported).
PROMPT = ("The old lighthouse keeper climbed the spiral stairs every evening, counting each of the one hundred "
          "and twelve steps as his father had taught him. At the top, he wiped the salt from the great lens, "
          "trimmed the wick, and watched the ships slide past the rocks in the fading light. Tonight the sea was "
          "restless, and a storm gathered in the west, its clouds heavy and dark. He thought of the letter that "
          "had arrived that morning, sealed with red wax, and of the stranger who had delivered it without a "
          "word before walking back toward the village under the pale light of a rising moon, while gulls "
          "cried over the harbour.")


def build_probe(out_dir):
    exe = os.path.join(out_dir, "stream_probe")
    src = os.path.join(ROOT, "bench", "stream_probe.cpp")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["g++", "-O3", "-march=native", "-pthread", src, "-o", exe], check=True)
    return exe


def bandwidth(probe, mib, max_threads):
    out = subprocess.run([probe, str(mib), str(max_threads)], capture_output=True, text=True, check=True).stdout
    return {int(k): v for k, v in json.loads(out)["read_gbps"].items()}


def rapid(binary, model, threads, max_tokens, reps):
    best = {"prefill": 0.0, "decode": 0.0, "prompt": 0, "generated": 0}
    for _ in range(reps):
        r = run_stats.run(binary, model, "--raw", "--threads", threads, "--max-tokens", max_tokens, PROMPT)
        best["prompt"], best["generated"] = r["prompt"], r["generated"]
        best["prefill"] = max(best["prefill"], r["prefill"])
        best["decode"] = max(best["decode"], r["decode"])
    return best


def model_bytes(model):
    """Bytes a decode step streams at most: the GGUF file, or an MLX directory's safetensors."""
    if os.path.isdir(model):
        return sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
    return os.path.getsize(model)


def llama(oracle, model, threads, repack=False):
    if not oracle or not model.endswith(".gguf"):
        return None
    r = subprocess.run([oracle, os.path.join(ROOT, "bench", "decode_bench.py"), model, str(threads), "--json"]
                       + (["--repack"] if repack else []), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"decode_bench.py failed on {model}:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def has_llama_cpp(python):
    return bool(python) and os.path.exists(python) and subprocess.run(
        [python, "-c", "import llama_cpp"], capture_output=True).returncode == 0


def fmt(x, spec=".1f"):
    return "–" if x is None else format(x, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="GGUF files or MLX model directories (default: SmolLM2 Q4_1/Q8_0 "
                    "and its MLX 4-bit/8-bit copies, Qwen2.5-0.5B-shape Q4_1/Q8_0)")
    ap.add_argument("--bin", default=os.environ.get("RAPID_MLX_BIN", os.path.join(ROOT, "build", "rapid-mlx")))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--reps", type=int, default=3, help="rapid-mlx runs per cell, best kept (llama.cpp: 3 inside)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--probe-mib", type=int, default=256, help="stream_probe buffer per thread")
    ap.add_argument("--oracle", default=os.path.join(ROOT, ".venv-oracle", "bin", "python"),
                    help="python with llama_cpp (llama-cpp-python); '' to skip llama.cpp")
    ap.add_argument("--llama-repack", action="store_true",
                    help="let llama.cpp repack weights (extra buffer types; crashes on Intel AMX)")
    ap.add_argument("--quick", action="store_true", help="smoke run: first model, 1 thread, 1 rep, 8 tokens, no llama.cpp")
    ap.add_argument("--json", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",") if t]
    models = a.models or [m for m in DEFAULT_MODELS if os.path.exists(m)]
    if a.quick:
        models, threads, a.reps, a.max_tokens, a.probe_mib, a.oracle = models[:1], threads[:1], 1, 8, 64, ""
    if not models:
        print("no models found (scripts/fetch_models.sh; bench/run.sh derives the Qwen2.5-0.5B-shape files)",
              file=sys.stderr)
        return 2
    oracle = a.oracle if has_llama_cpp(a.oracle) else ""
    if a.oracle and not oracle:
        print(f"note: {a.oracle} has no llama_cpp: llama.cpp columns left empty", file=sys.stderr)
    probe = build_probe(os.path.dirname(os.path.abspath(a.bin)) if os.access(os.path.dirname(os.path.abspath(a.bin)), os.W_OK)
                        else "/tmp")
    bw = bandwidth(probe, a.probe_mib, max(threads))
    load = os.getloadavg()[0]
    rows = []
    for model in models:
        size = model_bytes(model)
        for t in threads:
            r = rapid(a.bin, model, t, a.max_tokens, a.reps)
            l = llama(oracle, model, t, a.llama_repack)
            gbps = bw.get(t)
            bound = gbps * 1e9 / size if gbps else None  # tok/s if each token streamed the whole file
            rows.append({"model": model, "threads": t, "bytes_per_token": size, "prompt_tokens": r["prompt"],
                         "generated": r["generated"], "rapid_prefill": r["prefill"], "rapid_decode": r["decode"],
                         "llama_prefill": l["prefill"] if l else None, "llama_decode": l["decode"] if l else None,
                         "read_gbps": gbps, "decode_bound": bound,
                         "bound_fraction": r["decode"] / bound if bound else None})
            print(f"  {os.path.basename(model)} threads={t}: done", file=sys.stderr)
    print(f"CPU: {cpu_name()}; load average at start {load:.2f}; DRAM read GB/s: "
          + ", ".join(f"{k} thr {v:.1f}" for k, v in sorted(bw.items())) + "\n")
    print(f"Prefill: rapid-mlx `run --raw` on a fixed text (its token count in the `prompt` column), llama.cpp "
          f"128 token ids; decode: rapid-mlx {a.max_tokens} steps, llama.cpp 64; best of {a.reps} (llama.cpp: 3). "
          f"Targets: decode ratio >= 0.8, prefill ratio >= 0.5. DRAM bound = read GB/s / model bytes "
          f"(GGUF file, or an MLX directory's safetensors).\n")
    print("| model | thr | prompt | rapid prefill | llama prefill | ratio | rapid decode | llama decode | ratio "
          "| DRAM bound tok/s | decode / bound |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        pr = r["rapid_prefill"] / r["llama_prefill"] if r["llama_prefill"] else None
        dr = r["rapid_decode"] / r["llama_decode"] if r["llama_decode"] else None
        name = os.path.relpath(r["model"], CACHE) if r["model"].startswith(CACHE) else r["model"]
        short = "" if r["generated"] >= a.max_tokens else f" ({r['generated']} gen)"
        print(f"| {name} | {r['threads']} | {r['prompt_tokens']} | {fmt(r['rapid_prefill'])} | {fmt(r['llama_prefill'])} | {fmt(pr, '.2f')} "
              f"| {fmt(r['rapid_decode'])}{short} | {fmt(r['llama_decode'])} | {fmt(dr, '.2f')} "
              f"| {fmt(r['decode_bound'])} | {fmt(r['bound_fraction'], '.2f')} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"read_gbps": bw, "rows": rows}, f, indent=1)
    return 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
