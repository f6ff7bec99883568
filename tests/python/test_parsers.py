"""Output parsers, end to end.

1. The golden raw outputs (tests/golden/parsers, from scripts/make_parser_goldens.py) are what the
   models' real chat templates write for an assistant turn with the same tool calls: each template
   in $RAPID_FIXTURES_DIR/chat-templates is rendered with jinja2 (set up like transformers) and
   must contain the golden text of the call.
2. `rapid-mlx parse` on every golden case, fed in random chunks, prints the expected JSON.

The binary: $RAPID_MLX_BIN, else build/rapid-mlx, else build-parse/rapid-mlx."""
import glob
import json
import os
import random
import subprocess

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.environ.get("RAPID_FIXTURES_DIR", os.path.join(ROOT, "..", "shared", "fixtures"))
GOLD = os.path.join(ROOT, "tests", "golden", "parsers")


def _env():
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    return env


def _render(template_file, calls, content="", string_args=False):
    with open(os.path.join(FIX, "chat-templates", template_file), encoding="utf-8") as f:
        src = f.read()
    with open(os.path.join(GOLD, "tools.json"), encoding="utf-8") as f:
        tools = json.load(f)
    tool_calls = [{"id": "call_%d" % i if "mistral" not in template_file.lower() and "devstral" not in template_file.lower() else "abcDEF12%d" % i,
                   "type": "function", "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False) if string_args else a}}
                  for i, (n, a) in enumerate(calls)]
    messages = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": content, "tool_calls": tool_calls},
                {"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "sunny"},
                {"role": "user", "content": "thanks"}]
    return _env().from_string(src).render(messages=messages, tools=tools, add_generation_prompt=True,
                                          bos_token="<s>", eos_token="</s>",
                                          functions=json.dumps([t["function"] for t in tools], indent=2),
                                          datetime="Sun, 29 Nov 2026")


ONE = [("get_weather", {"city": "Paris", "unit": "celsius"})]
PAR = [("get_weather", {"city": "Paris", "days": 3}), ("get_time", {"timezone": "Europe/Paris"})]

# (template, golden format, golden case, calls): the golden text must appear in the rendering.
TEMPLATE_CASES = [
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", "one_call", ONE),
    ("Qwen-Qwen3-0.6B.jinja", "hermes", "parallel", PAR),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", "one_call", ONE),
    ("Qwen3-Coder.jinja", "qwen3_coder", "parallel", PAR),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek_v3", "parallel", PAR),
    ("deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31", "parallel", PAR),
    ("deepseek-ai-DeepSeek-V3.2.jinja", "deepseek_v32", "parallel", PAR),
    ("moonshotai-Kimi-K2.jinja", "kimi_k2", "parallel", PAR),
    ("GLM-4.6.jinja", "glm45", "parallel", PAR),
    ("MiniMax-M2.jinja", "minimax_m2", "parallel", PAR),
    ("MiniMax-M1.jinja", "minimax", "parallel", PAR),
    ("unsloth-mistral-Devstral-Small-2507.jinja", "mistral", "parallel", PAR),
    ("meetkai-functionary-medium-v3.1.jinja", "functionary_v3_1", "parallel", PAR),
    ("meetkai-functionary-medium-v3.2.jinja", "functionary_v3_2", "parallel", PAR),
    ("fireworks-ai-llama-3-firefunction-v2.jinja", "firefunction_v2", "parallel", PAR),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command_r7b", "parallel", PAR),
    ("ByteDance-Seed-OSS.jinja", "seed_oss", "parallel", PAR),
    ("google-gemma-4-31B-it.jinja", "gemma4", "parallel", PAR),
    ("GigaChat3-10B-A1.8B.jinja", "gigachat3", "one_call", ONE),
    ("ibm-granite-granite-4.0.jinja", "hermes", "one_call", ONE),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json", "one_call", ONE),
]


@pytest.mark.parametrize("template,fmt,case,calls", TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_golden_call_text_is_what_the_template_writes(template, fmt, case, calls):
    with open(os.path.join(GOLD, fmt, case + ".txt"), encoding="utf-8") as f:
        golden = f.read()
    # Functionary v3.2's template only accepts arguments already serialised.
    rendered = _render(template, calls, string_args=fmt == "functionary_v3_2")
    if fmt == "functionary_v3_2":
        golden = ">>>" + golden  # the generation prompt wrote the first ">>>"
    assert golden in rendered, "golden:\n%r\nrendered:\n%r" % (golden, rendered)


def _binary():
    for c in (os.environ.get("RAPID_MLX_BIN"), os.path.join(ROOT, "build", "rapid-mlx"),
              os.path.join(ROOT, "build-parse", "rapid-mlx")):
        if c and os.path.exists(c):
            return c
    pytest.skip("rapid-mlx binary not built")


def _golden_cases():
    for txt in sorted(glob.glob(os.path.join(GOLD, "*", "*.txt"))):
        yield os.path.relpath(txt, GOLD)[:-4]


@pytest.mark.parametrize("case", list(_golden_cases()))
def test_cli_parse_matches_golden(case):
    binary = _binary()
    with open(os.path.join(GOLD, case + ".json"), encoding="utf-8") as f:
        exp = json.load(f)
    opts = exp["options"]
    cmd = [binary, "parse", "--parser", opts["parser"], "--tools", os.path.join(GOLD, "tools.json"),
           "--file", os.path.join(GOLD, case + ".txt"), "--chunks", str(random.Random(case).randint(2, 64)),
           "--seed", "5"]
    if opts.get("reasoning_parser"):
        cmd += ["--reasoning-parser", opts["reasoning_parser"]]
    if opts.get("starts_in_reasoning"):
        cmd += ["--starts-in-reasoning"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    assert out["content"] == exp["content"]
    assert out["reasoning_content"] == exp["reasoning_content"]
    assert [(c["name"], c["arguments"]) for c in out["tool_calls"]] == [(c["name"], c["arguments"]) for c in exp["tool_calls"]]
    for got, want in zip(out["tool_calls"], exp["tool_calls"]):
        assert got["id"] and (got["id"] == want["id"] if "id" in want else True)
