"""vLLM's render endpoints (/v1/{chat/completions,completions,messages,responses}/render), which a
prefix-aware router (llm-d's precise prefix scorer) calls to learn a request's prompt token ids
before it picks a replica. The reference is the server itself doing the real request: the ids
render returns must be exactly the prompt the generation then prefills (its usage count) and
caches (the radix tree's own listing, /v1/cache?sequences=1, whose blocks the KV events publish).
Also: rendering runs nothing (the cache stays as it was), the response has vLLM's GenerateRequest
shape, and bad bodies are refused in each API's own error shape."""
import json

import pytest

from conftest import API_KEY, MODEL_NAME, own_server, stop

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file from the repository",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
CHAT = [{"role": "system", "content": "You are a coding agent. Render check."},
        {"role": "user", "content": "Open setup.py and tell me the package name."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": "setup.py"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "setup(name='widgets', version='1.0')"}]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = own_server(tmp_path_factory, "render")
    yield s
    stop(s)


def post(srv, path, body):
    status, raw = srv.post(path, body)
    return status, json.loads(raw)


def cached(srv):
    status, raw = srv.get("/v1/cache?sequences=1", {"Authorization": f"Bearer {API_KEY}"})
    assert status == 200, raw
    return [list(s) for s in json.loads(raw)["prefix_cache"]["sequences"]]


# (render path, generation path, body, how the generation reports its prompt tokens)
CASES = {
    "chat": ("/v1/chat/completions/render", "/v1/chat/completions",
             {"model": MODEL_NAME, "messages": CHAT, "tools": TOOLS, "temperature": 0, "max_tokens": 3},
             lambda r: r["usage"]["prompt_tokens"]),
    "completions": ("/v1/completions/render", "/v1/completions",
                    {"model": MODEL_NAME, "prompt": "def fibonacci(n):\n    # render check\n", "temperature": 0,
                     "max_tokens": 3},
                    lambda r: r["usage"]["prompt_tokens"]),
    "messages": ("/v1/messages/render", "/v1/messages",
                 {"model": MODEL_NAME, "max_tokens": 3, "temperature": 0, "system": "Render check, Anthropic.",
                  "tools": [{"name": "read_file", "description": "Read a file",
                             "input_schema": TOOLS[0]["function"]["parameters"]}],
                  "messages": [{"role": "user", "content": "Read setup.py."},
                               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                                  "name": "read_file", "input": {"path": "setup.py"}}]},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                             "content": "setup(name='widgets')"}]}]},
                 # Anthropic counts cache reads apart from input_tokens.
                 lambda r: r["usage"]["input_tokens"] + (r["usage"].get("cache_read_input_tokens") or 0)),
    "responses": ("/v1/responses/render", "/v1/responses",
                  {"model": MODEL_NAME, "instructions": "Render check, Responses.", "input": "Name a prime number.",
                   "temperature": 0, "max_output_tokens": 3},
                  lambda r: r["usage"]["input_tokens"]),
}


@pytest.mark.parametrize("api", list(CASES))
def test_render_gives_the_ids_the_generation_prefills_and_caches(srv, api):
    render_path, gen_path, body, prompt_tokens = CASES[api]
    before = cached(srv)
    status, r = post(srv, render_path, body)
    assert status == 200, r
    g = r[0] if api == "completions" else r  # vLLM answers completions render with a list
    if api == "completions":
        assert isinstance(r, list) and len(r) == 1
    ids = g["token_ids"]
    assert ids and all(isinstance(t, int) and t >= 0 for t in ids)
    assert g["model"] == MODEL_NAME and g["request_id"] and g["stream"] is False
    sp = g["sampling_params"]
    assert sp["temperature"] == 0 and sp["max_tokens"] == 3 and sp["top_k"] == -1
    assert cached(srv) == before, "render must not run or cache anything"

    status, out = post(srv, gen_path, body)
    assert status == 200, out
    assert prompt_tokens(out) == len(ids)
    seqs = cached(srv)
    assert any(s[:len(ids)] == ids for s in seqs), "the cached sequence does not start with the rendered ids"


def test_render_is_deterministic_and_follows_the_conversation(srv):
    path, _, body, _ = CASES["chat"]
    a = post(srv, path, body)[1]["token_ids"]
    assert post(srv, path, body)[1]["token_ids"] == a
    longer = dict(body, messages=CHAT + [{"role": "assistant", "content": "The package is widgets."},
                                         {"role": "user", "content": "Thanks."}])
    b = post(srv, path, longer)[1]["token_ids"]
    # A later turn extends the earlier prompt's history, so a router finds its blocks on the replica
    # that served it; the shared part is at least the whole earlier conversation minus the generation prompt.
    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert common >= len(a) - 8 and len(b) > len(a)


def test_bad_bodies_are_refused_in_each_apis_shape(srv):
    status, r = post(srv, "/v1/chat/completions/render", {"model": MODEL_NAME, "messages": "not a list"})
    assert status == 400 and r["error"]["type"] == "invalid_request_error"
    status, r = post(srv, "/v1/messages/render", {"model": MODEL_NAME, "max_tokens": 1, "messages": [{"role": "x"}]})
    assert status == 400 and r["type"] == "error" and r["error"]["type"] == "invalid_request_error"
    status, r = post(srv, "/v1/completions/render", {"model": "some-other-model", "prompt": "hi"})
    assert status == 404 and "error" in r
    status, raw = srv.post("/v1/responses/render", b"{not json", raw=True)
    assert status == 400 and "error" in json.loads(raw)
    # Too long for the context: the same refusal the generation would give, before any work.
    status, r = post(srv, "/v1/completions/render", {"model": MODEL_NAME, "prompt": "word " * 20000})
    assert status == 400 and r["error"]["code"] == "context_length_exceeded"
    assert srv.alive()


def test_render_needs_the_api_key(srv):
    status, _ = srv.post("/v1/chat/completions/render", {"model": MODEL_NAME, "messages": CHAT},
                         headers={"Authorization": "Bearer wrong"})
    assert status == 401
