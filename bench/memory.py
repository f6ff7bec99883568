#!/usr/bin/env python3
"""Peak resident memory of `rapid-mlx run` against issue #3's bar: RSS <= (weights + KV) x 1.1.

For each model (a GGUF file, or a directory of *.safetensors + config.json):
  weights = the GGUF file's size, or the sum of the directory's *.safetensors sizes;
  KV      = tokens x layers x (key_length + value_length) x kv_heads x 2 bytes (f16, the default
            --kv-dtype), tokens = prompt + generated, from the run's last stderr line;
  peak    = the VmHWM `rapid-mlx run` reports on its last line (the whole process from its exec,
            shared libraries included; bench/run_stats.py);
  idle    = the peak RSS of `rapid-mlx --help` (the executable and its shared libraries mapped,
            no model), by GNU time; 0 when /usr/bin/time is missing (then the bar is the whole
            process's).
The bar applies to peak - idle, the memory running the model costs; the table also gives the whole
process's ratio. The idle part is a constant of the binary and the kernel (3.5 MB here), a third of
the 10 % of SmolLM2-135M's 98 MB on its own.
Prints a Markdown table; exits 1 if a model misses the bar. Standard library only.
MB = 10^6 bytes throughout.

usage: bench/memory.py [--bin build/rapid-mlx] [--max-tokens 64] [--margin 0.10] [--json OUT] [MODEL...]
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys

import run_stats

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
SMOL = os.path.join(CACHE, "smollm2-135m-instruct")
DEFAULT_MODELS = [
    os.path.join(SMOL, "SmolLM2-135M-Instruct.Q4_1.gguf"),
    os.path.join(SMOL, "SmolLM2-135M-Instruct.Q8_0.gguf"),
    os.path.join(SMOL, "mlx-q4"),
    os.path.join(SMOL, "mlx-q8"),
    os.path.join(CACHE, "gemma-3-270m", "gemma-3-270m-q4_k_m.gguf"),
    # Written by mlx-lm itself (scripts/make_bench_qwen35.py --vocab 248320): its safetensors leave
    # the data misaligned, which the loader copies (SmolLM2's mlx-q4 / q8 come from our convert).
    os.path.join(CACHE, "bench", "qwen3.5-0.8b-shape", "mlx-q4"),
]
PROMPT = "What is the capital of France?"


# ---- GGUF metadata (header only; arrays skipped without keeping them) ----
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path):
    """{key: value} of a GGUF file's metadata; arrays of numbers kept, arrays of strings skipped."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, = struct.unpack("<I", f.read(4))
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version}")
        _, n_kv = struct.unpack("<QQ", f.read(16))

        def rd(fmt):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string():
            return f.read(rd("<Q")).decode("utf-8", "replace")

        def value(t):
            if t in _SCALAR:
                return rd(_SCALAR[t])
            if t == 8:
                return string()
            if t == 9:
                et, n = rd("<I"), rd("<Q")
                if et == 8:  # strings (the tokenizer's): skip
                    for _ in range(n):
                        f.seek(rd("<Q"), 1)
                    return None
                if et in _SCALAR:
                    fmt = _SCALAR[et]
                    data = f.read(struct.calcsize(fmt) * n)
                    return list(struct.unpack("<%d%s" % (n, fmt[1]), data)) if n <= 4096 else None
                return [value(et) for _ in range(n)]
            raise ValueError(f"{path}: unknown GGUF value type {t}")

        md = {}
        for _ in range(n_kv):
            key = string()
            md[key] = value(rd("<I"))
        return md


def _deltanet_state_bytes(k_heads, k_dim, v_heads, v_dim, conv_kernel):
    """One sequence's f32 Gated DeltaNet state of one layer: the recurrent state (a k_dim x v_dim
    matrix per value head) and the causal conv's last conv_kernel - 1 inputs of q, k and v."""
    return 4 * (v_heads * k_dim * v_dim + (conv_kernel - 1) * (2 * k_heads * k_dim + v_heads * v_dim))


def cache_geometry(model):
    """(bytes of f16 K and V per token over the attention layers, bytes of one sequence's recurrent
    state over the linear-attention layers: 0 for a plain transformer)."""
    if os.path.isdir(model) and os.path.exists(os.path.join(model, "config.json")):
        with open(os.path.join(model, "config.json")) as f:
            c = json.load(f)
        c = c.get("text_config", c)
        heads = c["num_attention_heads"]
        kv = c.get("num_key_value_heads") or heads
        hd = c.get("head_dim") or c["hidden_size"] // heads
        layers, linear = c["num_hidden_layers"], 0
        if c.get("linear_num_value_heads"):
            types = c.get("layer_types") or ["full_attention" if (i + 1) % c.get("full_attention_interval", 4) == 0
                                             else "linear_attention" for i in range(layers)]
            linear = sum(t == "linear_attention" for t in types)
        state = linear * _deltanet_state_bytes(c.get("linear_num_key_heads", 0), c.get("linear_key_head_dim", 0),
                                               c.get("linear_num_value_heads", 0), c.get("linear_value_head_dim", 0),
                                               c.get("linear_conv_kernel_dim", 0)) if linear else 0
        return (layers - linear) * 2 * kv * hd * 2, state
    path = model if os.path.isfile(model) else gguf_in_dir(model)
    md = gguf_metadata(path)
    arch = md["general.architecture"]
    layers = md[f"{arch}.block_count"] - md.get(f"{arch}.nextn_predict_layers", 0)
    heads = md[f"{arch}.attention.head_count"]
    kv = md.get(f"{arch}.attention.head_count_kv", heads)
    if isinstance(heads, list):
        heads = max(heads)
    kv_per_layer = kv if isinstance(kv, list) else [kv] * layers
    k_len = md.get(f"{arch}.attention.key_length") or md[f"{arch}.embedding_length"] // heads
    v_len = md.get(f"{arch}.attention.value_length") or k_len
    recurrent = [False] * layers
    if f"{arch}.ssm.conv_kernel" in md:  # qwen35 / qwen3next: Gated DeltaNet layers
        rl = md.get(f"{arch}.attention.recurrent_layers")
        every = md.get(f"{arch}.full_attention_interval", 4)
        recurrent = [bool(x) for x in rl[:layers]] if rl else [(i + 1) % every != 0 for i in range(layers)]
    kv_bytes = sum(n for n, r in zip(kv_per_layer, recurrent) if not r) * (k_len + v_len) * 2
    state = 0
    if any(recurrent):
        v_heads = md[f"{arch}.ssm.time_step_rank"]
        state = sum(recurrent) * _deltanet_state_bytes(md[f"{arch}.ssm.group_count"], md[f"{arch}.ssm.state_size"], v_heads,
                                                       md[f"{arch}.ssm.inner_size"] // v_heads, md[f"{arch}.ssm.conv_kernel"])
    return kv_bytes, state


def gguf_in_dir(d):
    ggufs = [p for p in glob.glob(os.path.join(d, "*.gguf")) if os.path.basename(p) != "tokenizer.gguf"]
    if len(ggufs) != 1:
        raise ValueError(f"{d}: no config.json and not exactly one .gguf")
    return ggufs[0]


def idle_rss_bytes(binary):
    """Peak RSS of `binary --help` by GNU time (its own fork: a child of this Python would be
    charged the interpreter's resident set, see run_stats.py), or 0 without /usr/bin/time."""
    if not os.path.exists("/usr/bin/time"):
        return 0
    r = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--help"], capture_output=True, text=True, check=True)
    return int(r.stderr.strip().splitlines()[-1]) * 1024


def weights_bytes(model):
    if os.path.isfile(model):
        return os.path.getsize(model)
    st = glob.glob(os.path.join(model, "*.safetensors"))
    if st:
        return sum(os.path.getsize(p) for p in st)
    return os.path.getsize(gguf_in_dir(model))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="GGUF files or model directories (default: SmolLM2 Q4_1/Q8_0/MLX q4/q8, Gemma-3-270m)")
    ap.add_argument("--bin", default=os.environ.get("RAPID_MLX_BIN", os.path.join(ROOT, "build", "rapid-mlx")))
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--threads", type=int, default=0, help="--threads of rapid-mlx run (default: its own)")
    ap.add_argument("--margin", type=float, default=0.10, help="allowed excess over weights + KV (0.10 = 10%%)")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    a = ap.parse_args(argv)
    models = a.models or [m for m in DEFAULT_MODELS if os.path.exists(m)]
    if not models:
        print("no models found (give paths, or fetch them: scripts/fetch_models.sh)", file=sys.stderr)
        return 2
    rows, ok = [], True
    idle = idle_rss_bytes(a.bin)
    for model in models:
        r = run_stats.run(a.bin, model, "--max-tokens", a.max_tokens,
                          *(["--threads", a.threads] if a.threads else []), a.prompt)
        rss, n_prompt, n_gen, pf, dc = r["peak_rss_bytes"], r["prompt"], r["generated"], r["prefill"], r["decode"]
        w = weights_bytes(model)
        kv_per_token, state = cache_geometry(model)
        kv = kv_per_token * (n_prompt + n_gen)
        bar = (w + kv + state) * (1 + a.margin)
        row = {"model": model, "weights_bytes": w, "kv_bytes": kv, "state_bytes": state, "tokens": n_prompt + n_gen,
               "bar_bytes": int(bar), "peak_rss_bytes": rss, "idle_rss_bytes": idle,
               "ratio": (rss - idle) / (w + kv + state), "process_ratio": rss / (w + kv + state),
               "pass": rss - idle <= bar, "prefill_tok_s": pf, "decode_tok_s": dc}
        ok &= row["pass"]
        rows.append(row)
    home = os.path.expanduser("~")
    print(f"Peak RSS of `{os.path.relpath(a.bin, ROOT) if a.bin.startswith(ROOT) else a.bin} run --max-tokens {a.max_tokens}`"
          f" less the idle binary's ({idle / 1e6:.1f} MB, `--help`) vs (weights + KV + recurrent state) x {1 + a.margin:.2f};"
          " MB = 10^6 bytes\n")
    print("| model | weights MB | KV MB (tokens) | state MB | bar MB | peak RSS MB | (RSS - idle) / (weights+KV+state) "
          "| whole process | |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        name = r["model"].replace(CACHE + "/", "").replace(home, "~")
        print(f"| {name} | {r['weights_bytes'] / 1e6:.1f} | {r['kv_bytes'] / 1e6:.2f} ({r['tokens']}) | {r['state_bytes'] / 1e6:.1f} | "
              f"{r['bar_bytes'] / 1e6:.1f} | {r['peak_rss_bytes'] / 1e6:.1f} | {r['ratio']:.3f} | {r['process_ratio']:.3f} | "
              f"{'pass' if r['pass'] else '**FAIL**'} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
