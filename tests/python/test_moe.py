"""The tiny random-weight mixture-of-experts models (scripts/make_tiny_moe.py: qwen3_moe,
qwen3_5_moe and gpt_oss, 8 experts, top-2) end to end: `rapid-mlx run --raw` and `rapid-mlx serve` (driven
by the openai SDK, several clients at once so their rows share experts in one batch) print the
text of mlx-lm's own greedy continuation of the same prompt (tokenized by HF `tokenizers` from the
model's tokenizer.json, decoded the same way). gpt_oss's HF layout is one mlx-lm cannot load: its
reference is the mlx-f32 twin holding the same weights.

Skips when the binary is not built or mlx-lm is not installed."""
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import conftest
from test_qwen35 import CACHE, PROMPT, complete, mlx_greedy_text, run_raw, tiny_set

TINY = Path(CACHE) / "moe-tiny"

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_moe.py", "gpt-oss/mlx-q4/greedy.json")


@pytest.mark.parametrize("config", ["qwen3-moe", "qwen35-moe", "gpt-oss"])
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    ref = tiny / config / "mlx-f32" if (config, copy) == ("gpt-oss", "hf-f32") else d
    assert run_raw(d) == mlx_greedy_text(ref)


@pytest.fixture(scope="module", params=["qwen3-moe", "qwen35-moe", "gpt-oss"])
def served(tiny, tmp_path_factory, request):
    """serve the f32 copy with f32 KV: the same arithmetic as the exact path."""
    d = tmp_path_factory.mktemp("moe")
    model = str(tiny / request.param / "mlx-f32")
    srv = conftest.launch(["--kv-dtype", "f32", "--cache-dir", str(d / "kv"), "--cache-key-file", str(d / "kv.key")],
                          str(d / "serve.log"), model=model)
    yield srv, Path(model)
    conftest.stop(srv)


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    srv, model = served
    prompts = [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model", "def main():\n", "# MoE\n"]
    with ThreadPoolExecutor(len(prompts)) as ex:
        got = list(ex.map(lambda p: complete(srv, p)[0], prompts))
    assert got == [mlx_greedy_text(model, p) for p in prompts]
    assert srv.alive()
