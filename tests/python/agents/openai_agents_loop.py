"""openai-agents (the OpenAI Agents SDK): an Agent with a function tool over Chat Completions and
over the Responses API, run and run_streamed. The first model turn is forced to call the tool
(tool_choice = its name); once the tool ran, a hook sets tool_choice "none" so the second turn
answers (a 135M model would otherwise keep calling)."""
import dataclasses

from agents import (Agent, AgentHooks, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner,
                    function_tool, set_tracing_disabled)
from openai import AsyncOpenAI

import common

set_tracing_disabled(True)


class AnswerAfterTool(AgentHooks):
    async def on_tool_end(self, context, agent, tool, result):
        agent.model_settings = dataclasses.replace(agent.model_settings, tool_choice="none")


def make_agent(responses):
    client = AsyncOpenAI(base_url=common.BASE + "/v1", api_key=common.KEY, max_retries=0)
    model = (OpenAIResponsesModel if responses else OpenAIChatCompletionsModel)(model=common.MODEL, openai_client=client)
    return Agent(name="weather", instructions="You answer weather questions with the get_weather tool.", model=model,
                 tools=[function_tool(common.get_weather)], hooks=AnswerAfterTool(), reset_tool_choice=False,
                 model_settings=ModelSettings(tool_choice="get_weather", temperature=0, max_tokens=common.MAX_TOKENS))


def check(result):
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_output_item"], kinds
    assert kinds[-1] == "message_output_item", kinds
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.final_output
    return result.final_output


async def loop(responses, stream):
    agent = make_agent(responses)
    if not stream:
        return check(await Runner.run(agent, common.CITY_PROMPT, max_turns=4))
    result = Runner.run_streamed(agent, common.CITY_PROMPT, max_turns=4)
    events = 0
    async for _ in result.stream_events():
        events += 1
    assert events > 0
    return check(result)


common.run({
    "chat": lambda: loop(False, False),
    "chat_stream": lambda: loop(False, True),
    "responses": lambda: loop(True, False),
    "responses_stream": lambda: loop(True, True),
})
