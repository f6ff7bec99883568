"""litellm: the OpenAI-format tool loop through litellm's `openai/` provider (Chat Completions),
its `anthropic/` provider (litellm translates to the Messages API), and litellm.responses; each
streamed (chunks rebuilt with stream_chunk_builder) and not. Turn one forces the tool by name,
turn two sends the result back with tool_choice "none"."""
import json

import litellm

import common

litellm.suppress_debug_info = True
FORCE = {"type": "function", "function": {"name": "get_weather"}}


def provider_args(provider):
    if provider == "anthropic":
        return {"model": "anthropic/" + common.MODEL, "api_base": common.BASE, "api_key": common.KEY}
    return {"model": "openai/" + common.MODEL, "api_base": common.BASE + "/v1", "api_key": common.KEY}


def complete(provider, stream, messages, tool_choice):
    kw = dict(provider_args(provider), messages=messages, tools=[common.OPENAI_TOOL], tool_choice=tool_choice,
              temperature=0, max_tokens=common.MAX_TOKENS, stream=stream)
    r = litellm.completion(**kw)
    if stream:
        r = litellm.stream_chunk_builder(list(r), messages=messages)
    return r.choices[0].message


def chat_loop(provider, stream):
    messages = [{"role": "user", "content": common.CITY_PROMPT}]
    msg = complete(provider, stream, messages, FORCE)
    assert msg.tool_calls, msg
    messages.append(msg.model_dump(exclude_none=True))
    for tc in msg.tool_calls:
        assert tc.function.name == "get_weather", tc
        out = common.get_weather(**json.loads(tc.function.arguments))
        messages.append({"role": "tool", "tool_call_id": tc.id, "content": out})
    final = complete(provider, stream, messages, "none")
    assert isinstance(final.content, str) and final.content.strip(), final
    return final.content


def responses_loop(stream):
    tool = {"type": "function", "name": "get_weather", "description": "Get the current weather for a city.",
            "parameters": common.WEATHER_SCHEMA}
    kw = dict(model="openai/" + common.MODEL, api_base=common.BASE + "/v1", api_key=common.KEY, tools=[tool],
              temperature=0, max_output_tokens=common.MAX_TOKENS)

    def create(inp, choice):
        if not stream:
            return litellm.responses(input=inp, tool_choice=choice, **kw)
        done = None
        for ev in litellm.responses(input=inp, tool_choice=choice, stream=True, **kw):
            if getattr(ev, "type", "") == "response.completed":
                done = ev.response
        assert done is not None, "no response.completed event"
        return done

    inp = [{"role": "user", "content": common.CITY_PROMPT}]
    r = create(inp, {"type": "function", "name": "get_weather"})
    fcs = [o for o in r.output if o.type == "function_call"]
    assert fcs, r.output
    for fc in fcs:
        inp.append({"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments})
        inp.append({"type": "function_call_output", "call_id": fc.call_id,
                    "output": common.get_weather(**json.loads(fc.arguments))})
    r2 = create(inp, "none")
    text = "".join(c.text for o in r2.output if o.type == "message" for c in o.content if c.type == "output_text")
    assert text.strip(), r2.output
    return text


common.run({
    "chat": lambda: chat_loop("openai", False),
    "chat_stream": lambda: chat_loop("openai", True),
    "anthropic": lambda: chat_loop("anthropic", False),
    "anthropic_stream": lambda: chat_loop("anthropic", True),
    "responses": lambda: responses_loop(False),
    "responses_stream": lambda: responses_loop(True),
})
