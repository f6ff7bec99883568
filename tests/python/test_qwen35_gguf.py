"""Qwen3.5 as llama.cpp's `qwen35` GGUF (scripts/qwen35_gguf.py writes the tiny models of
scripts/make_tiny_qwen35.py with llama.cpp's gguf-py and the converter's transforms; Q8_0 by
llama.cpp's own quantizer):
- the GGUF is right: llama-cpp-python running the f32 file gives mlx-lm's greedy tokens and logits
  on the Hugging Face copy of the same weights (a wrong norm offset, A sign or head order would not);
- `rapid-mlx run --raw` on each GGUF prints llama-cpp-python's greedy text of the same prompt
  (both tokenize with the file's own vocabulary and `qwen35` pre-tokenizer);
- a corrupt qwen35 file is refused with its path and reason.

Skips when the binary is not built or mlx-lm is not installed; the llama.cpp comparisons skip
without llama-cpp-python."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_qwen35 import BIN, PROMPT, ROOT, STEPS, TINY  # the same binary, models and prompt (skips without mlx-lm)

CONFIGS = ["dense-tied", "vheads-untied"]

sys.path.insert(0, str(ROOT / "scripts"))
import qwen35_gguf  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    if not (TINY / "vheads-untied" / "hf-f32" / "greedy.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_qwen35.py"), str(TINY)], check=True,
                       stdout=subprocess.DEVNULL)
    if not (TINY / "dense-tied" / "gguf-q8_0" / "teacher_forced.json").exists():
        # f32 GGUFs always; the Q8_0 copies and llama.cpp's goldens with llama-cpp-python installed.
        subprocess.run([sys.executable, str(ROOT / "scripts" / "qwen35_gguf.py"), str(TINY)], check=True,
                       stdout=subprocess.DEVNULL)
    return TINY


def skip_unless_llama_cpp_reads(tiny, config):
    if not qwen35_gguf.llama_cpp_reads(json.load(open(tiny / config / "hf-f32" / "config.json"))["text_config"]):
        pytest.skip(f"{config}: llama.cpp cannot load it (value heads wider than key heads)")


@pytest.mark.parametrize("config", CONFIGS)
def test_llamacpp_on_the_gguf_gives_mlx_lm_greedy_output(tiny, config):
    pytest.importorskip("llama_cpp")
    skip_unless_llama_cpp_reads(tiny, config)
    mlx = json.load(open(tiny / config / "hf-f32" / "greedy.json"))
    lc = json.load(open(tiny / config / "gguf-f32" / "greedy.json"))
    assert lc["probe_ids"] == mlx["probe_ids"]
    worst = 0.0
    for a, b in zip(mlx["cases"], lc["cases"]):
        assert a["prompt_ids"] == b["prompt_ids"]
        assert [s["token"] for s in b["steps"]] == [s["token"] for s in a["steps"]], a["prompt"]
        for sa, sb in zip(a["steps"], b["steps"]):
            assert sa["top_ids"] == sb["top_ids"]
            d = np.abs(np.array(sa["top_logits"] + sa["probe_logits"]) - np.array(sb["top_logits"] + sb["probe_logits"]))
            worst = max(worst, float(d.max()) / sa["max_abs_logit"])
    assert worst < 1e-3, worst


def llama_greedy_text(gguf, prompt=PROMPT, steps=STEPS):
    lm = qwen35_gguf.llama(gguf)
    ids = lm.tokenize(prompt.encode(), add_bos=False, special=False)
    eos = lm.token_eos()
    out = []
    lm.eval(ids)
    for _ in range(steps):
        t = int(np.argmax(lm.scores[lm.n_tokens - 1]))
        if t == eos:
            break
        out.append(t)
        lm.eval([t])
    return lm.detokenize(out).decode("utf-8", errors="replace")


@pytest.mark.parametrize("config", CONFIGS)
# f32 only: llama.cpp's own Q8_0 run leaves its f32 run's tokens on this random tiny model (up to 23%
# of max|logit| apart at the first step), so equal Q8_0 greedy text is no criterion (issue 17).
@pytest.mark.parametrize("copy,flags", [("gguf-f32", ["--exact", "--kv-dtype", "f32"])])
def test_run_raw_prints_llamacpp_greedy_text(tiny, config, copy, flags):
    pytest.importorskip("llama_cpp")
    skip_unless_llama_cpp_reads(tiny, config)
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    gguf = tiny / config / copy / "model.gguf"
    want = llama_greedy_text(gguf)
    r = subprocess.run([BIN, "run", "--model", str(gguf), "--raw", *flags, "--temperature", "0",
                        "--max-tokens", str(STEPS), "--threads", "2", PROMPT],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.removesuffix("\n") == want, r.stderr


def test_corrupt_qwen35_gguf_is_refused_with_path_and_reason(tiny, tmp_path):
    """A qwen35 file whose ssm_a is not negative (A = -exp(A_log) always is) is refused, not run."""
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    from safetensors.numpy import load_file
    gguf = qwen35_gguf.import_gguf()
    hf = tiny / "dense-tied" / "hf-f32"
    tc = json.load(open(hf / "config.json"))["text_config"]
    tensors = qwen35_gguf.hf_to_gguf_tensors(gguf, tc, load_file(str(hf / "model.safetensors")))
    tensors = [(n, -a if n.endswith(".ssm_a") else a) for n, a in tensors]
    bad = tmp_path / "bad.gguf"
    qwen35_gguf.write_gguf(bad, tc, tensors, qwen35_gguf.tokenizer_from_json(hf / "tokenizer.json"))
    r = subprocess.run([BIN, "run", "--model", str(bad), "--raw", "--max-tokens", "2", "hi"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert str(bad) in r.stderr and "ssm_a" in r.stderr, r.stderr


def test_llamacpp_runs_the_gguf_with_its_mtp_head_as_mlx_lm(tiny):
    """The MTP copy (scripts/qwen35_gguf.py's mtp_copy: the head as llama.cpp's converter appends
    it, nextn_predict_layers = 1) is a file llama.cpp reads: its greedy text is mlx-lm's on the
    Hugging Face checkpoint (rapid-mlx's reading of the head: tests/model_qwen35_test.cpp
    Qwen35Mtp and test_qwen35.py's speculation test)."""
    pytest.importorskip("llama_cpp")
    from test_qwen35 import TINY_MTP, mlx_greedy_text
    model = TINY_MTP / "dense-tied"
    if not (model / "gguf-f32" / "model.gguf").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_qwen35_mtp.py"), str(TINY_MTP)], check=True,
                       stdout=subprocess.DEVNULL)
    assert llama_greedy_text(model / "gguf-f32" / "model.gguf") == mlx_greedy_text(model)
