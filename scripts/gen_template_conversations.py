#!/usr/bin/env python3
"""Writes tests/golden/template/conversations.json: the conversations every shared chat template is
rendered over (run from the repository root, then scripts/gen_template_goldens.py)."""
import json
W = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
S = {"type": "function", "function": {"name": "search_web", "description": "Search the web.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5},
     "filters": {"type": "array", "items": {"type": "string"}}}, "required": ["query"]}}}
base = {"bos_token": "<s>", "eos_token": "</s>"}
def c(messages, agp=True, tools=None, **extra):
    d = dict(base); d["messages"] = messages; d["add_generation_prompt"] = agp
    if tools is not None: d["tools"] = tools
    d.update(extra); return d
call = lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
convs = {
 "plain": c([{"role": "user", "content": "Hello!"}]),
 "system": c([{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}]),
 "multi_turn": c([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
   {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke."},
   {"role": "assistant", "content": "Why did the chicken cross the road? To get to the other side."},
   {"role": "user", "content": "Another one."}]),
 "ends_assistant": c([{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}], agp=False),
 "tools_offered": c([{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "What's the weather in Paris?"}], tools=[W, S]),
 "tool_call_result": c([{"role": "user", "content": "What's the weather in Paris?"},
   {"role": "assistant", "content": "", "tool_calls": [call("a1b2c3d4e", "get_weather", {"city": "Paris", "unit": "celsius"})]},
   {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temperature\": 18, \"condition\": \"cloudy\"}"},
   {"role": "assistant", "content": "It is 18°C and cloudy in Paris."},
   {"role": "user", "content": "Thanks!"}], tools=[W, S]),
 "parallel_calls": c([{"role": "system", "content": "Use tools when needed."}, {"role": "user", "content": "Weather in Paris and Tokyo, and search for news."},
   {"role": "assistant", "content": "", "tool_calls": [call("f5g6h7i8j", "get_weather", {"city": "Paris"}), call("k9l0m1n2o", "get_weather", {"city": "Tokyo", "unit": "celsius"}),
     call("p3q4r5s6t", "search_web", {"query": "news today", "max_results": 3, "filters": ["recent"]})]},
   {"role": "tool", "tool_call_id": "f5g6h7i8j", "name": "get_weather", "content": "sunny, 21"},
   {"role": "tool", "tool_call_id": "k9l0m1n2o", "name": "get_weather", "content": "rainy, 12"},
   {"role": "tool", "tool_call_id": "p3q4r5s6t", "name": "search_web", "content": "[]"}], tools=[W, S]),
 "string_args": c([{"role": "user", "content": "Search for llamas"},
   {"role": "assistant", "content": "", "tool_calls": [call("u7v8w9x0y", "search_web", "{\"query\": \"llamas\"}")]},
   {"role": "tool", "tool_call_id": "u7v8w9x0y", "name": "search_web", "content": "Llamas are camelids."}], tools=[S]),
 "reasoning": c([{"role": "user", "content": "What is 17*3?"},
   {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51, simple multiplication."},
   {"role": "user", "content": "And 17*4?"}]),
 "thinking_on": c([{"role": "user", "content": "Solve x+1=3."}], enable_thinking=True),
 "thinking_off": c([{"role": "user", "content": "Solve x+1=3."}], enable_thinking=False),
 "content_parts": c([{"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
   {"role": "user", "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}]},
   {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
   {"role": "user", "content": [{"type": "text", "text": "Go on."}]}]),
 "unicode": c([{"role": "system", "content": "Réponds en français. 日本語もOK 🚀"},
   {"role": "user", "content": "  héllo 世界 — \"quoted\" 'single' \\ back\ttab\nnew line  "}]),
 "developer_effort": c([{"role": "developer", "content": "Follow the style guide."}, {"role": "user", "content": "Write a haiku."}], reasoning_effort="high"),
 "no_gen_prompt_tools": c([{"role": "user", "content": "ping"}], agp=False, tools=[W]),
 # Tool loops as agent clients send them back (issue #14): OpenAI's null or absent assistant content
 # beside tool_calls (transformers drops null keys, so templates see no content), tool results as
 # content parts, `name` fields, the developer role, reasoning from the earlier turn.
 "loop_null_content": c([{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
   {"role": "assistant", "content": None, "tool_calls": [call("call_abc123", "get_weather", "{\"city\": \"Paris\"}")]},
   {"role": "tool", "tool_call_id": "call_abc123", "content": "18C, cloudy"}], tools=[W, S]),
 "loop_absent_content": c([{"role": "user", "content": "Weather in Paris?"},
   {"role": "assistant", "tool_calls": [call("call_abc123", "get_weather", {"city": "Paris"})]},
   {"role": "tool", "tool_call_id": "call_abc123", "name": "get_weather", "content": "18C, cloudy"}], tools=[W]),
 "loop_empty_content_final": c([{"role": "user", "content": "Weather in Paris?"},
   {"role": "assistant", "content": "", "tool_calls": [call("call_abc123", "get_weather", {"city": "Paris"})]},
   {"role": "tool", "tool_call_id": "call_abc123", "content": "18C, cloudy"},
   {"role": "assistant", "content": "It is 18C and cloudy."}, {"role": "user", "content": "And Tokyo?"}], tools=[W]),
 "loop_tool_parts": c([{"role": "user", "content": [{"type": "text", "text": "Search llamas"}]},
   {"role": "assistant", "content": None, "tool_calls": [call("call_s1", "search_web", "{\"query\": \"llamas\"}")]},
   {"role": "tool", "tool_call_id": "call_s1", "content": [{"type": "text", "text": "Llamas are camelids."}]}], tools=[S]),
 "loop_names_developer": c([{"role": "developer", "content": "Be terse."}, {"role": "user", "name": "alice", "content": "Weather?"},
   {"role": "assistant", "content": None, "tool_calls": [call("call_w", "get_weather", {"city": "Oslo"})]},
   {"role": "tool", "tool_call_id": "call_w", "name": "get_weather", "content": "-3C"}], tools=[W]),
 "loop_reasoning": c([{"role": "user", "content": "Weather in Paris?"},
   {"role": "assistant", "content": None, "reasoning_content": "I should call get_weather.",
    "tool_calls": [call("call_r", "get_weather", {"city": "Paris"})]},
   {"role": "tool", "tool_call_id": "call_r", "content": "18C"}], tools=[W]),
 "loop_null_fields": c([{"role": "user", "content": "hi", "name": None},
   {"role": "assistant", "content": "hello", "tool_calls": None, "refusal": None}, {"role": "user", "content": "bye"}]),
}


def server_normalized(msgs):
    """What an OpenAI-compatible server hands the template for a client's conversation, as vLLM
    does it: null/absent content -> "", content parts joined with newlines, tool-call arguments
    parsed into objects; developer -> system (templates know no developer role); null fields dropped."""
    out = []
    for m in msgs:
        m = {k: v for k, v in m.items() if v is not None and k != "refusal"}
        if m["role"] == "developer":
            m["role"] = "system"
        c = m.get("content")
        m["content"] = "" if c is None else c if isinstance(c, str) else "\n".join(p["text"] for p in c)
        calls = []
        for tc in m.get("tool_calls", []):
            a = tc["function"]["arguments"]
            calls.append({"id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"],
                          "arguments": json.loads(a) if isinstance(a, str) else a}})
        if calls:
            m["tool_calls"] = calls
        out.append(m)
    return out


# The same loops after the server's normalization (tests/server_test.cpp renders them through
# normalize_openai_messages and compares): every template must accept these as it accepts plain chats.
for name in [k for k in convs if k.startswith("loop_")]:
    convs["normalized_" + name] = dict(convs[name], messages=server_normalized(convs[name]["messages"]))
json.dump(convs, open("tests/golden/template/conversations.json", "w"), ensure_ascii=False, indent=1)
