"""pydantic-ai: an Agent with a plain-function tool over OpenAI Chat Completions, the OpenAI
Responses API and the Anthropic Messages API, run and run_stream. A capability forces the first
step to call the tool (tool_choice = [name]) and the next ones to answer (tool_choice "none")."""
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

import common


class ToolThenAnswer(AbstractCapability):
    def get_model_settings(self):
        return lambda ctx: {"tool_choice": ["get_weather"] if ctx.run_step <= 1 else "none"}


def make_model(api):
    if api == "anthropic":
        return AnthropicModel(common.MODEL, provider=AnthropicProvider(base_url=common.BASE, api_key=common.KEY))
    provider = OpenAIProvider(base_url=common.BASE + "/v1", api_key=common.KEY)
    return (OpenAIResponsesModel if api == "responses" else OpenAIChatModel)(common.MODEL, provider=provider)


def check(messages, output):
    parts = [p for m in messages for p in m.parts]
    assert any(isinstance(p, ToolCallPart) and p.tool_name == "get_weather" for p in parts), messages
    assert any(isinstance(p, ToolReturnPart) and common.REPORT in str(p.content) for p in parts), messages
    assert isinstance(output, str) and output.strip(), output
    return output


async def loop(api, stream):
    agent = Agent(make_model(api), tools=[common.get_weather], capabilities=[ToolThenAnswer()],
                  model_settings={"temperature": 0, "max_tokens": common.MAX_TOKENS})
    if not stream:
        r = await agent.run(common.CITY_PROMPT)
        return check(r.all_messages(), r.output)
    async with agent.run_stream(common.CITY_PROMPT) as r:
        output = await r.get_output()
        return check(r.all_messages(), output)


common.run({f"{api}{'_stream' if s else ''}": (lambda api=api, s=s: loop(api, s))
            for api in ("chat", "responses", "anthropic") for s in (False, True)})
