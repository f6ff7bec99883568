"""The tiny random-weight Mistral 3 models (scripts/make_tiny_mistral3.py: devstral, Devstral Small
2's mistral3 wrapper; ministral3, the text-only model; both with YaRN RoPE and the llama-4 query
scaling running past the original context) end to end: `rapid-mlx run --raw` and `rapid-mlx serve`
(the openai SDK, several clients at once so their rows share one batch; growing multi-turn prompts
that resume from the prefix cache; a two-turn chat through Devstral's own chat template, which the
server reads for its Mistral tool parser) print the text of mlx-lm's own greedy continuation of the
same prompt, computed from scratch (tokenized by HF `tokenizers` from the model's tokenizer.json,
decoded the same way; chat prompts rendered by jinja2 from the real template).

Skips when the binary is not built or mlx-lm is not installed."""
import json
import os
from pathlib import Path

import pytest

import conftest
from test_qwen35 import (CACHE, PROMPT, chat_turns_match_mlx_lm, clients_at_once_match_mlx_lm, mlx_greedy_text,
                         multi_turn_resumes_and_matches, run_raw, serve_f32, tiny_set)

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(CACHE) / "mistral3-tiny"
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))
CONFIGS = ["devstral", "ministral3"]
TEMPLATE = FIX / "chat-templates" / "unsloth-mistral-Devstral-Small-2507.jinja"

mlx_lm = pytest.importorskip("mlx_lm")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_mistral3.py", "ministral3/mlx-q4/greedy.json")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    assert run_raw(d) == mlx_greedy_text(d)


@pytest.fixture(scope="module", params=CONFIGS)
def served(tiny, tmp_path_factory, request):
    model = tiny / request.param / "mlx-f32"
    srv = serve_f32(model, tmp_path_factory.mktemp("mistral3"))
    yield srv, model
    conftest.stop(srv)


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    """Prompts of different lengths in one batch: each row's query scale follows its own position."""
    clients_at_once_match_mlx_lm(*served, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model",
                                           "def main():\n", "# Mistral\n"])


def test_serve_multi_turn_prompts_resume_and_match(served):
    """Prompts that extend the last turn's resume from the prefix cache's KV pages (positions past
    the original context, where the queries are scaled) and still continue as mlx-lm does."""
    multi_turn_resumes_and_matches(*served)


def render(messages):
    """The chat prompt as transformers renders it (jinja2 set up like apply_chat_template), with
    the tokenizer's bos token <s>."""
    return conftest.template_env().from_string(TEMPLATE.read_text()).render(
        messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module")
def chat_devstral(tiny, tmp_path_factory):
    """devstral (f32) with Devstral's chat template beside its files (chat_template.jinja, as the
    releases ship it; tokenizer_config.json keeps naming <s> / </s>)."""
    if not TEMPLATE.exists():
        pytest.skip(f"{TEMPLATE} missing (set RAPID_FIXTURES_DIR)")
    d = tmp_path_factory.mktemp("mistral3-chat")
    src, model = tiny / "devstral" / "mlx-f32", d / "model"
    model.mkdir()
    for f in src.iterdir():
        (model / f.name).symlink_to(f)
    (model / "chat_template.jinja").symlink_to(TEMPLATE)
    srv = serve_f32(model, d)
    yield srv, model, d
    conftest.stop(srv)


def test_serve_chat_turns_match_mlx_lm_through_the_devstral_template(chat_devstral):
    """A two-turn chat: each reply is mlx-lm's greedy continuation of the rendered conversation
    (cold, from scratch); the second turn reuses the first's cached pages."""
    srv, model, _ = chat_devstral
    cached = [c for c, _ in chat_turns_match_mlx_lm(srv, model, render)]
    assert cached[0] == 0 and cached[1] > 0, cached


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False}}}


def test_serve_picks_mistral_parsers_and_forces_a_call_through_the_devstral_template(chat_devstral):
    """At startup the server reads Devstral's template for its tool parser (Mistral's
    [TOOL_CALLS]name[ARGS]{...}) and logs its choice; a forced call (the tools rendered in
    [AVAILABLE_TOOLS], the arguments decoded under the schema) comes back to the openai SDK as a
    typed call whose arguments jsonschema accepts."""
    import jsonschema
    import openai
    srv, _, d = chat_devstral
    assert "tool parser 'mistral'" in (d / "serve.log").read_text()
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=conftest.API_KEY, max_retries=0, timeout=120)
    messages = [{"role": "system", "content": "Answer with tools."}, {"role": "user", "content": "Weather in Paris?"}]
    r = client.chat.completions.create(model=conftest.MODEL_NAME, messages=messages, tools=[WEATHER], max_tokens=48,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                       temperature=0)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER["function"]["parameters"])
