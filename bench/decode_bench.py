#!/usr/bin/env python3
"""Decode / prefill tok/s of llama.cpp (llama-cpp-python) on a GGUF, for comparison with
`rapid-mlx run` / bench/decode.sh. Same shape as bench/decode.sh: 128-token prompt, 64 decode steps.

usage: .venv-oracle/bin/python bench/decode_bench.py GGUF THREADS [--json] [--repack] [--prompt N]
  --prompt N: an N-token prompt instead of 128 (the MoE table's 512-token prefill).
  --json: one JSON object {"threads", "prefill", "decode", "prefill_cpu", "decode_cpu"} instead
          of the text line (bench/core_table.sh reads it).
"""
import json, sys, time
import numpy as np
from llama_cpp import Llama

path, threads = sys.argv[1], int(sys.argv[2])
as_json = "--json" in sys.argv[3:]
n_prompt = int(sys.argv[sys.argv.index("--prompt") + 1]) if "--prompt" in sys.argv[3:] else 128
# llama-cpp-python 0.3.36 crashes on Intel AMX CPUs with the extra (repacked-weight) buffer types:
# off unless --repack (llama.cpp's faster repacked Q4_0/Q8_0 layouts, where the CPU allows them).
if "--repack" not in sys.argv[3:]:
    import llama_cpp.llama_cpp as lcpp
    _defaults = lcpp.llama_model_default_params

    def _no_extra_bufts():
        p = _defaults()
        p.use_extra_bufts = False
        return p
    lcpp.llama_model_default_params = _no_extra_bufts
llm = Llama(model_path=path, n_ctx=max(1024, n_prompt + 128), n_batch=512, n_threads=threads, n_threads_batch=threads,
            verbose=False)
prompt = [100 + i for i in range(n_prompt)]
# Wall-clock rates, and rates per CPU-second (process CPU time): on a shared, overloaded machine
# the latter still compares kernels fairly.
best = {"p": 0.0, "d": 0.0, "pc": 0.0, "dc": 0.0}
for rep in range(3):
    llm.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    llm.eval(prompt)
    t1, c1 = time.perf_counter(), time.process_time()
    tok = 5
    for _ in range(64):
        llm.eval([tok])
    t2, c2 = time.perf_counter(), time.process_time()
    best["p"] = max(best["p"], n_prompt / (t1 - t0))
    best["d"] = max(best["d"], 64 / (t2 - t1))
    best["pc"] = max(best["pc"], n_prompt / max(c1 - c0, 1e-9))
    best["dc"] = max(best["dc"], 64 / max(c2 - c1, 1e-9))
if as_json:
    print(json.dumps({"threads": threads, "prefill": best["p"], "decode": best["d"],
                      "prefill_cpu": best["pc"], "decode_cpu": best["dc"]}))
    sys.exit(0)
print(f"llama.cpp threads={threads}: prefill {best['p']:.1f} tok/s  decode {best['d']:.1f} tok/s  "
      f"(per CPU-second: prefill {best['pc']:.1f}  decode {best['dc']:.1f})")
