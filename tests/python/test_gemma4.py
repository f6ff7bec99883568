"""The tiny random-weight Gemma 4 models (scripts/make_tiny_gemma4.py: e2b with kv-shared layers,
per-layer inputs and an 8-token sliding window; kv with keys doubling as values) end to end:
`rapid-mlx run --raw` and `rapid-mlx serve` (driven by the openai SDK, several clients at once so
their rows share one batch; growing multi-turn prompts that resume from the prefix cache; a two-turn
chat through Gemma 4's own chat template) print the text of mlx-lm's own greedy continuation of the
same prompt, computed from scratch (tokenized by HF `tokenizers` from the model's tokenizer.json,
decoded the same way; chat prompts rendered by jinja2 from the real template).

Skips when the binary is not built or mlx-lm is not installed."""
import os
from pathlib import Path

import pytest

import conftest
from test_qwen35 import (CACHE, PROMPT, chat_turns_match_mlx_lm, clients_at_once_match_mlx_lm, mlx_greedy_text,
                         model_with_template, multi_turn_resumes_and_matches, run_raw, serve_f32, tiny_set)

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(CACHE) / "gemma4-tiny"
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))
CONFIGS = ["e2b", "kv", "moe"]

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_gemma4.py", "moe/mlx-q4/greedy.json")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    assert run_raw(d) == mlx_greedy_text(d)


@pytest.fixture(scope="module", params=CONFIGS)
def served(tiny, tmp_path_factory, request):
    model = tiny / request.param / "mlx-f32"
    srv = serve_f32(model, tmp_path_factory.mktemp("gemma4"))
    yield srv, model
    conftest.stop(srv)


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    srv, model = served
    clients_at_once_match_mlx_lm(srv, model, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model",
                                              "def main():\n", "# Gemma\n"])


def test_serve_multi_turn_prompts_resume_and_match(served):
    """Prompts that extend the last turn's resume from the prefix cache's KV pages (kv-shared layers
    read their source layer's cached pages) and still continue as mlx-lm does from scratch."""
    multi_turn_resumes_and_matches(*served)


TEMPLATE = FIX / "chat-templates" / "google-gemma-4-31B-it.jinja"


def render(messages):
    """The chat prompt as transformers renders it (jinja2 set up like apply_chat_template); the tiny
    byte-level tokenizer has no bos token, so the server renders an empty one too."""
    return conftest.template_env().from_string(TEMPLATE.read_text()).render(
        messages=messages, add_generation_prompt=True, bos_token="")


@pytest.fixture(scope="module")
def chat_e2b(tiny, tmp_path_factory):
    """e2b (f32) with Gemma 4's chat template beside its files."""
    if not TEMPLATE.exists():
        pytest.skip(f"{TEMPLATE} missing (set RAPID_FIXTURES_DIR)")
    d = tmp_path_factory.mktemp("gemma4-chat")
    model = model_with_template(tiny / "e2b" / "mlx-f32", TEMPLATE, d)
    srv = serve_f32(model, d)
    yield srv, model
    conftest.stop(srv)


def test_serve_chat_turns_match_mlx_lm_through_the_gemma4_template(chat_e2b):
    """A two-turn chat: each reply is mlx-lm's greedy continuation of the rendered conversation
    (cold, from scratch); the second turn reuses the first's cached pages."""
    srv, model = chat_e2b
    cached = [c for c, _ in chat_turns_match_mlx_lm(srv, model, render)]
    assert cached[0] == 0 and cached[1] > 0, cached
