"""The tiny random-weight GLM-4.7-Flash (scripts/make_tiny_glm.py: multi-head latent attention,
DeepSeek-V3-routed experts with a shared expert after a dense first layer) end to end:
`rapid-mlx run --raw` on each copy (mlx-f32, the Hugging Face layout, mlx-lm's 4-bit) and
`rapid-mlx serve` (driven by the openai SDK, several clients at once so their rows share one batch
and its experts; growing multi-turn prompts that resume from the prefix cache; a two-turn chat
through the GLM chat template) print the text of mlx-lm's own greedy continuation of the same
prompt, computed from scratch (tokenized by HF `tokenizers` from the model's tokenizer.json, decoded
the same way; chat prompts rendered by jinja2 from the real template).

Skips when the binary is not built or mlx-lm is not installed."""
import os
from pathlib import Path

import pytest

import conftest
from test_qwen35 import (CACHE, PROMPT, chat_turns_match_mlx_lm, clients_at_once_match_mlx_lm, mlx_greedy_text,
                         model_with_template, multi_turn_resumes_and_matches, run_raw, serve_f32, tiny_set)

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(CACHE) / "glm-tiny"
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_glm.py", "glm/mlx-q4/greedy.json")


@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, copy):
    d = tiny / "glm" / copy
    assert run_raw(d) == mlx_greedy_text(d)


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    model = tiny / "glm" / "mlx-f32"
    srv = serve_f32(model, tmp_path_factory.mktemp("glm"))
    yield srv, model
    conftest.stop(srv)


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    clients_at_once_match_mlx_lm(*served, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model",
                                           "def main():\n", "# GLM\n"])


def test_serve_multi_turn_prompts_resume_and_match(served):
    """Prompts that extend the last turn's resume from the prefix cache's KV pages and still
    continue as mlx-lm does from scratch."""
    multi_turn_resumes_and_matches(*served)


TEMPLATE = FIX / "chat-templates" / "GLM-4.6.jinja"  # the nearest GLM template among the fixtures
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def render(messages):
    """The chat prompt as transformers renders it (jinja2 set up like apply_chat_template)."""
    return conftest.template_env().from_string(TEMPLATE.read_text()).render(
        messages=messages, add_generation_prompt=True, enable_thinking=False)


@pytest.fixture(scope="module")
def chat(tiny, tmp_path_factory):
    """The f32 copy with the GLM chat template beside its files."""
    if not TEMPLATE.exists():
        pytest.skip(f"{TEMPLATE} missing (set RAPID_FIXTURES_DIR)")
    d = tmp_path_factory.mktemp("glm-chat")
    model = model_with_template(tiny / "glm" / "mlx-f32", TEMPLATE, d)
    srv = serve_f32(model, d)
    yield srv, model
    conftest.stop(srv)


def test_serve_chat_turns_match_mlx_lm_through_the_glm_template(chat):
    """A two-turn chat: each reply is mlx-lm's greedy continuation of the rendered conversation
    (cold, from scratch); the second turn reuses the first's cached pages."""
    srv, model = chat
    cached, prompt_tokens = zip(*chat_turns_match_mlx_lm(srv, model, render, extra_body=NO_THINK))
    assert cached[0] == 0 and 0 < cached[1] < prompt_tokens[1], (cached, prompt_tokens)
