"""rapid-mlx vs its peers, through each server's OpenAI API with one client.

  python -m harness [--quick] [--engines rapid-mlx,llama.cpp,mlx-lm] [--models ...] [--out DIR]

(run from bench/, or via bench/run.sh which also installs the peers). Writes results.json,
report.md and chart.png into --out and prints the report.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import traceback

from . import machine, report, workloads
from .servers import Server

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
FIXTURES = os.environ.get("RAPID_FIXTURES_DIR", os.path.join(os.path.dirname(ROOT), "shared", "fixtures"))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
SMOL_GGUF = os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
ENGINES = ["rapid-mlx", "llama.cpp", "mlx-lm"]
MODELS = ["smollm2-135m", "qwen2.5-0.5b-shape"]


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def has_module(python, module):
    return python and subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


class Deriver:
    """Makes each model file on first use, with the interpreter that has the needed packages."""

    def __init__(self, peer_python):
        self.py = peer_python
        self.dir = os.path.join(CACHE, "bench")

    def step(self, *args):
        subprocess.run([self.py, "-m", "harness.derive", *args], cwd=BENCH, check=True)

    def path(self, model, fmt):
        d = os.path.join(self.dir, model)
        if model == "smollm2-135m":
            if fmt == "gguf-q4_1":
                return SMOL_GGUF
            hf = os.path.join(d, "hf")
            if fmt == "gguf-q8_0":
                out = os.path.join(d, "q8_0.gguf")
                if not os.path.exists(out):
                    self.step("gguf_quantize", SMOL_GGUF, out, "Q8_0")
                return out
            if not os.path.exists(os.path.join(hf, "model.safetensors")):
                self.step("gguf_to_hf", SMOL_GGUF, hf)
        else:
            hf, f16 = os.path.join(d, "hf"), os.path.join(d, "f16.gguf")
            if not (os.path.exists(os.path.join(hf, "model.safetensors")) and os.path.exists(f16)):
                self.step("random_qwen05b", hf, f16, os.path.join(FIXTURES, "tokenizers", "qwen2_5"),
                          os.path.join(FIXTURES, "vocab-gguf", "ggml-vocab-qwen2.gguf"))
            if fmt.startswith("gguf-"):
                q = fmt.split("-")[1]
                out = os.path.join(d, f"{q}.gguf")
                if not os.path.exists(out):
                    self.step("gguf_quantize", f16, out, q.upper())
                return out
        dtype = "float32" if fmt == "mlx-4bit-f32" else "float16"
        out = os.path.join(d, "mlx-4bit" + ("-f32" if dtype == "float32" else ""))
        if not os.path.exists(os.path.join(out, "config.json")):
            self.step("hf_to_mlx4", hf, out, dtype)
        return out


def plan(engines, models, quick):
    """(engine, model, format) in run order; each engine gets the formats it reads natively."""
    formats = {"rapid-mlx": ["gguf-q4_1", "gguf-q8_0", "mlx-4bit"],
               "llama.cpp": ["gguf-q4_1", "gguf-q8_0"],
               "mlx-lm": ["mlx-4bit-f32"]}
    if quick:
        formats = {"rapid-mlx": ["gguf-q4_1"], "llama.cpp": ["gguf-q4_1"], "mlx-lm": ["mlx-4bit-f32"]}
    return [(e, m, f) for m in models for e in engines for f in formats[e]]


def versions(rapid_bin, peer_python):
    v = {}
    try:
        v["rapid-mlx"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if peer_python:
        code = ("import importlib.metadata as m\nfor p in ('llama-cpp-python','mlx-lm','mlx'):\n"
                " try: print(p, m.version(p))\n except Exception: pass")
        out = subprocess.run([peer_python, "-c", code], capture_output=True, text=True).stdout
        v.update(dict(line.split(" ", 1) for line in out.splitlines() if " " in line))
    return v


class Progress:
    def __init__(self, total):
        self.total, self.done, self.what, self.t0 = total, 0, "", time.perf_counter()

    def set(self, what):
        self.what = what
        self.draw()

    def tick(self):
        self.done += 1
        self.draw()

    def draw(self):
        w = 30
        fill = int(w * self.done / max(1, self.total))
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} "
                         f"{time.perf_counter() - self.t0:5.0f}s {self.what[:60]:<60}")
        sys.stderr.flush()


def main():
    # A CI timeout's SIGTERM unwinds like Ctrl-C, so the servers' finally-blocks stop them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, SmolLM2 only, < 3 min (CI)")
    ap.add_argument("--preset", choices=sorted(workloads.PRESETS), default=None,
                    help="workload sizes (default full; --quick = --preset quick)")
    ap.add_argument("--budget-min", type=float, default=None,
                    help="per engine/format: skip its remaining workloads after this many minutes")
    ap.add_argument("--engines", default=None, help="comma list of " + ",".join(ENGINES) +
                    " (default: all whose software is present; --quick: rapid-mlx)")
    ap.add_argument("--models", default=None, help="comma list of " + ",".join(MODELS))
    ap.add_argument("--formats", default=None,
                    help="only these formats, each FORMAT or MODEL:FORMAT (e.g. gguf-q4_1,smollm2-135m:mlx-4bit)")
    ap.add_argument("--workloads", default=",".join(workloads.WORKLOADS))
    ap.add_argument("--rapid-bin", default=os.environ.get("RAPID_MLX_BIN", os.environ.get("RAPID_BIN", os.path.join(ROOT, "build", "rapid-mlx"))))
    ap.add_argument("--peer-python", default=os.path.join(ROOT, ".venv-bench", "bin", "python"),
                    help="interpreter with llama-cpp-python, mlx-lm, gguf (bench/run.sh makes it)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-probe", action="store_true", help="skip the DRAM bandwidth probe")
    ap.add_argument("--reuse", default=None, metavar="RESULTS_JSON",
                    help="also report the engine/format results of an earlier run (same preset) "
                         "that this run does not measure again, e.g. peers measured once")
    a = ap.parse_args()

    preset = a.preset or ("quick" if a.quick else "full")
    P = workloads.PRESETS[preset]
    peer_py = a.peer_python if os.path.exists(a.peer_python) else None
    if a.engines:
        engines = [e.strip() for e in a.engines.split(",") if e.strip()]
        engines = ENGINES if engines == ["all"] else engines
    else:
        engines = ["rapid-mlx"] if a.quick else ENGINES
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        ap.error(f"unknown engine(s) {bad}; choose from {ENGINES}")
    notes = []
    if "llama.cpp" in engines and not has_module(peer_py, "llama_cpp.server"):
        notes.append("llama.cpp skipped: llama-cpp-python[server] not installed (run bench/run.sh)")
        engines.remove("llama.cpp")
    if "mlx-lm" in engines and not has_module(peer_py, "mlx_lm"):
        notes.append("mlx-lm skipped: mlx-lm not installed (run bench/run.sh)")
        engines.remove("mlx-lm")
    if "rapid-mlx" in engines and not os.access(a.rapid_bin, os.X_OK):
        notes.append(f"rapid-mlx skipped: no binary at {a.rapid_bin}")
        engines.remove("rapid-mlx")
    models = [m.strip() for m in a.models.split(",")] if a.models else (MODELS[:1] if a.quick else MODELS)
    wls = [w.strip() for w in a.workloads.split(",") if w.strip()]
    for w in wls:
        if w not in workloads.WORKLOADS:
            ap.error(f"unknown workload {w}")
    if not os.path.exists(SMOL_GGUF):
        subprocess.run([os.path.join(ROOT, "scripts", "fetch_models.sh")], check=True)

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = a.out or os.path.join(BENCH, "results", datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    log("measuring the machine")
    mach = machine.describe(os.path.join(os.path.expanduser("~/.cache/rapid-mlx"), "bench"),
                            probe=not a.no_probe)
    results = {"preset": preset, "started": started, "machine": mach, "params": P,
               "models": models, "versions": versions(a.rapid_bin, peer_py), "configs": [],
               "notes": notes}
    if a.quick:
        notes.append("quick preset: tiny sizes, only to keep the harness alive; not a measurement")
    todo = plan(engines, models, a.quick)
    if a.formats:
        keep = set(a.formats.split(","))  # "FORMAT" or "MODEL:FORMAT"
        todo = [t for t in todo if t[2] in keep or f"{t[1]}:{t[2]}" in keep]
    if a.reuse:
        old = json.load(open(a.reuse))
        if old.get("params") != P:
            ap.error(f"--reuse: {a.reuse} was run with other workload sizes")
        planned = set(todo)
        for c in old["configs"]:
            if (c["engine"], c["model"], c["format"]) not in planned and c["model"] in models:
                results["configs"].append(dict(c, reused_from=c.get("reused_from", old["started"])))
        notes.append(f"rows marked * were measured by the earlier run of {old['started']} "
                     f"(load average then {old['machine'].get('loadavg_at_start')})")
    deriver = Deriver(peer_py)
    prog = Progress(len(todo) * workloads.steps(P, wls))

    def save():
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)

    for engine, model, fmt in todo:
        cfg = {"engine": engine, "model": model, "format": fmt, "workloads": {}}
        results["configs"].append(cfg)
        prog.set(f"{engine} {fmt} {model}: preparing")
        try:
            if fmt != "gguf-q4_1" or model != "smollm2-135m":
                if not peer_py:
                    raise RuntimeError("needs the bench venv to derive this format (run bench/run.sh)")
            cfg["path"] = deriver.path(model, fmt)
            srv = Server(engine, cfg["path"], rapid_bin=a.rapid_bin, peer_python=peer_py, log_dir=out)
        except Exception as e:
            cfg["error"] = f"model preparation failed: {e}"
            prog.done += workloads.steps(P, wls)
            save()
            continue
        try:
            prog.set(f"{engine} {fmt} {model}: starting")
            cfg["startup_s"] = srv.start()
            workloads.warmup(srv)
            t_cfg = time.perf_counter()
            for w in wls:
                if a.budget_min and time.perf_counter() - t_cfg > 60 * a.budget_min:
                    cfg["workloads"][w] = {"error": f"skipped: over the {a.budget_min:g} min budget"}
                    prog.done += workloads.steps(P, [w])
                    continue
                prog.set(f"{engine} {fmt} {model}: {w}")
                try:
                    cfg["workloads"][w] = workloads.WORKLOADS[w](srv, P, prog.tick)
                except Exception as e:
                    cfg["workloads"][w] = {"error": f"{type(e).__name__}: {e}"}
                    traceback.print_exc(file=open(os.path.join(out, "errors.log"), "a"))
                    if not srv.alive():
                        srv.stop()
                        srv.start()  # a crash must not sink the remaining workloads
        except Exception as e:
            cfg["error"] = f"{type(e).__name__}: {e}"
        finally:
            srv.stop()
            save()
    sys.stderr.write("\n")
    save()
    md = report.markdown(results)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    chart_py = sys.executable if has_module(sys.executable, "matplotlib") else (
        peer_py if has_module(peer_py, "matplotlib") else None)
    if chart_py:
        subprocess.run([chart_py, os.path.join(BENCH, "harness", "chart.py"),
                        os.path.join(out, "results.json"), os.path.join(out, "chart.png")], check=False)
    else:
        log("no matplotlib: chart.png skipped")
    print(md)
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
