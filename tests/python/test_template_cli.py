"""`rapid-mlx template` against Python jinja2 (the reference), live: random conversations (seeded;
unicode, quotes, newlines, tool schemas, tool calls with dict and string arguments, reasoning) are
rendered by the binary and by jinja2 set up exactly as transformers' _compile_jinja_template does,
and must match byte for byte - or both must fail.

The binary: $RAPID_MLX_BIN, else build/rapid-mlx, else build-tpl/rapid-mlx."""
import json
import os
import random
import subprocess
from datetime import datetime

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.environ.get("RAPID_FIXTURES_DIR", os.path.join(ROOT, "..", "shared", "fixtures"))
NOW = datetime(2026, 3, 7, 8, 5, 9)


def _binary():
    for c in (os.environ.get("RAPID_MLX_BIN"), os.path.join(ROOT, "build", "rapid-mlx"),
              os.path.join(ROOT, "build-tpl", "rapid-mlx")):
        if c and os.path.exists(c):
            return c
    pytest.skip("rapid-mlx binary not built")


class _Generation(jinja2.ext.Extension):
    # transformers' AssistantTracker without tracking: {% generation %} renders its body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class _Namespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError("underscore attribute")


def _env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    env.globals["dict"] = lambda *a, **k: dict(*a, **k)
    env.globals["namespace"] = _Namespace
    return env


ENV = _env()


def _oracle(source, ctx):
    ctx = json.loads(json.dumps(ctx))
    msgs = []
    for m in ctx.pop("messages"):
        m = {k: v for k, v in m.items() if v is not None}
        r = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        if r is not None:
            m = {"thinking": r, **m, "reasoning_content": r}
        msgs.append(m)
    tools = ctx.pop("tools", None)
    agp = ctx.pop("add_generation_prompt", False)
    try:
        return ENV.from_string(source).render(messages=msgs, tools=tools, documents=None,
                                              add_generation_prompt=agp, **ctx), None
    except Exception as e:  # noqa: BLE001 - any failure must be a failure on our side too
        return None, f"{type(e).__name__}: {e}"


WORDS = ["hello", "wörld", "日本語", "🚀", "\"quoted\"", "it's", "a\\b", "new\nline", "tab\there", "<tag>",
         "&amp;", "{{ not jinja }}", "{% raw %}", "  spaced  ", "", "x" * 40, "Ω≈ç√", "null", "true", "42"]


def _text(rng, n=6):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, n)))


def _tool(rng, i):
    props = {}
    for k in range(rng.randint(0, 4)):
        t = rng.choice(["string", "integer", "number", "boolean", "array", "object"])
        p = {"type": t, "description": _text(rng, 3)}
        if t == "array":
            p["items"] = {"type": "string"}
        if t == "string" and rng.random() < 0.3:
            p["enum"] = ["a", "b"]
        props[f"p{k}_{rng.choice(WORDS[:4])}"] = p
    return {"type": "function", "function": {"name": f"tool_{i}", "description": _text(rng, 5),
            "parameters": {"type": "object", "properties": props, "required": list(props)[:1]}}}


def _conversation(rng):
    tools = [_tool(rng, i) for i in range(rng.randint(0, 3))]
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": _text(rng)})
    for turn in range(rng.randint(1, 3)):
        content = _text(rng)
        if rng.random() < 0.2:
            content = [{"type": "text", "text": _text(rng)} for _ in range(rng.randint(1, 2))]
        msgs.append({"role": "user", "content": content})
        if tools and rng.random() < 0.5:
            calls = []
            for c in range(rng.randint(1, 2)):
                args = {"p": _text(rng, 2), "n": rng.randint(-5, 500), "f": rng.choice([0.5, 1.0, 2.25])}
                cid = "".join(rng.choice("abcdefghij0123456789") for _ in range(9))
                calls.append({"id": cid, "type": "function", "function": {
                    "name": rng.choice(tools)["function"]["name"],
                    "arguments": json.dumps(args) if rng.random() < 0.3 else args}})
            msgs.append({"role": "assistant", "content": "", "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                             "content": _text(rng)})
        if turn < 2 or rng.random() < 0.5:
            m = {"role": "assistant", "content": _text(rng)}
            if rng.random() < 0.3:
                m["reasoning_content"] = _text(rng)
            msgs.append(m)
    ctx = {"messages": msgs, "add_generation_prompt": msgs[-1]["role"] != "assistant"}
    if tools:
        ctx["tools"] = tools
    for k, v in (("enable_thinking", rng.choice([True, False])), ("reasoning_effort", rng.choice(["low", "high"]))):
        if rng.random() < 0.4:
            ctx[k] = v
    return ctx


def _run(args, ctx, tmp_path):
    p = tmp_path / "ctx.json"
    p.write_text(json.dumps(ctx, ensure_ascii=False), encoding="utf-8")
    out = subprocess.run([_binary(), "template", *args, "--context", str(p), "--now", NOW.strftime("%Y-%m-%d %H:%M:%S")],
                         capture_output=True, timeout=60)
    return out


def _compare(source, args, ctx, tmp_path, label):
    want, err = _oracle(source, ctx)
    out = _run(args, ctx, tmp_path)
    if err is not None:
        assert out.returncode != 0, f"{label}: jinja2 raised {err} but rapid-mlx rendered:\n{out.stdout[:2000]!r}"
    else:
        assert out.returncode == 0, f"{label}: rapid-mlx failed: {out.stderr.decode(errors='replace')}"
        assert out.stdout.decode("utf-8") == want, label


TEMPLATES = sorted(f for f in os.listdir(os.path.join(FIX, "chat-templates")) if f.endswith(".jinja"))


@pytest.mark.parametrize("name", TEMPLATES)
def test_random_conversations_match_jinja2(name, tmp_path):
    path = os.path.join(FIX, "chat-templates", name)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    rng = random.Random(name)
    for i in range(3):
        ctx = _conversation(rng)
        ctx["bos_token"], ctx["eos_token"] = "<s>", "</s>"
        _compare(source, ["--template", path], ctx, tmp_path, f"{name} #{i}")


def _special_tokens(cfg):
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        v = cfg.get(k)
        if isinstance(v, str):
            out[k] = v
        elif isinstance(v, dict) and isinstance(v.get("content"), str):
            out[k] = v["content"]
    return out


MODELS = sorted(d for d in os.listdir(os.path.join(FIX, "tokenizers"))
                if isinstance(json.load(open(os.path.join(FIX, "tokenizers", d, "tokenizer_config.json"))).get("chat_template"), (str, list)))


@pytest.mark.parametrize("model", MODELS)
def test_model_dir_uses_config_template_and_special_tokens(model, tmp_path):
    d = os.path.join(FIX, "tokenizers", model)
    with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    rng = random.Random(model)
    for i in range(4):
        ctx = _conversation(rng)
        ct = cfg["chat_template"]
        if isinstance(ct, list):
            names = {e["name"]: e["template"] for e in ct}
            ct = names["tool_use"] if ctx.get("tools") and "tool_use" in names else names["default"]
        full = {**_special_tokens(cfg), **ctx}
        want, err = _oracle(ct, full)
        out = _run(["--model-dir", d], ctx, tmp_path)
        if err is not None:
            assert out.returncode != 0, f"{model} #{i}: jinja2 raised {err}"
        else:
            assert out.returncode == 0, out.stderr.decode(errors="replace")
            assert out.stdout.decode("utf-8") == want, f"{model} #{i}"


def test_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("line one\n{% for x in %}\n", encoding="utf-8")
    out = _run(["--template", str(bad)], {"messages": []}, tmp_path)
    assert out.returncode != 0
    assert b"line 2" in out.stderr
    raising = tmp_path / "raise.jinja"
    raising.write_text("ok\n{{ raise_exception('no system role') }}", encoding="utf-8")
    out = _run(["--template", str(raising)], {"messages": []}, tmp_path)
    assert out.returncode != 0 and b"line 2: no system role" in out.stderr
