"""Protocol details agents depend on (issue #14), on the real server with SmolLM2-135M, checked with
the official anthropic / openai SDKs (their own response parsing is an independent check of shapes).

Oracles: prompt token counts from Hugging Face transformers (tests/golden/server/); the prefill
prompt rendered independently with jinja2 from the template stored in the GGUF (read here by a
minimal GGUF reader), cut after the final message as transformers' continue_final_message does,
and continued by the plain completions endpoint token by token; structured output validated with
jsonschema and the SDK's pydantic parsing."""
import json
import os
import time

import anthropic
import jinja2
import jinja2.ext
import jsonschema
import openai
import pydantic
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import API_KEY, CTX, MODEL, MODEL_NAME, launch, need_server, stop
from gguf_meta import read_metadata

T0 = {"temperature": 0}


# ---------------------------------------------------------------- oracles

def render_continue_final(messages):
    """The chat rendered by jinja2 as transformers does (trim_blocks, lstrip_blocks), without a
    generation prompt, cut right after the final message's text (continue_final_message)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    tpl = env.from_string(read_metadata(MODEL, {"tokenizer.chat_template"})["tokenizer.chat_template"])
    out = tpl.render(messages=messages, add_generation_prompt=False, bos_token="", eos_token="")
    final = messages[-1]["content"]
    return out[: out.rindex(final) + len(final)]


def usage_total(u):
    return u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)


# ---------------------------------------------------------------- Anthropic accounting

def test_anthropic_usage_excludes_cache_reads(ant, oai, golden):
    """input_tokens + cache_read + cache_creation = the prompt (transformers' count); a repeated
    prompt is a cache hit; message_start carries the same real figures as the final usage."""
    case = golden["chat"]["multi_turn"]
    n = len(case["ids"])
    kw = dict(model=MODEL_NAME, max_tokens=4, messages=case["messages"], extra_body=T0)
    first = ant.messages.create(**kw)
    second = ant.messages.create(**kw)
    for m in (first, second):
        assert usage_total(m.usage) == n
        assert m.usage.cache_creation_input_tokens == 0
    assert second.usage.cache_read_input_tokens > 0 and second.usage.input_tokens < n
    # The OpenAI view of the same prompt agrees: cached_tokens is the same hit.
    r = oai.chat.completions.create(model=MODEL_NAME, messages=case["messages"], max_tokens=4, temperature=0)
    assert r.usage.prompt_tokens == n
    assert r.usage.prompt_tokens_details.cached_tokens == second.usage.cache_read_input_tokens

    with ant.messages.stream(**kw) as s:
        start = None
        for ev in s:
            if ev.type == "message_start":
                start = ev.message.usage
        final = s.get_final_message()
    assert start is not None
    assert usage_total(start) == n
    assert start.cache_read_input_tokens == second.usage.cache_read_input_tokens
    assert start.input_tokens == final.usage.input_tokens
    assert final.usage.output_tokens == second.usage.output_tokens


def test_anthropic_prefill_is_continued_token_by_token(ant, oai, golden):
    """A final assistant message is continued, not closed: the server's prompt equals the
    template rendered by jinja2 and cut after the prefill, and the greedy continuation equals the
    plain completion of that text, token for token."""
    msgs = golden["chat"]["hello"]["messages"] + [{"role": "assistant", "content": "Hello! My name is"}]
    text = render_continue_final(msgs)
    assert text.endswith("<|im_start|>assistant\nHello! My name is")
    plain = oai.completions.create(model=MODEL_NAME, prompt=text, max_tokens=12, temperature=0, logprobs=0)
    # The chat prompt has no BOS of its own (add_special_tokens=False); count the completion's
    # prompt the same way by comparing with the transformers-counted prefix.
    prefix_ids = golden["chat"]["hello"]["ids"]
    m = ant.messages.create(model=MODEL_NAME, max_tokens=12, messages=msgs, extra_body=T0)
    assert usage_total(m.usage) == plain.usage.prompt_tokens
    assert usage_total(m.usage) > len(prefix_ids)
    assert ant.messages.count_tokens(model=MODEL_NAME, messages=msgs).input_tokens == usage_total(m.usage)
    assert m.content[0].text == plain.choices[0].text
    assert m.usage.output_tokens == plain.usage.completion_tokens
    # Token by token: the chat endpoint with vLLM's continue_final_message gives the same tokens.
    c = oai.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=12, temperature=0, logprobs=True,
                                    extra_body={"continue_final_message": True, "add_generation_prompt": False})
    assert [t.token for t in c.choices[0].logprobs.content] == plain.choices[0].logprobs.tokens
    # Streaming continues the same way.
    with ant.messages.stream(model=MODEL_NAME, max_tokens=12, messages=msgs, extra_body=T0) as s:
        assert "".join(s.text_stream) == m.content[0].text
    # Without the prefill the model answers in a fresh turn: a different prompt.
    fresh = ant.messages.create(model=MODEL_NAME, max_tokens=1, messages=msgs[:-1], extra_body=T0)
    assert usage_total(fresh.usage) == len(prefix_ids)


class Reply(pydantic.BaseModel):
    city: str
    population: int


SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                           "population": {"type": "integer"}},
          "required": ["city", "population"], "additionalProperties": False}


def test_anthropic_structured_output_enforced(ant):
    msgs = [{"role": "user", "content": "Name a large city and its population as JSON."}]
    m = ant.messages.create(model=MODEL_NAME, max_tokens=60, messages=msgs, extra_body=T0,
                            output_config={"format": {"type": "json_schema", "schema": SCHEMA}})
    assert m.stop_reason == "end_turn"
    jsonschema.validate(json.loads(m.content[0].text), SCHEMA)
    parsed = ant.messages.parse(model=MODEL_NAME, max_tokens=60, messages=msgs, extra_body=T0, output_format=Reply)
    assert isinstance(parsed.parsed_output, Reply)
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.messages.create(model=MODEL_NAME, max_tokens=8, messages=msgs,
                            extra_body={"output_config": {"format": {"type": "regex", "pattern": "a+"}}})
    assert "output_config.format.type" in str(e.value)


def test_anthropic_prompt_too_long_wording(ant):
    msgs = [{"role": "user", "content": "word " * (CTX + 100)}]
    n = ant.messages.count_tokens(model=MODEL_NAME, messages=msgs).input_tokens
    assert n > CTX
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.messages.create(model=MODEL_NAME, max_tokens=8, messages=msgs)
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert e.value.body["error"]["message"] == f"prompt is too long: {n} tokens > {CTX - 1} maximum"


@pytest.fixture(scope="module")
def alias_server(tmp_path_factory):
    need_server()
    d = tmp_path_factory.mktemp("alias")
    srv = launch(["--no-persist-cache", "--model-alias", f"claude-*-haiku-*={MODEL_NAME}",
                  "--model-alias", f"gpt-4?={MODEL_NAME}"], str(d / "serve.log"))
    yield srv
    stop(srv)


def test_model_alias_serves_background_model_names(alias_server):
    a = anthropic.Anthropic(base_url=alias_server.base, api_key=API_KEY, max_retries=0, timeout=120)
    m = a.messages.create(model="claude-3-5-haiku-20241022", max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    assert m.usage.output_tokens > 0
    with pytest.raises(anthropic.NotFoundError):
        a.messages.create(model="claude-opus-4-1", max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    o = openai.OpenAI(base_url=alias_server.base + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
    assert o.chat.completions.create(model="gpt-4o", max_tokens=2, messages=[{"role": "user", "content": "Hi"}]).choices
    with pytest.raises(openai.NotFoundError):
        o.chat.completions.create(model="gpt-4-turbo", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])


def test_model_alias_must_name_the_served_model(tmp_path):
    import subprocess
    from conftest import BIN
    need_server()
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--served-model-name", MODEL_NAME, "--model-alias",
                        "claude-*=other"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "--model-alias" in r.stderr


# ---------------------------------------------------------------- OpenAI details

def test_openai_fingerprint_and_created(oai):
    msgs = [{"role": "user", "content": "Hi"}]
    now = time.time()
    a = oai.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=2, temperature=0)
    b = oai.chat.completions.create(model=MODEL_NAME, messages=msgs, max_tokens=2, temperature=0, stream=True)
    chunks = list(b)
    assert a.system_fingerprint and a.system_fingerprint.startswith("fp_")
    assert {c.system_fingerprint for c in chunks} == {a.system_fingerprint}
    assert abs(a.created - now) < 60 and abs(chunks[0].created - now) < 60
    c = oai.completions.create(model=MODEL_NAME, prompt="Hi", max_tokens=2)
    assert c.system_fingerprint == a.system_fingerprint
    created = oai.models.retrieve(MODEL_NAME).created
    assert 0 < created <= now + 1


def test_responses_truncation_instructions_and_errors(oai):
    r = oai.responses.create(model=MODEL_NAME, instructions="You are terse.", input="Tell me a long story.",
                             max_output_tokens=3, temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[-1].status == "incomplete"
    assert r.usage.output_tokens == 3
    assert r.instructions == "You are terse."
    # instructions are the system message: the same prompt as chat with that system message.
    chat = oai.chat.completions.create(model=MODEL_NAME, max_tokens=1, messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me a long story."}])
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    events = list(oai.responses.create(model=MODEL_NAME, input="Tell me a long story.", max_output_tokens=3,
                                       temperature=0, stream=True))
    done = [e for e in events if e.type == "response.output_item.done"]
    assert done and done[-1].item.status == "incomplete"
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.output[-1].status == "incomplete"
    full = oai.responses.create(model=MODEL_NAME, input="Say hi.", max_output_tokens=200, temperature=0)
    assert full.status == "completed" and all(i.status == "completed" for i in full.output)
    # Nothing is stored, so a previous_response_id is refused (not silently ignored).
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=MODEL_NAME, input="more", previous_response_id=r.id)
    assert e.value.body["param"] == "previous_response_id"
