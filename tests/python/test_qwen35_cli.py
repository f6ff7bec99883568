"""`rapid-mlx run --raw` on the tiny random-weight Qwen3.5 models (scripts/make_tiny_qwen35.py)
prints the text of mlx-lm's own greedy continuation of the same prompt (tokenized by HF
`tokenizers` from the model's tokenizer.json, decoded the same way).

Skips when the binary is not built or mlx-lm is not installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("RAPID_MLX_BIN", str(ROOT / "build" / "rapid-mlx"))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
TINY = Path(CACHE) / "qwen35-tiny"
PROMPT = "def goldens(model_dir, seed):\n    model, _ = load_model("
STEPS = 24

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    if not (TINY / "vheads-untied" / "mlx-q4" / "tokenizer.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_qwen35.py"), str(TINY)], check=True,
                       stdout=subprocess.DEVNULL)
    return TINY


def mlx_greedy_text(model_dir):
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model
    from tokenizers import Tokenizer

    mx.set_default_device(mx.cpu)
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    model, config = load_model(model_dir)
    eos = config["text_config"]["eos_token_id"]
    cache = make_prompt_cache(model)
    logits = model(mx.array([tok.encode(PROMPT).ids]), cache=cache)[0, -1]
    out = []
    for _ in range(STEPS):
        t = int(mx.argmax(logits))
        if t == eos:
            break
        out.append(t)
        logits = model(mx.array([[t]]), cache=cache)[0, -1]
    return tok.decode(out)


@pytest.mark.parametrize("config", ["dense-tied", "vheads-untied"])
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    want = mlx_greedy_text(d)
    r = subprocess.run([BIN, "run", "--model", str(d), "--raw", "--exact", "--kv-dtype", "f32", "--temperature", "0",
                        "--max-tokens", str(STEPS), "--threads", "2", PROMPT],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.removesuffix("\n") == want, r.stderr
