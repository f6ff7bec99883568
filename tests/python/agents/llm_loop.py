"""llm (Simon Willison's CLI/library): an OpenAI-compatible model registered through
extra-openai-models.yaml, model.chain() with a Python function tool (llm runs the tool and sends
the result back itself), streamed and not. llm has no tool_choice option, so its request builder
is wrapped: the first request names the tool, the one carrying the tool result says "none"."""
import os
import tempfile

user_dir = tempfile.mkdtemp(prefix="llm-user-")
os.environ["LLM_USER_PATH"] = user_dir

import common  # noqa: E402

with open(os.path.join(user_dir, "extra-openai-models.yaml"), "w") as f:
    f.write(f"- model_id: rapid-test\n  model_name: {common.MODEL}\n  api_base: {common.BASE}/v1\n"
            f"  api_key_name: rapid\n  supports_tools: true\n")

import llm  # noqa: E402


def loop(stream):
    model = llm.get_model("rapid-test")
    build = model.build_kwargs

    def steered(prompt, stream):
        kw = build(prompt, stream)
        if prompt.tools:
            kw["tool_choice"] = "none" if prompt.tool_results else {"type": "function", "function": {"name": "get_weather"}}
        return kw

    model.build_kwargs = steered
    chain = model.chain(common.CITY_PROMPT, tools=[common.get_weather], key=common.KEY, stream=stream,
                        options={"temperature": 0, "max_tokens": common.MAX_TOKENS})
    text = "".join(chain) if stream else chain.text()
    responses = list(chain.responses())
    assert len(responses) == 2, responses
    assert responses[0].tool_calls() and responses[0].tool_calls()[0].name == "get_weather"
    assert text.strip(), text
    return text


common.run({"chat": lambda: loop(False), "chat_stream": lambda: loop(True)})
