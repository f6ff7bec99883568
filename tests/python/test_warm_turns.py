"""Turn warming on a thinking template: an agent's next turn finds its whole history in the prefix
cache although the template re-renders the previous answer differently from how it was generated.

The model is a random-weight Qwen3 with the real Qwen3 tokenizer and chat template
(scripts/make_tiny_chat_model.py). The reference for what the next prompt is: the chat template
rendered by jinja2 and tokenized by Hugging Face `tokenizers`, independently of the server. The
prefix that every next prompt shares is the common prefix of two renders that differ only in the
follow-up message's text; warming must make the cache hold that prefix (whole blocks of it)."""
import json
import os
import time

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from conftest import API_KEY, MODEL_NAME, launch, need_server, stop, tiny_chat_model

SYSTEM = ("You are a coding agent working in a large repository. Follow the user's instructions, "
          "explain what you change, and call the tools you are given when they help. ") * 12
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


@pytest.fixture(scope="module")
def model_dir():
    return tiny_chat_model()


@pytest.fixture(scope="module")
def oracle(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, **k: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(cfg["chat_template"])
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))

    def encode(messages, tools=None, extra=None):
        text = tmpl.render(messages=messages, tools=tools, add_generation_prompt=True, **(extra or {}))
        return tok.encode(text, add_special_tokens=False).ids

    return encode


def _server(model_dir, tmp_path, *extra):
    need_server()
    tmp_path.mkdir(parents=True, exist_ok=True)
    return launch(["--cache-dir", str(tmp_path / "kv"), "--ctx", "4096", "--speculative", "off"] + list(extra),
                  str(tmp_path / "serve.log"), model=model_dir)


def _cache(srv):
    return json.loads(srv.get("/v1/cache", {"Authorization": f"Bearer {API_KEY}"})[1])


def _wait_warm(srv, n):
    """Waits (bounded) until n warm prefills have finished: warming runs after the response."""
    deadline = time.time() + 60
    while time.time() < deadline:
        if _cache(srv)["warm_turns"]["requests"] >= n:
            return
        time.sleep(0.05)
    pytest.fail(f"warming did not finish: {_cache(srv)['warm_turns']}")


def _chat(srv, messages, **kw):
    body = {"model": MODEL_NAME, "messages": messages, "max_tokens": 12, "temperature": 0}
    body.update(kw)
    status, raw = srv.post("/v1/chat/completions", body)
    assert status == 200, raw
    return json.loads(raw)


def _shared_prefix(encode, history, assistant, tools=None, extra=None):
    """Tokens every next prompt starts with (reference: two jinja2 renders with different follow-ups)."""
    def follow(text):
        if assistant.get("tool_calls"):
            return [{"role": "tool", "tool_call_id": c["id"], "content": text} for c in assistant["tool_calls"]]
        return [{"role": "user", "content": text}]
    a = encode(history + [assistant] + follow("A"), tools, extra)
    b = encode(history + [assistant] + follow("Z"), tools, extra)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _arguments(text):
    """Arguments as a template sees them: the object when the text is JSON (servers parse it, as
    vLLM does), else the text itself (a random model's constrained output may be cut short)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _wire(history):
    """The history as an OpenAI client sends it: tool-call arguments as JSON text."""
    out = []
    for m in history:
        if m.get("tool_calls"):
            m = dict(m, tool_calls=[{**c, "function": {**c["function"], "arguments": c["function"]["arguments"]
                                     if isinstance(c["function"]["arguments"], str)
                                     else json.dumps(c["function"]["arguments"])}} for c in m["tool_calls"]])
        out.append(m)
    return out


def _run_loop(srv, turns, tools=None, extra=None):
    """A conversation of `turns` user turns; returns per turn (prompt_tokens, cached_tokens, reply)."""
    history = [{"role": "system", "content": SYSTEM}]
    out = []
    for t in range(turns):
        history.append({"role": "user", "content": f"Step {t}: look at module_{t}.py and tell me what it does."})
        kw = {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "read_file"}},
              "max_tokens": 40} if tools else {}
        if extra:
            kw["chat_template_kwargs"] = extra
        r = _chat(srv, _wire(history), **kw)
        msg = r["choices"][0]["message"]
        u = r["usage"]
        out.append((u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0), msg))
        assistant = {"role": "assistant", "content": msg.get("content") or ""}
        if msg.get("tool_calls"):
            assistant["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["function"]["name"], "arguments": _arguments(c["function"]["arguments"])}}
                for c in msg["tool_calls"]]
        history.append(assistant)
        if msg.get("tool_calls"):
            for c in msg["tool_calls"]:
                history.append({"role": "tool", "tool_call_id": c["id"], "content": f"contents of module_{t}.py"})
        if _cache(srv)["warm_turns"]["enabled"]:
            _wait_warm(srv, t + 1)
    return out, history


def _expected_floor(encode, history_before, assistant, block, tools=None, extra=None):
    n = _shared_prefix(encode, history_before, assistant, tools, extra)
    return (max(n - 1, 0) // block) * block  # the cache holds whole blocks; one token kept back


# no_think: Qwen3's non-thinking mode, whose generation prompt opens and closes an empty
# <think></think> block that the re-rendered history then leaves out.
@pytest.mark.parametrize("use_tools,extra", [(False, None), (True, None), (False, {"enable_thinking": False})],
                         ids=["chat", "tool_loop", "no_think"])
def test_next_turn_is_cached_through_the_previous_answer(model_dir, oracle, tmp_path, use_tools, extra):
    tools = TOOLS if use_tools else None
    srv = _server(model_dir, tmp_path)
    try:
        block = _cache(srv)["kv_pool"]["block_size"]
        turns, history = _run_loop(srv, 4, tools, extra)
    finally:
        stop(srv)
    # Rebuild, per turn, the history the previous turn's answer was followed by, and check the
    # cache held the reference's shared prefix when the next turn arrived.
    msgs = [m for m in history]
    starts = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    for t in range(1, len(turns)):
        prompt_tokens, cached, _ = turns[t]
        before = msgs[:starts[t - 1] + 1]          # up to the previous user message
        assistant = msgs[starts[t - 1] + 1]        # the previous answer as the client sent it back
        assert prompt_tokens == len(oracle(msgs[:starts[t] + 1], tools, extra)), "server and jinja2 renders differ"
        want = _expected_floor(oracle, before, assistant, block, tools, extra)
        assert cached >= want, f"turn {t}: {cached} cached tokens, reference shared prefix {want}"
        assert cached < prompt_tokens


def test_without_warming_the_reference_prefix_is_missed(model_dir, oracle, tmp_path):
    """The control: the template's re-render really differs from the generated tokens, so without
    warming the cache misses part of the shared prefix (else the test above could not fail)."""
    srv = _server(model_dir, tmp_path, "--no-warm-turns")
    try:
        block = _cache(srv)["kv_pool"]["block_size"]
        turns, history = _run_loop(srv, 3)
    finally:
        stop(srv)
    starts = [i for i, m in enumerate(history) if m["role"] == "user"]
    missed = 0
    for t in range(1, len(turns)):
        want = _expected_floor(oracle, history[:starts[t - 1] + 1], history[starts[t - 1] + 1], block)
        missed += turns[t][1] < want
    assert missed > 0


def test_warmed_turns_answer_exactly_as_cold_ones(model_dir, tmp_path):
    """Warm KV is the same KV: at temperature 0 a warmed server and a server without a prefix cache
    give identical answers over a multi-turn loop."""
    warm = _server(model_dir, tmp_path / "a")
    try:
        got, _ = _run_loop(warm, 4)
    finally:
        stop(warm)
    cold = _server(model_dir, tmp_path / "b", "--no-prefix-cache")
    try:
        ref, _ = _run_loop(cold, 4)
    finally:
        stop(cold)
    assert [m for _, _, m in got] == [m for _, _, m in ref]
    assert all(c == 0 for _, c, _ in ref)
