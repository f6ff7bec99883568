#!/usr/bin/env python3
"""Regenerates tests/golden/template/*.json: every shared chat template (fixtures/chat-templates/*.jinja
and the chat_template of fixtures/tokenizers/*/tokenizer_config.json) rendered over the conversations
in tests/golden/template/conversations.json by transformers' own render_jinja_template (Python jinja2
in transformers' sandboxed environment), with strftime_now pinned to a fixed date.

Run with the oracle venv:  .venv-oracle/bin/python scripts/gen_template_goldens.py
"""
import datetime as _dt
import json
import os
import sys

from transformers.utils import chat_template_utils as ctu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.environ.get("RAPID_FIXTURES_DIR", os.path.join(ROOT, "..", "shared", "fixtures"))
OUT = os.path.join(ROOT, "tests", "golden", "template")
FIXED_NOW = _dt.datetime(2026, 1, 15, 10, 30, 0)  # must match kGoldenNow in the C++ test


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


ctu.datetime = _FixedDatetime


def templates():
    d = os.path.join(FIX, "chat-templates")
    for f in sorted(os.listdir(d)):
        if f.endswith(".jinja"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                yield f[: -len(".jinja")], fh.read()
    d = os.path.join(FIX, "tokenizers")
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n, "tokenizer_config.json")
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8") as fh:
            ct = json.load(fh).get("chat_template")
        if isinstance(ct, str):
            yield "tokenizer-" + n, ct
        elif isinstance(ct, list):
            for e in ct:
                yield "tokenizer-" + n + "-" + e["name"], e["template"]


def render(src, ctx):
    ctx = dict(ctx)
    messages = ctx.pop("messages")
    tools = ctx.pop("tools", None)
    agp = ctx.pop("add_generation_prompt", False)
    out, _ = ctu.render_jinja_template(
        conversations=[messages], tools=tools, chat_template=src, add_generation_prompt=agp, **ctx
    )
    return out[0]


def main():
    with open(os.path.join(OUT, "conversations.json"), encoding="utf-8") as fh:
        convs = json.load(fh)
    ok = err = 0
    for name, src in templates():
        res = {}
        for cname, ctx in convs.items():
            try:
                res[cname] = {"output": render(src, ctx)}
                ok += 1
            except Exception as e:  # the C++ side must raise too
                res[cname] = {"error": f"{type(e).__name__}: {e}"}
                err += 1
        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as fh:
            json.dump({"template": name, "results": res}, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
    print(f"rendered {ok}, raised {err}", file=sys.stderr)


if __name__ == "__main__":
    main()
