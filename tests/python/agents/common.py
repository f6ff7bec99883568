"""Shared by the agent-client scripts (run under .venv-agents by tests/python/test_agents.py): the
server to talk to, the tool every loop calls, and the result line the test reads.

Each script runs its loops (tool call -> tool result -> answer) and prints one JSON line:
{loop: {"ok": true, "calls": [cities the tool was called with], "answer": final text} or
{"ok": false, "error": traceback}}."""
import asyncio
import inspect
import json
import os
import sys
import traceback

BASE = os.environ["RAPID_BASE"]          # http://127.0.0.1:PORT
KEY = os.environ["RAPID_KEY"]
MODEL = os.environ["RAPID_MODEL"]
MAX_TOKENS = 48
CITY_PROMPT = "What is the weather in Paris? Use the get_weather tool."
REPORT = "18 C and sunny"

calls = []


def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city name
    """
    calls.append(city)
    return f"{REPORT} in {city}"


WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "description": "the city name"}},
                  "required": ["city"]}
OPENAI_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
                                                "parameters": WEATHER_SCHEMA}}


def run(loops):
    results = {}
    only = set(sys.argv[1:])
    for name, fn in loops.items():
        if only and name not in only:
            continue
        calls.clear()
        try:
            answer = fn()
            if inspect.iscoroutine(answer):
                answer = asyncio.run(answer)
            results[name] = {"ok": True, "calls": list(calls), "answer": answer}
        except BaseException:  # noqa: BLE001 - every failure is reported to the test
            results[name] = {"ok": False, "calls": list(calls), "error": traceback.format_exc()[-4000:]}
    print("\nRAPID_RESULT " + json.dumps(results), flush=True)
