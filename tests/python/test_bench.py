"""The benchmark harness (bench/harness, `--quick`) and `rapid-mlx bench` end to end against the
real `rapid-mlx serve` on SmolLM2-135M: the outputs must be well formed and hold real measurements
(no thresholds: speed is never asserted). Percentiles are checked against numpy.
Skips only when the binary has no `serve` command or the model file is absent."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(ROOT, "bench")
BIN = os.path.abspath(os.environ.get("RAPID_MLX_BIN", os.path.join(ROOT, "build", "rapid-mlx")))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
MODEL = os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")

sys.path.insert(0, BENCH)
from harness import workloads  # noqa: E402


def _has_serve():
    if not os.path.exists(BIN):
        return False
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    return "serve" in (out.stdout + out.stderr).split()


needs_server = pytest.mark.skipif(not (_has_serve() and os.path.exists(MODEL)),
                                  reason=f"{BIN} has no 'serve' command or {MODEL} is missing")


def test_percentiles_match_numpy():
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 100):
        xs = list(rng.exponential(size=n))
        for p in (50, 90, 99):
            assert workloads.pct(xs, p) == pytest.approx(np.percentile(xs, p, method="linear"))
    assert workloads.pct([], 50) is None


def test_stream_probe_reports_bandwidth(tmp_path):
    exe = tmp_path / "stream_probe"
    subprocess.run(["g++", "-O2", "-pthread", os.path.join(BENCH, "stream_probe.cpp"), "-o", str(exe)],
                   check=True)
    out = json.loads(subprocess.run([str(exe), "32", "2"], capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    assert set(out["read_gbps"]) == {"1", "2"}
    assert all(v > 0 for v in out["read_gbps"].values())
    bad = subprocess.run([str(exe), "1", "2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    env = dict(os.environ, RAPID_MLX_BIN=BIN)
    proc = subprocess.run([sys.executable, "-m", "harness", "--quick", "--engines", "rapid-mlx",
                           "--no-probe", "--out", str(out)], cwd=BENCH, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


@needs_server
def test_quick_results_json_well_formed(quick_run):
    out, _ = quick_run
    res = json.load(open(out / "results.json"))
    assert res["preset"] == "quick"
    assert res["machine"]["cores"] == os.cpu_count()
    [cfg] = res["configs"]
    assert (cfg["engine"], cfg["format"], cfg.get("error")) == ("rapid-mlx", "gguf-q4_1", None)
    wl = cfg["workloads"]
    assert set(wl) == set(workloads.WORKLOADS)
    for name, v in wl.items():
        assert "error" not in v, (name, v)
    P = workloads.PRESETS["quick"]
    single = wl["single"]
    assert single["prompt_tokens"] > P["prompt_words"]  # every word is at least one token
    assert single["prefill_tok_s"] > 0 and single["decode_tok_s"] > 0 and single["ttft_s"] > 0
    for run in single["runs"]:
        assert 2 <= run["completion_tokens"] <= P["gen_tokens"]
        assert run["ttft_s"] <= run["total_s"]
    for n in P["levels"]:
        lv = wl["concurrency"][str(n)]
        assert lv["errors"] == []
        assert 0 < lv["completion_tokens"] <= n * P["conc_gen_tokens"]
        assert lv["ttft_p50_s"] <= lv["ttft_p99_s"] <= lv["wall_s"]
    turns = wl["agent"]["turns"]
    assert [t["turn"] for t in turns] == list(range(1, P["agent_turns"] + 1))
    assert wl["agent"]["total_s"] >= sum(t["total_s"] for t in turns) * 0.999
    assert wl["restart"]["startup_s"] > 0 and wl["restart"]["ttft_after_restart_s"] > 0


@needs_server
def test_quick_report_markdown_well_formed(quick_run):
    out, stdout = quick_run
    md = open(out / "report.md").read()
    assert md.strip() == stdout.strip()
    assert "**Machine:**" in md
    rows = [l for l in md.splitlines() if l.startswith("|")]
    header = rows[0].strip("|").split("|")
    assert [h.strip() for h in header] == ["figure", "rapid-mlx gguf-q4_1", "best peer", "ratio"]
    assert re.fullmatch(r"(\|---)+\|", rows[1])
    for r in rows[2:]:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert len(cells) == len(header)
        float(cells[1])  # rapid-mlx's own figure is a number on every row it prints
    names = {r.split("|")[1].strip() for r in rows[2:]}
    assert {"single: decode tok/s", "conc 4: aggregate tok/s", "agent: total s",
            "restart: TTFT after restart ms"} <= names


@needs_server
def test_cli_bench_json(tmp_path):
    js = tmp_path / "b.json"
    proc = subprocess.run([BIN, "bench", "--model", MODEL, "--prompt-words", "64", "--gen-tokens", "16",
                           "--repeats", "1", "--concurrency", "1,2", "--conc-gen-tokens", "8",
                           "--json", str(js)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.load(open(js))
    assert res["single"]["decode_tok_s"] > 0 and res["single"]["ttft_s"] > 0
    assert set(res["concurrency"]) == {"1", "2"}
    for n, lv in res["concurrency"].items():
        assert 0 < lv["completion_tokens"] <= int(n) * 8
        assert lv["ttft_p50_s"] <= lv["ttft_p99_s"]
    assert "| concurrency |" in proc.stdout and "#" in proc.stderr  # table + progress bar


def test_cli_bench_rejects_bad_arguments():
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    if "bench" not in (out.stdout + out.stderr).split():
        pytest.skip("binary has no bench command")
    for args in (["--repeats", "x"], ["--concurrency", "1,,2"], ["--model"], ["--bogus"], []):
        p = subprocess.run([BIN, "bench", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "error" in p.stderr, args


@needs_server
def test_engine_ratios_quick_run_is_well_formed(tmp_path):
    """bench/harness/engine_ratios.py (issues 6 and 7) end to end at tiny sizes: every ratio is
    measured (positive, finite) and the report names each target; no speed is asserted."""
    out = tmp_path / "er"
    proc = subprocess.run([sys.executable, "-m", "harness.engine_ratios", "--quick", "--bin", BIN,
                           "--model", MODEL, "--out", str(out)],
                          cwd=BENCH, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((out / "engine_ratios.json").read_text())
    for v in (res["batching_spec_off"]["ratio"], res["batching_spec_off"]["itl_p99_ratio"],
              res["agent"]["mean_ratio"], res["restart"]["ratio"],
              res["speculative"]["code_edit_ratio"], res["speculative"]["chat_ratio"]):
        assert 0 < v < 1000
    assert len(res["agent"]["turns"]) == 2  # turns 2..3 of the quick loop
    for t in res["agent"]["turns"]:  # a warm turn reuses the earlier turns' prompt: only its tail is new
        assert 0 < t["new_tokens"] < t["prompt_tokens"] / 2 and t["new_share"] == t["new_tokens"] / t["prompt_tokens"]
    assert res["restart"]["cached_tokens"] > 0  # the prefix came back from disk after the restart
    assert res["speculative"]["off"]["speculative"]["drafted_tokens"] == 0
    # The code edit after a restart (issue 22): its prompt came back from the disk snapshot.
    assert 0 < res["speculative"]["after_restart_min_ratio"] < 1000
    for mode in ("off", "auto"):
        for run in res["speculative"][mode]["after_restart"]:
            assert run["cached_tokens"] > 0 and run["cached_tokens"] >= run["prompt_tokens"] - 16
    assert "after restart" in (out / "engine_ratios.md").read_text()
    md = (out / "engine_ratios.md").read_text()
    for target in (">= 4", "<= 2 |", "<= 0.10", "<= 0.15", ">= 2", ">= 0.97"):
        assert target in md


@needs_server
def test_long_context_quick_run_is_well_formed():
    """bench/long_context.py --quick: one row, its prompt as long as asked (about 256 tokens), the
    KV per token SmolLM2's (30 layers x 3 kv heads x 64 x K and V x f16), and real rates."""
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "long_context.py"), "--quick", "--bin", BIN, MODEL],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"KV {30 * 3 * 64 * 2 * 2 / 1024:.1f} KiB a token" in proc.stdout
    rows = [l for l in proc.stdout.splitlines() if re.match(r"\| \d+ \|", l)]
    assert len(rows) == 1, proc.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert 128 <= int(cells[0]) <= 512
    assert float(cells[1]) > 0 and float(cells[4]) > 0 and 0 < float(cells[8]) < 10
    assert cells[2] == "–"  # --quick runs no llama.cpp
