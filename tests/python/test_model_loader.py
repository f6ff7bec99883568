"""`rapid-mlx convert` end to end through the real binary, checked against reference outputs:
mlx_lm.convert's own 4-bit checkpoint (tests/golden/model_loader/tiny-llama-mlx-q4, written by
scripts/make_loader_goldens.py) and the original HF weights of the tiny llama."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("RAPID_BIN", os.path.join(ROOT, "build", "rapid-mlx"))
TINY = os.path.join(ROOT, "tests", "golden", "tiny")
GOLDEN = os.path.join(ROOT, "tests", "golden", "model_loader")

def _has_convert():
    if not os.access(BIN, os.X_OK):
        return False
    r = subprocess.run([BIN, "convert", "--help"], capture_output=True, text=True, timeout=30)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _has_convert(), reason=f"{BIN} not built (or built before `convert` existed)")

NP = {"F32": np.float32, "F16": np.float16, "U32": np.uint32, "I32": np.int32, "U8": np.uint8, "I8": np.int8}


def read_safetensors(path):
    """Independent minimal reader: {name: (dtype string, shape, raw bytes)}."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]), data[base + b:base + en])
    return out


def as_array(entry):
    dtype, shape, raw = entry
    return np.frombuffer(raw, dtype=NP[dtype]).reshape(shape)


def convert(*args):
    return subprocess.run([BIN, "convert", *args], capture_output=True, text=True, timeout=120)


def test_hf_to_mlx_q4_is_byte_identical_to_mlx_lm(tmp_path):
    out = tmp_path / "q4"
    r = convert("--from", os.path.join(TINY, "llama"), "--to", str(out), "--quantize", "4", "--group-size", "64")
    assert r.returncode == 0, r.stderr
    ours = read_safetensors(out / "model.safetensors")
    theirs = read_safetensors(os.path.join(GOLDEN, "tiny-llama-mlx-q4", "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name
    cfg = json.load(open(out / "config.json"))
    want = json.load(open(os.path.join(GOLDEN, "tiny-llama-mlx-q4", "config.json")))
    assert cfg["quantization"] == want["quantization"]
    assert cfg["quantization_config"] == want["quantization_config"]


def test_gguf_to_f32_recovers_hf_weights(tmp_path):
    out = tmp_path / "f32"
    r = convert("--from", os.path.join(TINY, "llama-q8_0.gguf"), "--to", str(out))
    assert r.returncode == 0, r.stderr
    ours = read_safetensors(out / "model.safetensors")
    hf = read_safetensors(os.path.join(TINY, "llama", "model.safetensors"))
    assert sorted(ours) == sorted(hf)
    for name, entry in hf.items():
        a, b = as_array(ours[name]), as_array(entry)
        assert ours[name][0] == "F32" and a.shape == b.shape, name
        # Q8_0 rounding only: a missing Q/K un-permutation would move whole rows.
        tol = np.abs(b).max(axis=-1, keepdims=True) / 127 + 1e-6
        assert (np.abs(a - b) <= tol).all(), name
    cfg = json.load(open(out / "config.json"))
    want = json.load(open(os.path.join(TINY, "llama", "config.json")))
    for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "bos_token_id", "eos_token_id"):
        assert cfg[k] == want[k], k
    assert cfg["rope_theta"] == want["rope_parameters"]["rope_theta"]
    assert (out / "tokenizer.gguf").exists()


def test_bad_input_is_a_clear_error(tmp_path):
    r = convert("--from", "/nonexistent/model.gguf", "--to", str(tmp_path / "x"))
    assert r.returncode == 1 and "/nonexistent/model.gguf" in r.stderr
    r = convert("--from", os.path.join(TINY, "llama"), "--to", str(tmp_path / "y"), "--quantize", "7")
    assert r.returncode != 0 and "quantize" in r.stderr
    r = convert("--from", os.path.join(TINY, "llama"))
    assert r.returncode == 2 and "usage" in r.stderr
