"""langchain-openai: ChatOpenAI with bind_tools over Chat Completions and (use_responses_api)
the Responses API, invoke and stream. Turn one binds tool_choice to the tool's name; the
AIMessage's tool_calls run, a ToolMessage goes back, turn two binds tool_choice "none"."""
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import common

weather = tool(common.get_weather)


def call(llm, messages, stream):
    if not stream:
        return llm.invoke(messages)
    msg = None
    for chunk in llm.stream(messages):
        msg = chunk if msg is None else msg + chunk
    return msg


def text_of(msg):
    if isinstance(msg.content, str):
        return msg.content
    return "".join(b.get("text", "") for b in msg.content if isinstance(b, dict))


def loop(responses, stream):
    llm = ChatOpenAI(model=common.MODEL, base_url=common.BASE + "/v1", api_key=common.KEY, temperature=0,
                     max_tokens=common.MAX_TOKENS, max_retries=0, use_responses_api=responses)
    messages = [HumanMessage(common.CITY_PROMPT)]
    ai = call(llm.bind_tools([weather], tool_choice="get_weather"), messages, stream)
    assert ai.tool_calls, ai
    messages.append(ai)
    for tc in ai.tool_calls:
        assert tc["name"] == "get_weather", tc
        messages.append(ToolMessage(weather.invoke(tc["args"]), tool_call_id=tc["id"]))
    final = call(llm.bind_tools([weather], tool_choice="none"), messages, stream)
    assert text_of(final).strip(), final
    return text_of(final)


common.run({
    "chat": lambda: loop(False, False),
    "chat_stream": lambda: loop(False, True),
    "responses": lambda: loop(True, False),
    "responses_stream": lambda: loop(True, True),
})
