"""The tiny random-weight mixture-of-experts models (scripts/make_tiny_moe.py: qwen3_moe,
qwen3_5_moe, qwen3_next and gpt_oss, 8 experts, top-2) end to end: `rapid-mlx run --raw` and `rapid-mlx
serve` (driven by the openai SDK, several clients at once so their rows share experts in one batch;
growing multi-turn prompts and a two-turn chat that resume from the hybrid prefix cache) print the
text of mlx-lm's own greedy continuation of the same prompt, computed from scratch (tokenized by HF
`tokenizers` from the model's tokenizer.json, decoded the same way; chat prompts rendered by jinja2
from the real Qwen3 chat template).

The MXFP4 copies of scripts/make_tiny_mxfp4.py likewise through `rapid-mlx run --raw`.

Skips when the binary is not built or mlx-lm is not installed."""
import os
from pathlib import Path

import pytest

import conftest
from test_qwen35 import (CACHE, PROMPT, chat_turns_match_mlx_lm, clients_at_once_match_mlx_lm, mlx_greedy_text,
                         model_with_template, multi_turn_resumes_and_matches, run_raw, serve_f32, tiny_set)

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(CACHE) / "moe-tiny"
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))
CONFIGS = ["qwen3-moe", "qwen35-moe", "qwen3-next", "gpt-oss"]

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_moe.py", "qwen3-next/mlx-q4/greedy.json")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    # gpt_oss's HF layout is one mlx-lm cannot load: its reference is the mlx-f32 twin (same weights).
    ref = tiny / config / "mlx-f32" if (config, copy) == ("gpt-oss", "hf-f32") else d
    assert run_raw(d) == mlx_greedy_text(ref)


MXFP4 = Path(CACHE) / "mxfp4-tiny"


@pytest.mark.parametrize("config,copy", [("gpt-oss", "mlx-mxfp4"), ("qwen3-moe", "mlx-mxfp4"), ("gpt-oss", "hf-mxfp4")])
def test_mxfp4_run_raw_prints_mlx_lm_greedy_text(config, copy):
    """scripts/make_tiny_mxfp4.py's MXFP4 checkpoints (mlx-lm's mode "mxfp4", and gpt-oss's
    Hugging Face *_blocks / *_scales layout, which mlx-lm loads too) continue PROMPT as mlx-lm does."""
    d = tiny_set(MXFP4, "make_tiny_mxfp4.py", "qwen3-moe/mlx-mxfp4/greedy.json") / config / copy
    assert run_raw(d) == mlx_greedy_text(d)


@pytest.fixture(scope="module", params=CONFIGS)
def served(tiny, tmp_path_factory, request):
    model = tiny / request.param / "mlx-f32"
    srv = serve_f32(model, tmp_path_factory.mktemp("moe"))
    yield srv, model, request.param
    conftest.stop(srv)


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    srv, model, _ = served
    clients_at_once_match_mlx_lm(srv, model, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model",
                                              "def main():\n", "# MoE\n"])


def test_serve_multi_turn_prompts_resume_and_match(served):
    """Prompts that extend the last turn's resume from the prefix cache (KV pages, plus recurrent
    checkpoints on the hybrids) and still continue as mlx-lm does from scratch."""
    srv, model, _ = served
    multi_turn_resumes_and_matches(srv, model)


TEMPLATE = FIX / "chat-templates" / "Qwen-Qwen3-0.6B.jinja"  # Qwen3-Next ships the Qwen3 chat template
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def render(messages):
    """The chat prompt as transformers renders it (jinja2 set up like apply_chat_template)."""
    return conftest.template_env().from_string(TEMPLATE.read_text()).render(
        messages=messages, add_generation_prompt=True, enable_thinking=False)


@pytest.fixture(scope="module")
def chat_next(tiny, tmp_path_factory):
    """qwen3_next (f32) with the Qwen3 chat template beside its files."""
    if not TEMPLATE.exists():
        pytest.skip(f"{TEMPLATE} missing (set RAPID_FIXTURES_DIR)")
    d = tmp_path_factory.mktemp("qwen3-next-chat")
    model = model_with_template(tiny / "qwen3-next" / "mlx-f32", TEMPLATE, d)
    srv = serve_f32(model, d)
    yield srv, model
    conftest.stop(srv)


def test_serve_chat_turns_match_mlx_lm_and_reuse_the_hybrid_cache(chat_next):
    """A two-turn chat: each reply is mlx-lm's greedy continuation of the rendered conversation
    (cold, from scratch); the second turn resumes from the first's recurrent checkpoints."""
    srv, model = chat_next
    cached, prompt_tokens = zip(*chat_turns_match_mlx_lm(srv, model, render, extra_body=NO_THINK))
    assert cached[0] == 0 and 0 < cached[1] < prompt_tokens[1], (cached, prompt_tokens)
