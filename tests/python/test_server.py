"""End-to-end: the real server on SmolLM2-135M, driven by the official openai and anthropic SDKs.

Oracles: prompt token counts come from Hugging Face transformers (tests/golden/server/, made by
scripts/make_server_goldens.py); completion counts are checked against the number of per-token
logprobs the server reports; greedy streaming must equal greedy non-streaming; structured output
is validated with jsonschema."""
import json

import anthropic
import jsonschema
import openai
import pytest

from conftest import MODEL_NAME, CTX

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def chat(oai, messages, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 24)
    return oai.chat.completions.create(model=MODEL_NAME, messages=messages, **kw)


# ---------------------------------------------------------------- OpenAI chat completions

def test_models(oai):
    ids = [m.id for m in oai.models.list()]
    assert ids == [MODEL_NAME]
    assert oai.models.retrieve(MODEL_NAME).id == MODEL_NAME
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("no-such-model")


def test_chat_non_streaming_usage_matches_transformers(oai, golden):
    for name, case in golden["chat"].items():
        r = chat(oai, case["messages"], logprobs=True)
        choice = r.choices[0]
        assert choice.message.role == "assistant"
        assert isinstance(choice.message.content, str) and choice.message.content
        assert choice.finish_reason in ("stop", "length")
        assert r.usage.prompt_tokens == len(case["ids"]), name
        assert r.usage.completion_tokens == len(choice.logprobs.content)
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streaming_equals_non_streaming_greedy(oai, golden):
    msgs = golden["chat"]["hello"]["messages"]
    full = chat(oai, msgs)
    stream = chat(oai, msgs, stream=True, stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage.prompt_tokens == full.usage.prompt_tokens
    assert usage.completion_tokens == full.usage.completion_tokens


def test_max_tokens_gives_length(oai, golden):
    r = chat(oai, golden["chat"]["hello"]["messages"], max_tokens=5)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5


def test_stop_sequence_cuts_output(oai, golden):
    msgs = golden["chat"]["system"]["messages"]
    full = chat(oai, msgs, max_tokens=32).choices[0].message.content
    words = full.split()
    assert len(words) >= 3, full
    stop = " " + words[2]
    cut = full[: full.index(stop)]
    r = chat(oai, msgs, max_tokens=32, stop=[stop])
    assert r.choices[0].message.content == cut
    assert r.choices[0].finish_reason == "stop"


def test_forced_tool_call_openai(oai):
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    r = chat(oai, msgs, tools=[WEATHER_TOOL], tool_choice=choice, max_tokens=64)
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls"
    assert len(calls) == 1 and calls[0].type == "function"
    assert calls[0].function.name == "get_weather"
    args = json.loads(calls[0].function.arguments)
    jsonschema.validate(args, WEATHER_TOOL["function"]["parameters"])
    # streamed: the SDK's accumulated fragments give the same typed call
    stream = chat(oai, msgs, tools=[WEATHER_TOOL], tool_choice=choice, max_tokens=64, stream=True)
    name, arguments, ids = "", "", set()
    for chunk in stream:
        for c in chunk.choices:
            for t in c.delta.tool_calls or []:
                if t.id:
                    ids.add(t.id)
                if t.function and t.function.name:
                    name += t.function.name
                if t.function and t.function.arguments:
                    arguments += t.function.arguments
    assert name == "get_weather" and len(ids) == 1
    assert json.loads(arguments) == args


def test_response_format_json_schema(oai):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    r = chat(oai, [{"role": "user", "content": "Invent a person. Reply in JSON."}], max_tokens=64,
             response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_completions(oai, golden):
    case = golden["completion"]["fox"]
    r = oai.completions.create(model=MODEL_NAME, prompt=case["prompt"], max_tokens=8, temperature=0)
    assert r.usage.prompt_tokens == len(case["ids"])
    assert r.usage.completion_tokens == 8 and r.choices[0].finish_reason == "length"
    text = "".join(c.choices[0].text for c in oai.completions.create(
        model=MODEL_NAME, prompt=case["prompt"], max_tokens=8, temperature=0, stream=True) if c.choices)
    assert text == r.choices[0].text
    # token-id prompts are accepted as given
    r2 = oai.completions.create(model=MODEL_NAME, prompt=case["ids"], max_tokens=8, temperature=0)
    assert r2.usage.prompt_tokens == len(case["ids"]) and r2.choices[0].text == r.choices[0].text


# ---------------------------------------------------------------- OpenAI Responses API

def test_responses_api(oai, golden):
    case = golden["chat"]["hello"]
    r = oai.responses.create(model=MODEL_NAME, input=case["messages"][0]["content"], max_output_tokens=24,
                             temperature=0)
    assert r.status in ("completed", "incomplete") and r.output_text
    assert r.usage.input_tokens == len(case["ids"])
    events = list(oai.responses.create(model=MODEL_NAME, input=case["messages"][0]["content"],
                                       max_output_tokens=24, temperature=0, stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == r.output_text == events[-1].response.output_text


def test_responses_forced_function_call(oai):
    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL["function"]["parameters"]}
    r = oai.responses.create(model=MODEL_NAME, input="Weather in Rome?", tools=[tool],
                             tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=64,
                             temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), tool["parameters"])
    # the call and its output go back as input items
    r2 = oai.responses.create(model=MODEL_NAME, max_output_tokens=8, temperature=0, tools=[tool], input=[
        {"role": "user", "content": "Weather in Rome?"},
        {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather", "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "22 C, sunny"}])
    assert r2.status in ("completed", "incomplete")


# ---------------------------------------------------------------- Anthropic Messages
# (this SDK version no longer exposes temperature: it goes in extra_body, as the server accepts it)

def test_anthropic_messages(ant, golden):
    case = golden["chat"]["system"]
    system, user = case["messages"][0]["content"], case["messages"][1:]
    m = ant.messages.create(model=MODEL_NAME, max_tokens=24, system=system, messages=user, extra_body={"temperature": 0})
    assert m.role == "assistant" and m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    # Anthropic's arithmetic: prefix-cache reads are counted apart from input_tokens.
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == len(case["ids"])
    with ant.messages.stream(model=MODEL_NAME, max_tokens=24, system=system, messages=user, extra_body={"temperature": 0}) as s:
        streamed = "".join(s.text_stream)
        final = s.get_final_message()
    assert streamed == m.content[0].text == final.content[0].text
    assert final.usage.output_tokens == m.usage.output_tokens
    n = ant.messages.count_tokens(model=MODEL_NAME, system=system, messages=user)
    assert n.input_tokens == len(case["ids"])
    short = ant.messages.create(model=MODEL_NAME, max_tokens=3, messages=user, extra_body={"temperature": 0})
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 3


def test_anthropic_stop_sequence_reported(ant, golden):
    case = golden["chat"]["system"]
    system, user = case["messages"][0]["content"], case["messages"][1:]
    kw = dict(model=MODEL_NAME, max_tokens=32, system=system, messages=user, extra_body={"temperature": 0})
    full = ant.messages.create(**kw).content[0].text
    words = full.split()
    assert len(words) >= 3, full
    stop = " " + words[2]
    m = ant.messages.create(stop_sequences=[stop, "never-appears-xyz"], **kw)
    assert m.content[0].text == full[: full.index(stop)]
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    with ant.messages.stream(stop_sequences=[stop], **kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_anthropic_forced_tool_use(ant):
    tool = {"name": "get_weather", "description": "Get the weather",
            "input_schema": WEATHER_TOOL["function"]["parameters"]}
    kw = dict(model=MODEL_NAME, max_tokens=64, extra_body={"temperature": 0}, tools=[tool],
              tool_choice={"type": "tool", "name": "get_weather"},
              messages=[{"role": "user", "content": "Weather in Oslo?"}])
    m = ant.messages.create(**kw)
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(uses) == 1
    assert uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, tool["input_schema"])
    with ant.messages.stream(**kw) as s:
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["tool_use"] and final.content[0].input == uses[0].input
    # tool_result goes back in
    m2 = ant.messages.create(model=MODEL_NAME, max_tokens=8, tools=[tool], messages=[
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": uses[0].id, "name": "get_weather",
                                           "input": uses[0].input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "3 C"}]}])
    assert m2.type == "message"


# ---------------------------------------------------------------- errors

def test_errors_raise_sdk_exceptions(oai, ant, server):
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError):
        chat(oai, msgs, temperature=7)
    with pytest.raises(openai.BadRequestError):
        chat(oai, [{"role": "wizard", "content": "hi"}])
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model="gpt-9", messages=msgs)
    bad = openai.OpenAI(base_url=server.base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=MODEL_NAME, messages=msgs)
    with pytest.raises(openai.BadRequestError) as e:  # prompt longer than the context
        chat(oai, [{"role": "user", "content": "word " * (CTX + 100)}])
    assert "context" in str(e.value)
    with pytest.raises(anthropic.BadRequestError):
        ant.messages.create(model=MODEL_NAME, max_tokens=0, messages=msgs)
    with pytest.raises(anthropic.NotFoundError):
        ant.messages.create(model="claude-x", max_tokens=5, messages=msgs)
    bad_a = anthropic.Anthropic(base_url=server.base, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad_a.messages.create(model=MODEL_NAME, max_tokens=5, messages=msgs)
    status, body = server.post("/v1/chat/completions", b"x" * (2 << 20), raw=True)
    assert status == 413 and "error" in json.loads(body)
    assert server.alive()


def test_metrics_and_openapi(server):
    status, body = server.get("/metrics")
    text = body.decode()
    assert status == 200
    for name in ("rapid_requests_total", "rapid_prompt_tokens_total", "rapid_generation_tokens_total",
                 "rapid_time_to_first_token_seconds_bucket", "rapid_inter_token_latency_seconds_bucket",
                 "rapid_num_requests_waiting", "rapid_num_requests_running", "rapid_kv_cache_usage_perc",
                 "rapid_prefix_cache_hit_rate", "rapid_spec_decode_acceptance_rate"):
        assert name in text, name
    status, body = server.get("/openapi.json")
    spec = json.loads(body)
    assert status == 200 and spec["openapi"].startswith("3.")


def _metrics(server):
    """/metrics parsed by prometheus_client (the reference parser): {sample name: value}."""
    from prometheus_client.parser import text_string_to_metric_families
    status, body = server.get("/metrics")
    assert status == 200
    return {s.name: s.value for fam in text_string_to_metric_families(body.decode()) for s in fam.samples
            if s.labels.get("le") is None}


def _spec_counters(server):
    from conftest import API_KEY
    status, body = server.get("/v1/cache", headers={"Authorization": f"Bearer {API_KEY}"})
    assert status == 200
    return json.loads(body)["speculative"]


def test_metrics_say_per_request_whether_speculation_ran(oai, server):
    """Issue 22: a copy task (temperature 0, prompt lookup drafts from the prompt) must be counted
    as a drafted request, its depth and acceptance histograms must agree with the engine's own
    counters from /v1/cache (a separate path) for the same request."""
    src = "\n".join(f"def f{i}(x):\n    return x * {i} + {i * 7}\n" for i in range(12))
    before, spec_before = _metrics(server), _spec_counters(server)
    r = chat(oai, [{"role": "user", "content": "Repeat this code exactly:\n" + src}], max_tokens=96)
    after, spec_after = _metrics(server), _spec_counters(server)
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert d["rapid_spec_decode_requests_total"] == 1
    drafted = spec_after["drafted_tokens"] - spec_before["drafted_tokens"]
    accepted = spec_after["accepted_tokens"] - spec_before["accepted_tokens"]
    steps = spec_after["steps"] - spec_before["steps"]
    assert drafted > 0, "speculation never drafted on a copy task"
    assert r.usage.completion_tokens > 8
    assert d["rapid_spec_decode_requests_drafted_total"] == 1
    assert d["rapid_spec_decode_request_depth_count"] == 1
    assert d["rapid_spec_decode_request_depth_sum"] == pytest.approx(drafted / steps)
    assert d["rapid_spec_decode_request_acceptance_count"] == 1
    assert d["rapid_spec_decode_request_acceptance_sum"] == pytest.approx(accepted / drafted)
    # A request with nothing to draft from is counted, and not as drafted.
    before = _metrics(server)
    chat(oai, [{"role": "user", "content": "Hi"}], max_tokens=1)
    after = _metrics(server)
    assert after["rapid_spec_decode_requests_total"] - before["rapid_spec_decode_requests_total"] == 1
    assert after["rapid_spec_decode_requests_drafted_total"] == before["rapid_spec_decode_requests_drafted_total"]
