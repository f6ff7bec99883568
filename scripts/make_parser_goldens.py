#!/usr/bin/env python3
"""Writes tests/golden/parsers/<format>/<case>.{txt,json}: raw model outputs as each model's chat
template renders an assistant turn (encoders below restate the templates in
$RAPID_FIXTURES_DIR/chat-templates and the formats documented by vLLM/SGLang), with the expected
parse. The expected side is the encoder's input, so it does not depend on our C++ parser.

Run: .venv/bin/python scripts/make_parser_goldens.py
"""
import json
import os
import shutil

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "parsers")

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
         "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time",
     "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search documents",
     "parameters": {"type": "object", "properties": {
         "query": {"type": "string"}, "filters": {"type": "object"}, "lang": {"type": "string"},
         "exact": {"type": "boolean"}}}}},
]

ONE = [("get_weather", {"city": "Paris", "unit": "celsius"})]
PAR = [("get_weather", {"city": "Paris", "days": 3}), ("get_time", {"timezone": "Europe/Paris"})]
NESTED = [("search", {"query": 'say "hi"\n\tnow \\ done', "filters": {"tags": ["a", "b"], "limit": 5, "exact": True},
                      "lang": "日本語 🚀 café"})]
PREFACE = "Let me check the weather for you."
PLAIN = "The capital of France is Paris. Note: a < b, x > y, [1, 2] and {ok}; <tool> is not a tag."
BROKEN_ARGS = '{"city": "Par'


def dumps(v):
    return json.dumps(v, ensure_ascii=False)


def pyrepr(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(pyrepr(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(repr(k) + ": " + pyrepr(x) for k, x in v.items()) + "}"
    return repr(v)


def gemma_val(v, q):
    if isinstance(v, str):
        return q + v + q
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(k + ":" + gemma_val(x, q) for k, x in sorted(v.items())) + "}"
    if isinstance(v, list):
        return "[" + ",".join(gemma_val(x, q) for x in v) + "]"
    return json.dumps(v)


def xml_val(v, py_bool=False):
    if isinstance(v, str):
        return v
    if isinstance(v, bool) and py_bool:
        return "True" if v else "False"  # Jinja's `value | string` on a bool
    return dumps(v)


# --- encoders: (calls, broken) -> text of the calls part; broken=True writes BROKEN_ARGS ---------

def enc_json_obj(key="arguments"):
    def f(n, a, broken=False):
        return '{"name": "%s", "%s": %s}' % (n, key, BROKEN_ARGS if broken else dumps(a))
    return f


def E_hermes(calls, broken=False):
    return "\n".join("<tool_call>\n" + enc_json_obj()(n, a, broken) + "\n</tool_call>" for n, a in calls)


def E_qwen3_coder(calls, broken=False):
    out = []
    for n, a in calls:
        s = "<tool_call>\n<function=%s>\n" % n
        for k, v in a.items():
            s += "<parameter=%s>\n%s\n</parameter>\n" % (k, xml_val(v, py_bool=True))
        out.append(s + "</function>\n</tool_call>")
    return "\n".join(out)


def E_llama3_json(calls, broken=False):
    return "; ".join(enc_json_obj("parameters")(n, a, broken) for n, a in calls)


def E_pythonic(calls, broken=False):
    return "[" + ", ".join("%s(%s)" % (n, ", ".join("%s=%s" % (k, pyrepr(v)) for k, v in a.items())) for n, a in calls) + "]"


def E_llama4(calls, broken=False):
    return "<|python_start|>" + E_pythonic(calls) + "<|python_end|>"


def E_mistral(calls, broken=False):
    return "".join("[TOOL_CALLS]%s[ARGS]%s" % (n, BROKEN_ARGS if broken else dumps(a)) for n, a in calls)


def E_mistral_v7(calls, broken=False):
    return "[TOOL_CALLS][" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_deepseek_v3(calls, broken=False):
    return "<｜tool▁calls▁begin｜>" + "\n".join(
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>%s\n```json\n%s\n```<｜tool▁call▁end｜>" % (n, BROKEN_ARGS if broken else dumps(a))
        for n, a in calls) + "<｜tool▁calls▁end｜>"


def E_deepseek_v31(calls, broken=False):
    return "<｜tool▁calls▁begin｜>" + "".join(
        "<｜tool▁call▁begin｜>%s<｜tool▁sep｜>%s<｜tool▁call▁end｜>" % (n, BROKEN_ARGS if broken else dumps(a))
        for n, a in calls) + "<｜tool▁calls▁end｜>"


def E_deepseek_v32(calls, broken=False):
    s = "<｜DSML｜function_calls>\n"
    for n, a in calls:
        s += '<｜DSML｜invoke name="%s">\n' % n
        for k, v in a.items():
            if isinstance(v, str):
                s += '<｜DSML｜parameter name="%s" string="true">%s</｜DSML｜parameter>\n' % (k, v)
            else:
                s += '<｜DSML｜parameter name="%s" string="false">%s</｜DSML｜parameter>\n' % (k, dumps(v))
        s += "</｜DSML｜invoke>\n"
    return s + "</｜DSML｜function_calls>"


def kimi_ids(calls):
    return ["functions.%s:%d" % (n, i) for i, (n, _) in enumerate(calls)]


def E_kimi_k2(calls, broken=False):
    ids = kimi_ids(calls)
    return "<|tool_calls_section_begin|>" + "".join(
        "<|tool_call_begin|>%s<|tool_call_argument_begin|>%s<|tool_call_end|>" % (i, BROKEN_ARGS if broken else dumps(a))
        for i, (n, a) in zip(ids, calls)) + "<|tool_calls_section_end|>"


def E_glm45(calls, broken=False):
    out = []
    for n, a in calls:
        s = "<tool_call>%s\n" % n
        for k, v in a.items():
            s += "<arg_key>%s</arg_key>\n<arg_value>%s</arg_value>\n" % (k, xml_val(v))
        out.append(s + "</tool_call>")
    return "\n".join(out)


def E_glm47(calls, broken=False):
    return "".join("<tool_call>%s%s</tool_call>" % (n, "".join(
        "<arg_key>%s</arg_key><arg_value>%s</arg_value>" % (k, xml_val(v)) for k, v in a.items())) for n, a in calls)


def E_minimax_m2(calls, broken=False):
    s = "<minimax:tool_call>\n"
    for n, a in calls:
        s += '<invoke name="%s">\n' % n
        for k, v in a.items():
            s += '<parameter name="%s">%s</parameter>\n' % (k, xml_val(v))
        s += "</invoke>\n"
    return s + "</minimax:tool_call>"


def E_minimax(calls, broken=False):
    return "<tool_calls>\n" + "".join(enc_json_obj()(n, a, broken) + "\n" for n, a in calls) + "</tool_calls>"


def E_granite(calls, broken=False):
    return "<|tool_call|>[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_granite20b(calls, broken=False):
    return "\n".join("<function_call> " + enc_json_obj()(n, a, broken) for n, a in calls)


def E_functionary31(calls, broken=False):
    return "".join("<function=%s>%s</function>" % (n, BROKEN_ARGS if broken else dumps(a)) for n, a in calls)


def E_functionary32(calls, broken=False):
    # The prompt ends with ">>>": the first recipient has no marker in the output.
    return ">>>".join("%s\n%s" % (n, BROKEN_ARGS if broken else dumps(a)) for n, a in calls)


def E_firefunction(calls, broken=False):
    return " functools[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_xlam(calls, broken=False):
    return "[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_phi4(calls, broken=False):
    return "functools[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_internlm(calls, broken=False):
    return "".join("<|action_start|><|plugin|>\n" + enc_json_obj("parameters")(n, a, broken) + "<|action_end|>" for n, a in calls)


def E_tool_calls_list(calls, broken=False):
    return "<tool_calls>[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]</tool_calls>"


def E_seed_oss(calls, broken=False):
    out = []
    for n, a in calls:
        s = "<seed:tool_call>\n<function=%s>\n" % n
        for k, v in a.items():
            s += "<parameter=%s>%s</parameter>\n" % (k, xml_val(v))
        out.append(s + "</function>\n</seed:tool_call>")
    return "\n".join(out)


def E_step3(calls, broken=False):
    s = "<｜tool_calls_begin｜>"
    for i, (n, a) in enumerate(calls):
        if i:
            s += "\n"
        s += '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="%s">' % n
        for k, v in a.items():
            s += '<steptml:parameter name="%s">%s</steptml:parameter>' % (k, xml_val(v))
        s += "</steptml:invoke><｜tool_call_end｜>"
    return s + "<｜tool_calls_end｜>"


def E_longcat(calls, broken=False):
    return "\n".join("<longcat_tool_call>" + enc_json_obj()(n, a, broken) + "</longcat_tool_call>" for n, a in calls)


def E_functiongemma(calls, broken=False):
    return "".join("<start_function_call>call:%s%s<end_function_call>" % (n, gemma_val(a, "<escape>")) for n, a in calls)


def E_gemma4(calls, broken=False):
    return "".join("<|tool_call>call:%s%s<tool_call|>" % (n, gemma_val(a, '<|"|>')) for n, a in calls)


def E_command_r7b(calls, broken=False):
    body = ",\n".join('    {"tool_call_id": "%d", "tool_name": "%s", "parameters": %s}' % (i, n, BROKEN_ARGS if broken else dumps(a))
                      for i, (n, a) in enumerate(calls))
    return "<|START_ACTION|>[\n" + body + "\n]<|END_ACTION|>"


def E_ernie45(calls, broken=False):
    return "\n".join("<tool_call>\n" + enc_json_obj()(n, a, broken) + "\n</tool_call>" for n, a in calls)


def E_olmo3(calls, broken=False):
    return "<function_calls>" + "\n".join("%s(%s)" % (n, ", ".join("%s=%s" % (k, pyrepr(v)) for k, v in a.items())) for n, a in calls) + "</function_calls>"


def E_lfm2(calls, broken=False):
    return "<|tool_call_start|>" + E_pythonic(calls) + "<|tool_call_end|>"


def E_gigachat3(calls, broken=False):
    return "".join("<|message_sep|>\n\nfunction call<|role_sep|>\n" + enc_json_obj()(n, a, broken) for n, a in calls)


def E_nemotron(calls, broken=False):
    return "<TOOLCALL>[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]</TOOLCALL>"


def E_json(calls, broken=False):
    if len(calls) == 1:
        return enc_json_obj()(*calls[0], broken)
    return "[" + ", ".join(enc_json_obj()(n, a, broken) for n, a in calls) + "]"


def E_harmony(calls, broken=False):
    return "".join("<|start|>assistant<|channel|>commentary to=functions.%s <|constrain|>json<|message|>%s<|call|>" % (n, BROKEN_ARGS if broken else dumps(a)) for n, a in calls)


# name -> (encoder, how content precedes calls, malformed behaviour, extras)
#   pre: "sep" = content + "\n" + calls; "none" = calls only at the start of the reply;
#        a function = custom joiner
#   bad: "content" = broken JSON comes back verbatim as content; "rawargs" = a call whose
#        arguments are the raw text; a string = custom malformed text returned as content;
#        "rawjson" = JSON-call formats that stream arguments: the call went out at
#        `"arguments": {`, so it stands and its never-balanced arguments are the raw text up to
#        the block's end marker (or the end of the reply);
#        ("stands", text, calls, content) = pythonic formats, which stream: the call went out at
#        `NAME(`, so it stands (its arguments as parsed so far) and the piece that does not parse
#        comes back as content from there on (with the block's end marker)
FORMATS = {
    "hermes": (E_hermes, "sep", "rawjson"),
    "qwen3_coder": (E_qwen3_coder, "sep", "<tool_call>\nI am not a function block\n</tool_call>"),
    "llama3_json": (E_llama3_json, lambda c, t: c + "<|python_tag|>" + t, "rawjson"),
    "llama4_pythonic": (E_llama4, "sep", ("stands", "<|python_start|>[get_weather(city=]<|python_end|>", [("get_weather", {})], "city=]<|python_end|>")),
    "pythonic": (E_pythonic, "none", ("stands", "[get_weather(city='Paris'", [("get_weather", {"city": "Paris"})], None)),
    "mistral": (E_mistral, lambda c, t: c + t, "rawargs"),
    "deepseek_v3": (E_deepseek_v3, lambda c, t: c + t, "rawargs"),
    "deepseek_v31": (E_deepseek_v31, lambda c, t: c + t, "rawargs"),
    "deepseek_v32": (E_deepseek_v32, lambda c, t: c + "\n\n" + t, "<｜DSML｜function_calls>\nno invoke here\n</｜DSML｜function_calls>"),
    "kimi_k2": (E_kimi_k2, lambda c, t: c + t, "rawargs"),
    "glm45": (E_glm45, "sep", "<tool_call>{not a name}</tool_call>"),
    "minimax_m2": (E_minimax_m2, lambda c, t: c + "\n\n" + t, "<minimax:tool_call>\n<invoke>\n</minimax:tool_call>"),
    "minimax": (E_minimax, "sep", "rawjson"),
    "granite": (E_granite, lambda c, t: c + t, "rawjson"),
    "granite-20b-fc": (E_granite20b, "sep", "rawjson"),
    "functionary_v3_1": (E_functionary31, lambda c, t: c + t, "rawargs"),
    "functionary_v3_2": (E_functionary32, lambda c, t: "all\n" + c + ">>>" + t, "rawargs"),
    "firefunction_v2": (E_firefunction, lambda c, t: c + t, "rawjson"),
    "xlam": (E_xlam, "none", "rawjson"),
    "phi4_mini_json": (E_phi4, "sep", "rawjson"),
    "internlm": (E_internlm, "sep", "rawjson"),
    "jamba": (E_tool_calls_list, "sep", "rawjson"),
    "hunyuan_a13b": (E_tool_calls_list, "sep", "rawjson"),
    "seed_oss": (E_seed_oss, "sep", "<seed:tool_call>\nno function\n</seed:tool_call>"),
    "step3": (E_step3, lambda c, t: c + t, "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>garbage<｜tool_call_end｜><｜tool_calls_end｜>"),
    "longcat": (E_longcat, "sep", "rawjson"),
    "functiongemma": (E_functiongemma, lambda c, t: c + t, "<start_function_call>call:get_weather{city:<escape>Paris}<end_function_call>"),
    "gemma4": (E_gemma4, lambda c, t: c + t, '<|tool_call>call:get_weather{city:<|"|>Paris}<tool_call|>'),
    "command_r7b": (E_command_r7b, lambda c, t: "<|START_RESPONSE|>" + c + "<|END_RESPONSE|>" + t, "content"),
    "ernie45": (E_ernie45, "sep", "rawjson"),
    "olmo3": (E_olmo3, "sep", ("stands", "<function_calls>get_weather(Paris)</function_calls>", [("get_weather", {})], "Paris)</function_calls>")),
    "lfm2": (E_lfm2, lambda c, t: c + t, ("stands", "<|tool_call_start|>[get_weather(city='Paris']<|tool_call_end|>", [("get_weather", {"city": "Paris"})], "]<|tool_call_end|>")),
    "gigachat3": (E_gigachat3, lambda c, t: c + t, "rawjson"),
    "nemotron": (E_nemotron, "sep", "rawjson"),
    "json": (E_json, "none", "rawjson"),
    "gpt_oss": (E_harmony, lambda c, t: "<|channel|>commentary<|message|>" + c + "<|end|>" + t, "rawargs"),
}


def expected(content, calls, ids=None, reasoning=None, markup_free=True, raw_args=None):
    tc = []
    for i, (n, a) in enumerate(calls):
        e = {"name": n, "arguments": raw_args if raw_args is not None else a}
        if ids:
            e["id"] = ids[i]
        tc.append(e)
    return {"content": content or None, "reasoning_content": reasoning, "tool_calls": tc, "markup_free": markup_free}


def plain_text(name):
    if name == "functionary_v3_2":
        return "all\n" + PLAIN
    if name == "command_r7b":
        return "<|START_RESPONSE|>" + PLAIN + "<|END_RESPONSE|>"
    if name == "gpt_oss":
        return "<|channel|>final<|message|>" + PLAIN + "<|return|>"
    return PLAIN


def cases_for(name, spec):
    enc, pre, bad = spec
    ids = kimi_ids if name == "kimi_k2" else (lambda c: None)
    cases = {}
    cases["one_call"] = (enc(ONE), expected(None, ONE, ids(ONE)))
    cases["parallel"] = (enc(PAR), expected(None, PAR, ids(PAR)))
    cases["nested_unicode"] = (enc(NESTED), expected(None, NESTED, ids(NESTED)))
    if pre == "none":
        # These formats only recognise a call as the whole reply (vLLM's pythonic/xlam/json
        # behave the same): text before it keeps everything as content.
        text = PREFACE + "\n" + enc(ONE)
        cases["content_before"] = (text, expected(text, [], markup_free=False))
    else:
        # Text before the first call is content verbatim (as vLLM's parser tests assert), minus
        # the format's own wrapper tokens.
        text = PREFACE + "\n" + enc(ONE) if pre == "sep" else pre(PREFACE, enc(ONE))
        before = text[:text.index(enc(ONE))]
        if name in ("command_r7b", "functionary_v3_2", "gpt_oss", "llama3_json"):
            before = PREFACE
        cases["content_before"] = (text, expected(drop_wrappers(name, before), ONE, ids(ONE)))
    cases["no_call"] = (plain_text(name), expected(PLAIN, []))
    if bad == "content":
        text = enc(ONE, broken=True)
        cases["malformed"] = (text, expected(drop_wrappers(name, text), [], markup_free=False))
    elif bad == "rawargs":
        text = enc(ONE, broken=True)
        cases["malformed"] = (text, expected(None, ONE, ids(ONE), raw_args=BROKEN_ARGS))
    elif isinstance(bad, tuple) and bad[0] == "stands":
        _, text, calls, content = bad
        cases["malformed"] = (text, expected(content, calls, ids(calls), markup_free=content is None))
    elif bad == "rawjson":
        text = enc(ONE, broken=True)
        start = text.index(BROKEN_ARGS)
        end = text.find(BLOCK_END[name], start) if name in BLOCK_END else len(text)
        cases["malformed"] = (text, expected(None, ONE, ids(ONE), raw_args=text[start:end].strip()))
    else:
        cases["malformed"] = (bad, expected(drop_wrappers(name, bad), [], markup_free=False))
    return cases


# End markers of the "rawjson" formats that have one.
BLOCK_END = {"hermes": "</tool_call>", "minimax": "</tool_calls>", "internlm": "<|action_end|>",
             "jamba": "</tool_calls>", "hunyuan_a13b": "</tool_calls>", "longcat": "</longcat_tool_call>",
             "ernie45": "</tool_call>", "nemotron": "</TOOLCALL>"}


# Wrapper special tokens around a call section are markup even when the call inside is broken:
# they are dropped, the broken call text itself comes back.
WRAPPERS = {"gigachat3": ["<|message_sep|>\n\n", "<|message_sep|>"]}


def drop_wrappers(name, text):
    for w in WRAPPERS.get(name, []):
        text = text.replace(w, "")
    return text


def extra_cases():
    """Reasoning and format variants: (format, case, text, expected, options)."""
    x = []
    think = "The user wants the weather; I will call get_weather."
    x.append(("hermes", "reasoning_then_call", "<think>\n" + think + "\n</think>\n\n" + E_hermes(ONE),
              expected(None, ONE, reasoning="\n" + think + "\n"), {"reasoning_parser": "qwen3"}))
    x.append(("hermes", "reasoning_opened_by_prompt", think + "\n</think>\n\nParis is sunny.",
              expected("\n\nParis is sunny.", [], reasoning=think + "\n"), {"reasoning_parser": "qwen3", "starts_in_reasoning": True}))
    x.append(("deepseek_v3", "r1_reasoning", think + "</think>" + E_deepseek_v3(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "deepseek_r1"}))
    x.append(("deepseek_v31", "thinking", "<think>" + think + "</think>Checking." + E_deepseek_v31(ONE),
              expected("Checking.", ONE, reasoning=think), {"reasoning_parser": "qwen3"}))
    x.append(("mistral", "v7_array", E_mistral_v7(PAR), expected(None, PAR), {}))
    x.append(("mistral", "think", "[THINK]" + think + "[/THINK]" + E_mistral(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "mistral"}))
    x.append(("glm45", "glm47_compact", E_glm47(PAR), expected(None, PAR), {}))
    x.append(("glm45", "thinking", "<think>" + think + "</think>" + E_glm45(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "glm45"}))
    x.append(("minimax_m2", "thinking", think + "\n</think>\n\n" + E_minimax_m2(ONE),
              expected(None, ONE, reasoning=think + "\n"), {"reasoning_parser": "minimax_m2"}))
    x.append(("kimi_k2", "thinking", "<think>" + think + "</think>" + E_kimi_k2(ONE),
              expected(None, ONE, kimi_ids(ONE), reasoning=think), {"reasoning_parser": "kimi_k2"}))
    x.append(("seed_oss", "thinking", "<seed:think>" + think + "</seed:think>" + E_seed_oss(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "seed_oss"}))
    x.append(("gemma4", "thinking", "<|channel>thought\n" + think + "<channel|>" + E_gemma4(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "gemma4"}))
    x.append(("hunyuan_a13b", "thinking_answer", "<think>\n" + think + "\n</think>\n<answer>\nIt is sunny.\n</answer>",
              expected("\n\nIt is sunny.\n", [], reasoning="\n" + think + "\n"), {"reasoning_parser": "hunyuan_a13b"}))
    x.append(("command_r7b", "thinking", "<|START_THINKING|>" + think + "<|END_THINKING|>" + E_command_r7b(ONE),
              expected(None, ONE, reasoning=think), {"reasoning_parser": "command_r7b"}))
    x.append(("granite", "thought_process", "Here is my thought process:\n" + think + "\nHere is my response:\nIt is sunny.",
              expected("\nIt is sunny.", [], reasoning="\n" + think + "\n"), {"reasoning_parser": "granite"}))
    x.append(("gpt_oss", "analysis_then_call", "<|channel|>analysis<|message|>" + think + "<|end|>" + E_harmony(ONE),
              expected(None, ONE, reasoning=think), {}))
    x.append(("gpt_oss", "analysis_then_final", "<|channel|>analysis<|message|>" + think + "<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
              expected("It is sunny.", [], reasoning=think), {}))
    x.append(("gpt_oss", "recipient_in_header", " to=functions.get_weather<|channel|>commentary json<|message|>" + dumps(ONE[0][1]) + "<|call|>",
              expected(None, ONE), {}))
    x.append(("llama3_json", "python_tag_only", "<|python_tag|>" + E_llama3_json(ONE), expected(None, ONE), {}))
    x.append(("xlam", "fenced", "```json\n" + E_xlam(PAR) + "\n```", expected(None, PAR), {}))
    x.append(("hermes", "unterminated_call", "<tool_call>\n" + enc_json_obj()(*ONE[0]), expected(None, ONE), {}))
    x.append(("hermes", "unknown_tool", E_hermes([("launch_rocket", {"target": "moon"})]),
              expected(None, [("launch_rocket", {"target": "moon"})]), {}))
    x.append(("qwen3_coder", "typed_params", E_qwen3_coder([("get_weather", {"city": "Rome", "days": 5}), ("search", {"query": "42", "exact": False})]),
              expected(None, [("get_weather", {"city": "Rome", "days": 5}), ("search", {"query": "42", "exact": False})]), {}))
    return x


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    with open(os.path.join(OUT, "tools.json"), "w", encoding="utf-8") as f:
        json.dump(TOOLS, f, ensure_ascii=False, indent=1)
    n = 0
    for name, spec in FORMATS.items():
        d = os.path.join(OUT, name)
        os.makedirs(d)
        for case, (text, exp) in cases_for(name, spec).items():
            exp["options"] = {"parser": name}
            write(d, case, text, exp)
            n += 1
    for name, case, text, exp, opts in extra_cases():
        exp["options"] = dict({"parser": name}, **opts)
        write(os.path.join(OUT, name), case, text, exp)
        n += 1
    print("wrote", n, "cases for", len(FORMATS), "formats")


def write(d, case, text, exp):
    with open(os.path.join(d, case + ".txt"), "w", encoding="utf-8", newline="") as f:
        f.write(text)
    with open(os.path.join(d, case + ".json"), "w", encoding="utf-8") as f:
        json.dump(exp, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
