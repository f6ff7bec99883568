"""Hostile nesting through the real server (issue #15): JSON 30k levels deep in any field that
reaches the chat template or the grammar compiler used to overflow a thread's stack and kill the
process. Each is a 400 in the API's own shape naming the field and the limit; the server keeps
serving. Raw bodies for 30k levels (Python's json cannot even serialise them), the official SDKs
for bodies just over the limit."""
import json

import anthropic
import openai
import pytest

from conftest import API_KEY, MODEL_NAME, own_server, stop

LIMIT = 128
DEEP = 30000


def nest(depth):
    return '{"a":' * depth + "1" + "}" * depth


def nested_dict(depth):
    d = 1
    for _ in range(depth):
        d = {"a": d}
    return d


MSGS = '[{"role":"user","content":"Hi"}]'

CASES = [
    ("chat_template_kwargs", "/v1/chat/completions",
     '{"model":"%s","max_tokens":4,"messages":%s,"chat_template_kwargs":{"x":%s}}' % (MODEL_NAME, MSGS, nest(DEEP)),
     "chat_template_kwargs.x.a"),
    ("tools parameters", "/v1/chat/completions",
     '{"model":"%s","max_tokens":4,"messages":%s,"tools":[{"type":"function","function":{"name":"f","parameters":%s}}]}'
     % (MODEL_NAME, MSGS, nest(DEEP)),
     "tools[0].function.parameters.a"),
    ("tool-call arguments", "/v1/chat/completions",
     '{"model":"%s","max_tokens":4,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":'
     '[{"id":"c","type":"function","function":{"name":"f","arguments":%s}}]},{"role":"tool","tool_call_id":"c",'
     '"content":"ok"}]}' % (MODEL_NAME, json.dumps(nest(DEEP))),
     "messages[1].tool_calls[0].function.arguments.a"),
    ("response_format", "/v1/chat/completions",
     '{"model":"%s","max_tokens":4,"messages":%s,"response_format":{"type":"json_schema","json_schema":'
     '{"name":"s","schema":%s}}}' % (MODEL_NAME, MSGS, nest(DEEP)),
     "response_format.json_schema.schema.a"),
    ("anthropic input_schema", "/v1/messages",
     '{"model":"%s","max_tokens":4,"messages":%s,"tools":[{"name":"f","input_schema":%s}]}'
     % (MODEL_NAME, MSGS, nest(DEEP)),
     "tools[0].input_schema.a"),
    ("responses tools", "/v1/responses",
     '{"model":"%s","max_output_tokens":4,"input":"Hi","tools":[{"type":"function","name":"f","parameters":%s}]}'
     % (MODEL_NAME, nest(DEEP)),
     "tools[0].parameters.a"),
    ("responses function_call arguments", "/v1/responses",
     '{"model":"%s","max_output_tokens":4,"input":[{"type":"function_call","call_id":"c","name":"f","arguments":%s},'
     '{"type":"function_call_output","call_id":"c","output":"ok"}]}' % (MODEL_NAME, json.dumps(nest(DEEP))),
     "input[0].arguments.a"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # Its own server: these requests must not leave cached prefixes for other files' tests.
    srv = own_server(tmp_path_factory, "deep_json", ["--no-persist-cache"])
    yield srv
    stop(srv)


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def ant(server):
    return anthropic.Anthropic(base_url=server.base, api_key=API_KEY, max_retries=0, timeout=120)


def still_serves(oai):
    r = oai.chat.completions.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert r.usage.completion_tokens > 0


@pytest.mark.parametrize("name,path,body,field", CASES, ids=[c[0] for c in CASES])
def test_30k_deep_field_is_400_naming_it_and_the_server_lives(server, oai, name, path, body, field):
    status, raw = server.post(path, body.encode(), raw=True)
    assert status == 400, raw[:300]
    err = json.loads(raw)
    if path == "/v1/messages":
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    else:
        assert err["error"]["type"] == "invalid_request_error"
        assert err["error"]["param"].startswith(field), err
    message = err["error"]["message"]
    assert field in message and str(LIMIT) in message, message
    assert server.alive()
    still_serves(oai)


def test_sdks_get_a_bad_request_just_over_the_limit(server, oai, ant):
    deep = nested_dict(LIMIT + 5)
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "Hi"}],
                                    tools=[{"type": "function", "function": {"name": "f", "parameters": deep}}])
    assert "tools[0].function.parameters" in str(e.value)
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "Hi"}],
                            tools=[{"name": "f", "input_schema": deep}])
    assert "tools[0].input_schema" in str(e.value)
    # Nesting real agents use (well under the limit) still works end to end.
    schema = {"type": "object", "properties": {"p": nested_dict(20)}}
    r = oai.chat.completions.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "Hi"}],
                                    tools=[{"type": "function", "function": {"name": "f", "parameters": schema}}])
    assert r.choices[0].finish_reason in ("length", "stop", "tool_calls")
    still_serves(oai)
