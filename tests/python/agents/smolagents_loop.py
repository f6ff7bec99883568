"""smolagents: a ToolCallingAgent with OpenAIServerModel (Chat Completions), streamed and not.
smolagents calls with tool_choice "required" every step; here the first step names get_weather
and later steps name final_answer, so a 135M model walks tool -> result -> final answer."""
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

import common


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city name
    """
    return common.get_weather(city)


class Steered(OpenAIServerModel):
    def _choice(self, kwargs):
        name = "final_answer" if common.calls else "get_weather"
        kwargs["tool_choice"] = {"type": "function", "function": {"name": name}}
        return kwargs

    def generate(self, messages, **kwargs):
        return super().generate(messages, **self._choice(kwargs))

    def generate_stream(self, messages, **kwargs):
        return super().generate_stream(messages, **self._choice(kwargs))


def loop(stream):
    model = Steered(model_id=common.MODEL, api_base=common.BASE + "/v1", api_key=common.KEY, temperature=0,
                    max_tokens=common.MAX_TOKENS)
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, stream_outputs=stream, verbosity_level=0)
    answer = agent.run(common.CITY_PROMPT)
    steps = [s for s in agent.memory.steps if type(s).__name__ == "ActionStep"]
    assert steps and steps[0].tool_calls and steps[0].tool_calls[0].name == "get_weather", steps
    assert common.REPORT in str(steps[0].observations), steps[0].observations
    assert steps[-1].is_final_answer, steps[-1]
    return str(answer)


common.run({"chat": lambda: loop(False), "chat_stream": lambda: loop(True)})
