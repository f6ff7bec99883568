"""Qwen3-Next and gpt-oss as llama.cpp's `qwen3next` / `gpt-oss` GGUFs (scripts/qwen3next_gguf.py
and scripts/gpt_oss_gguf.py write tiny random-weight models with llama.cpp's gguf-py and the
converter's transforms):
- the GGUF is right: llama-cpp-python running the f32 file gives mlx-lm's greedy tokens and logits
  on the same weights (a wrong qkvz split, ba order, norm offset, A sign, expert de-interleave or
  sink name would not);
- `rapid-mlx run --raw` on the f32 file prints llama-cpp-python's greedy text of the same prompt
  (both tokenize with the file's own vocabulary), and on the Q8_0 / MXFP4 files runs to the end;
- Qwen3-Next with an MTP head (a random one: a gated full-attention layer with routed experts and
  a gated shared expert, as the released head), from HF safetensors and from the converter's GGUF
  (its nextn block after the trunk): `--speculative mtp` drafts with it and every client still gets
  mlx-lm's greedy text of the trunk.
- on gpt-oss's MXFP4 file (experts read in place from the mapping), `run --raw --exact` prints
  mlx-lm's greedy text on gguf-py's dequantization of the same weights.

Skips when the binary is not built or mlx-lm is not installed; the llama.cpp comparisons skip
without llama-cpp-python."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import conftest
from test_qwen35 import BIN, CACHE, PROMPT, ROOT, STEPS, complete, mlx_greedy_text  # (skips without mlx-lm)
from test_qwen35_gguf import llama_greedy_text

# model -> (its set in the cache, the script that writes it, the last file that script writes)
SETS = {"qwen3-next": ("qwen3next-gguf-tiny", "qwen3next_gguf.py", "hf-deq-q8_0/greedy.json"),
        "gpt-oss": ("gpt-oss-gguf-tiny", "gpt_oss_gguf.py", "mlx-deq-mxfp4/greedy.json")}


@pytest.fixture(scope="module", params=sorted(SETS))
def next_dir(request):
    name, script, last = SETS[request.param]
    root = Path(CACHE) / name
    d = root / request.param
    if not (d / last).exists() or not (d / "gguf-f32" / "greedy.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / script), str(root)], check=True,
                       stdout=subprocess.DEVNULL)
    return d


def test_llamacpp_on_the_gguf_gives_mlx_lm_greedy_output(next_dir):
    pytest.importorskip("llama_cpp")
    mlx = json.load(open(next_dir / "hf-f32" / "greedy.json"))
    lc = json.load(open(next_dir / "gguf-f32" / "greedy.json"))
    assert lc["probe_ids"] == mlx["probe_ids"]
    worst = 0.0
    for a, b in zip(mlx["cases"], lc["cases"], strict=True):
        assert a["prompt_ids"] == b["prompt_ids"]
        assert [s["token"] for s in b["steps"]] == [s["token"] for s in a["steps"]], a["prompt"]
        for sa, sb in zip(a["steps"], b["steps"]):
            d = np.abs(np.array(sa["top_logits"] + sa["probe_logits"]) - np.array(sb["top_logits"] + sb["probe_logits"]))
            worst = max(worst, float(d.max()) / sa["max_abs_logit"])
    assert worst < 1e-3, worst  # measured 1.1e-4 (qwen3-next), 2.9e-5 (gpt-oss) on 2026-12-03


def run_raw(gguf, *flags):
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    return subprocess.run([BIN, "run", "--model", str(gguf), "--raw", *flags, "--temperature", "0",
                           "--max-tokens", str(STEPS), "--threads", "2", PROMPT],
                          capture_output=True, text=True, timeout=120)


def test_run_raw_prints_llamacpp_greedy_text(next_dir):
    pytest.importorskip("llama_cpp")
    gguf = next_dir / "gguf-f32" / "model.gguf"
    want = llama_greedy_text(gguf)
    r = run_raw(gguf, "--exact", "--kv-dtype", "f32")
    assert r.returncode == 0, r.stderr
    assert r.stdout.removesuffix("\n") == want, r.stderr


# Q8_0 (and gpt-oss's MXFP4 experts) on the shipping path: no token criterion (int8 activations
# leave the f32 tokens on this random model, as for qwen35's Q8_0 files), only that the file loads
# and generates.
def test_run_raw_on_the_quantized_files_generates(next_dir):
    for copy in ("gguf-q8_0", "gguf-mxfp4"):
        gguf = next_dir / copy / "model.gguf"
        if not gguf.exists():
            continue
        r = run_raw(gguf)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip(), r.stderr


def test_serve_mtp_speculation_on_qwen3_next_keeps_mlx_lm_text(next_dir, tmp_path):
    """Both copies of the head drafting, one request at a time and four clients at once: the text
    is the trunk's (verification keeps it exact whatever the head guesses; that the GGUF head is the
    HF one is model_moe_gguf_test's Qwen3NextGguf.MtpHeadLoadsTheHfTensors)."""
    if next_dir.name != "qwen3-next":
        pytest.skip("the MTP head is Qwen3-Next's")
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    root = next_dir.parent / "qwen3-next-mtp"
    if not (root / "gguf-f32" / "model.gguf").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "qwen3next_gguf.py"), str(next_dir.parent)], check=True,
                       stdout=subprocess.DEVNULL)
    prompts = [PROMPT, "class Tiny:\n", "import json\nimport os\n" * 3, "    return model"]
    want = [mlx_greedy_text(next_dir / "hf-f32", p) for p in prompts]
    for copy, served in (("hf", root / "hf-f32"), ("gguf", root / "gguf-f32" / "model.gguf")):
        srv = conftest.launch(["--kv-dtype", "f32", "--speculative", "mtp", "--num-speculative-tokens", "3"],
                              str(tmp_path / f"serve-{copy}.log"), model=str(served))
        try:
            assert [complete(srv, p)[0] for p in prompts] == want, copy
            status, body = srv.get("/v1/cache", headers={"Authorization": f"Bearer {conftest.API_KEY}"})
            assert status == 200
            spec = json.loads(body)["speculative"]
            assert spec["mode"] == "mtp" and spec["drafted_tokens"] > 0, spec
            with ThreadPoolExecutor(len(prompts)) as ex:
                assert list(ex.map(lambda p: complete(srv, p)[0], prompts)) == want, copy
            assert srv.alive()
        finally:
            conftest.stop(srv)


# The released gpt-oss GGUFs' expert type, read in place (no repacked copy): the exact path against
# mlx-lm on gguf-py's dequantization of the same weights (mlx-deq-mxfp4, the same vocabulary).
def test_run_raw_exact_on_the_mxfp4_file_prints_mlx_lm_greedy_text(next_dir):
    if next_dir.name != "gpt-oss":
        pytest.skip("gpt-oss only: its experts are MXFP4")
    want = mlx_greedy_text(next_dir / "mlx-deq-mxfp4")
    r = run_raw(next_dir / "gguf-mxfp4" / "model.gguf", "--exact", "--kv-dtype", "f32")
    assert r.returncode == 0, r.stderr
    assert r.stdout.removesuffix("\n") == want, r.stderr
