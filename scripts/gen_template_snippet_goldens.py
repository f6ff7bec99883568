#!/usr/bin/env python3
"""Regenerates tests/golden/template/snippets.json: small Jinja snippets (one language feature each)
rendered by Python jinja2 in transformers' chat-template environment (_compile_jinja_template:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, generation, tojson,
raise_exception, strftime_now pinned to 2026-01-15 10:30:00). Where jinja2 raises, the golden
records the exception so the C++ interpreter is checked to raise too.

Run with the oracle venv:  .venv-oracle/bin/python scripts/gen_template_snippet_goldens.py
"""
import datetime as _dt
import json
import os

from transformers.utils import chat_template_utils as ctu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "template", "snippets.json")


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _dt.datetime(2026, 1, 15, 10, 30, 0)


ctu.datetime = _FixedDatetime

M = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
D = {"d": {"b": 1, "a": 2, "C": 3}, "l": [3, 1, 2], "s": "Hello World", "n": None, "f": 1.5, "i": 7,
     "u": "héllo wörld ✓ 😀", "t": True, "users": [{"name": "bob", "age": 30}, {"name": "Al", "age": 25},
     {"name": "cy", "age": 30, "x": None}], "nested": {"a": {"b": [1, {"c": "deep"}]}}}

NM = {"m": {"role": "assistant", "content": None, "args": {"x": None, "y": [None, 1]},
           "calls": [{"id": None, "function": {"name": "f", "arguments": {"a": None}}}]}}

S = [
    # literals, printing, Python str()/repr()
    ("{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 1e-7 }} {{ 12345678901234567.0 }} {{ 0.1 + 0.2 }} {{ -0.0 }}", {}),
    ("{{ true }} {{ False }} {{ none }} {{ None }}", {}),
    ("{{ [1, 'a', \"b'c\", 2.5, none, true] }}", {}),
    ("{{ {'a': 1, 'b': [1, 2], 'c': {'d': none}} }}", {}),
    ("{{ (1,) }} {{ (1, 2) }} {{ () }} {{ 1, 2 }}", {}),
    ("{{ 'a\\nb\\t\\\\c' }}|{{ ['a\\nb', 'it\\'s', \"q\\\"\"] }}", {}),
    ("{{ ['é', '✓', '\\x01', '\\u2028'] }}", {}),
    ("{{ 'adjacent' 'strings' }}", {}),
    ("{{ '\\u00e9\\x41\\101' }}", {}),
    ("{{ d }} {{ l }} {{ nested }}", D),
    ("{{ u }} {{ u|length }} {{ u[1] }} {{ u[-1] }} {{ u[2:5] }} {{ u|upper }}", D),
    # arithmetic
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -3 + +2 }} {{ 2 * 'ab' }} {{ [1] * 3 }} {{ 'a' + 'b' }} {{ [1] + [2] }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ true + 1 }} {{ 3 - true }} {{ 1 == 1.0 }} {{ true == 1 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ [1] ~ undefined_thing }}", {}),
    # comparisons, logic
    ("{{ 1 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2.0 }} {{ 1 != 2 }} {{ 'a' == 'a' }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1 != 2 }} {{ 'a' in 'ab' in 'abc' }} {{ 1 < 2 > 0 }}", {}),
    ("{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ '' or [] }} {{ not 0 }} {{ not [] }} {{ none or 5 }}", {}),
    ("{{ 'a' in 'cat' }} {{ 1 in [1, 2] }} {{ 'b' in d }} {{ 'z' not in d }} {{ 3 not in l }} {{ 'x' in missing }}", D),
    ("{{ 1 in 'abc' }}", {}),
    ("{{ 'yes' if t else 'no' }} {{ 'yes' if n else 'no' }} [{{ 'only' if false }}]", D),
    # undefined semantics
    ("[{{ missing }}] [{{ missing|default('dflt') }}] [{{ missing is defined }}] [{{ missing|length }}]", {}),
    ("{{ missing.attr }}", {}),
    ("{{ missing['k'] }}", {}),
    ("{{ d.nope }}|{{ d.nope is defined }}|{{ d['nope'] is undefined }}", D),
    ("{{ d.nope.deeper }}", D),
    ("{{ missing + 1 }}", {}),
    ("{{ missing() }}", {}),
    ("{% for x in missing %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("{{ missing == missing }} {{ missing != 1 }} {{ missing|string }}|{{ missing|trim }}|{{ missing|list }}", {}),
    ("{{ missing|tojson }}", {}),
    ("{{ missing < 1 }}", {}),
    ("{{ n.x }}|{{ n['x'] }}|{{ i.real }}|{{ l.nope }}", D),
    ("{{ n|length }}", D),
    ("{% for x in n %}{% endfor %}", D),
    ("{{ l[5] }}|{{ l[-1] }}|{{ l[-5] }}|{{ s[100] }}|{{ d[1] }}", D),
    # attribute vs item lookup
    ("{{ d.items }}", {"d": {"items": 5}}),
    ("{{ d['items'] }} {{ d.get('items') }} {{ d.get('x', 'def') }} {{ d.get('x') }}", {"d": {"items": 5}}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", D),
    ("{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", D),
    ("{{ nested.a.b[1].c }} {{ nested['a']['b'][0] }} {{ users[0].name }} {{ l.0 }}", D),
    # slicing
    ("{{ l[1:] }} {{ l[:1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ l[1:-1] }} {{ s[::-1] }} {{ s[-5:] }} {{ s[2:8:2] }}", D),
    ("{{ (1, 2, 3)[1:] }} {{ 'abc'[::-2] }} {{ l[-100:100] }}", D),
    # string methods
    ("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a '.lstrip() }}|{{ ' a  '.rstrip() }}|{{ 'abc'.rstrip('c') }}", {}),
    ("{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a b c'.split(none, 1) }} {{ '  a b  '.rsplit(none, 1) }}", {}),
    ("{{ s.startswith('Hell') }} {{ s.endswith(('x', 'ld')) }} {{ s.startswith('World', 6) }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }}", D),
    ("{{ s.upper() }} {{ s.lower() }} {{ 'hello wORLD 1st'.title() }} {{ 'hELLO'.capitalize() }} {{ s.swapcase() }}", D),
    ("{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ s.index('W') }} {{ u.find('w') }}", D),
    ("{{ s.index('z') }}", D),
    ("{{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<4}|{:^7}|{:05.2f}|{:,}'.format('a', 'b', 'c', 3.14159, 1234567) }}", {}),
    ("{{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a1'.isalnum() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }}", {}),
    ("{{ '42'.zfill(5) }} {{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4) }}| {{ 'ab'.rjust(4) }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }}", {}),
    ("{{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.py'.removesuffix('.py') }}", {}),
    ("{{ s.nonexistent() }}", D),
    # list/dict sandbox
    ("{% set x = [1] %}{{ x.append(2) }}", {}),
    ("{% set x = {'a': 1} %}{{ x.update({'b': 2}) }}", {}),
    ("{% set x = {'a': 1} %}{{ x.pop('a') }}", {}),
    ("{{ l.index(1) }} {{ l.count(3) }}", D),
    ("{{ l.__class__ }}", D),
    # filters
    ("{{ s|length }} {{ l|count }} {{ d|length }} {{ s|upper }} {{ s|lower }} {{ 'hello world-foo(bar'|title }} {{ 'hELLO'|capitalize }}", D),
    ("{{ l|first }} {{ l|last }} {{ s|first }} {{ []|first }}|{{ l|join(', ') }} {{ users|join('/', attribute='name') }} {{ l|join }}", D),
    ("{{ 'a-b-a'|replace('a', 'x') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ l|list }} {{ 'ab'|list }} {{ d|list }}", D),
    ("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(9) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ '12'|float }} {{ 'a'|float }} {{ 5|float }}", {}),
    ("{{ -3|abs }} {{ (-3)|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 3|round }}", {}),
    ("{{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(true) }} {{ d|dictsort(by='value', reverse=true) }}", D),
    ("{{ missing|items|list }}", {}),
    ("{{ l|items|list }}", D),
    ("{{ l|sort }} {{ l|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}", D),
    ("{{ [1, 2, 1, 3]|unique|list }} {{ ['a', 'A', 'b']|unique|list }} {{ l|reverse|list }} {{ s|reverse }}", D),
    ("{{ l|reverse }}", D),
    ("{{ users|selectattr('age', 'equalto', 30)|map(attribute='name')|join(',') }} {{ users|rejectattr('age', 'eq', 30)|map(attribute='name')|list }} {{ users|selectattr('x', 'none')|list|length }}", D),
    ("{{ [0, 1, 2, '', none]|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [1, 2, 3]|select('gt', 1)|list }} {{ ['a', 'b']|select('in', 'abc')|list }}", {}),
    ("{{ users|map(attribute='name')|list }} {{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='zz', default='?')|list }} {{ [1.5, 2.5]|map('round')|list }} {{ ['1', '2']|map('int')|sum }}", D),
    ("{{ users|map(attribute='name') }}", D),
    ("{{ users|selectattr('age')|list|length }} {{ none|selectattr('x')|list }} {{ none|map('upper')|list }}", D),
    ("{{ d|tojson }} {{ l|tojson }} {{ 'é\"\\n<>&'|tojson }} {{ none|tojson }} {{ 1.0|tojson }} {{ true|tojson }} {{ (1, 2)|tojson }}", D),
    ("{{ d|tojson(indent=2) }}|{{ nested|tojson(indent=4) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson(indent=2) }}", D),
    ("{{ d|tojson(separators=(',', ':')) }} {{ d|tojson(sort_keys=true) }} {{ u|tojson(ensure_ascii=true) }} {{ d|tojson(indent='\\t') }}", D),
    ("{{ users|tojson }}", D),
    ("{{ (users|map(attribute='name'))|tojson }}", D),
    ("{{ '<a href=\"x\">&'|e }} {{ '<b>'|escape }} {{ '<b>'|safe }} {{ ('<i>'|safe) + '<b>' }} {{ '<b>' + ('<i>'|safe) }} {{ ('x'|safe) ~ '<b>' }}", {}),
    ("{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}", {}),
    ("{{ 'one two, three'|wordcount }} {{ 'ab'|center(6) }}| {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }}", {}),
    ("{{ l|sum }} {{ users|sum(attribute='age') }} {{ l|min }} {{ l|max }} {{ ['b', 'A']|min }} {{ users|max(attribute='age') }} {{ []|max }}", D),
    ("{{ 'abcdef'|truncate(5, leeway=0) }} {{ 'abcdef'|truncate(5, true, leeway=0) }} {{ 'hello world foo'|truncate(11, leeway=0) }} {{ '%s-%d'|format('a', 3) }} {{ '<p>x  <b>y</b></p>'|striptags }}", {}),
    ("{{ users|groupby('age') }}", D),
    ("{{ 'x'|nosuchfilter }}", {}),
    ("{{ 5|string ~ 'a' }} {{ [1]|string }} {{ s|string|length }}", D),
    ("{{ 'a'|default('b') }} {{ ''|default('b') }} {{ ''|default('b', true) }} {{ none|d('z') }} {{ none|d('z', true) }}", {}),
    # tests
    ("{{ 1 is number }} {{ 1.0 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ 'a' is string }} {{ d is mapping }} {{ l is sequence }} {{ s is iterable }} {{ 1 is iterable }}", D),
    ("{{ none is none }} {{ 0 is none }} {{ n is not none }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}", D),
    ("{{ 2 is eq 2 }} {{ 2 is equalto(3) }} {{ 2 is ne 3 }} {{ 1 is lt 2 }} {{ 3 is gt(2) }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 'a' is in 'abc' }} {{ 2 is in [1, 2] }}", {}),
    ("{{ raise_exception is callable }} {{ 1 is callable }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ l is sameas l }}", D),
    ("{{ 1 is nosuchtest }}", {}),
    ("{{ 2 is == 2 }}", {}),
    ("{{ missing is undefined }} {{ missing is not defined }} {{ d.a is defined }} {{ d.zz is defined }} {{ d.zz is not defined }}", D),
    # statements
    ("{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", {}),
    ("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", D),
    ("{% for x in l %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }}]{% endfor %}", D),
    ("{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}", D),
    ("{% for x in l if x > 10 %}{{ x }}{% else %}none{% endfor %}", D),
    ("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }},{% endfor %}{% for k, v in d|dictsort %}{{ k }}{% endfor %}", D),
    ("{% for a, b in [(1, 2, 3)] %}{% endfor %}", {}),
    ("{% for c in 'abc' %}{{ c }}.{% endfor %}{% for k in d %}{{ k }}{% endfor %}", D),
    ("{% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("{% set c = 0 %}{% for i in [1, 2] %}{{ c }}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}", {}),
    ("{% set ns = namespace(c=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.c = ns.c + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.c }} {{ ns.found }}", {}),
    ("{% set ns = namespace() %}{% set ns.x = 1 %}{{ ns.x }}{{ ns.y }}", {}),
    ("{% set ns = namespace(_x=1) %}", {}),
    ("{% set x = 5 %}{% set x.y = 1 %}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{% set c, d = t %}{{ c }}{{ d }}", {}),
    ("{% set x %}  block {{ 1 + 1 }}  {% endset %}[{{ x }}]{% set y | upper %}up{% endset %}{{ y }}", {}),
    ("{% if true %}{% set inner = 'set in if' %}{% endif %}{{ inner }}", {}),
    ("{% for i in [1] %}{% set inloop = 'x' %}{% endfor %}[{{ inloop }}]", {}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}", {}),
    ("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3) }}", {}),
    ("{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside {{ 1 }}{% endcall %}", {}),
    ("{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}", {}),
    ("{% macro m() %}{{ glob }}{% endmacro %}{% set glob = 'late' %}{{ m() }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}", {}),
    ("{% macro m(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ m(1) }}{{ m(b=2) }}", {}),
    ("{% macro m() %}x{% endmacro %}{% call m() %}body{% endcall %}", {}),
    ("{% macro m() %}{{ kwargs }}{% endmacro %}{{ m(z=1) }}", {}),
    ("{% macro m() %}[{{ caller is defined }}]{% if caller is defined %}{{ caller() }}{% endif %}{% endmacro %}{{ m() }}{% call m() %}c{% endcall %}", {}),
    ("{% macro row(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) row(4) %}v={{ v }}{% endcall %}", {}),
    ("{% filter upper %}shout {{ 'it' }}{% endfilter %}", {}),
    ("{% raw %}{{ not rendered }}{% endraw %}", {}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    ("{{ raise_exception('boom: ' ~ 1) }}", {}),
    ("{{ strftime_now('%Y-%m-%d %H:%M %d %B %Y %b %a %A %j') }}", {}),
    ("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {% for i in range(2) %}{{ i }}{% endfor %}", {}),
    ("{{ range(1000000)|length }}", {}),
    ("{{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'k': 'v'}, z=0) }}", {}),
    ("{{ namespace(a=1).a }} {{ namespace({'b': 2}).b }}", {}),
    # whitespace control
    ("a  {{- ' b ' -}}  c", {}),
    ("<{%- if true -%}  x  {%- endif -%}>", {}),
    ("line1\n    {% if true %}\n    kept\n    {% endif %}\nline2", {}),
    ("a\n  {# comment #}\nb\n{#- c -#}   c", {}),
    ("x {%+ if true %}y{% endif %}\n  {%+ if true %}z{% endif +%}\nw", {}),
    ("{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", {}),
    ("  {{ 'var tag not lstripped' }}\n  {% if true %}block{% endif %}", {}),
    ("trailing newline kept once\n\n", {}),
    ("a\r\nb\r\n", {}),
    ("{{ messages[0]['content'] }}{% for m in messages %}{{ m.role }}{% endfor %}", M),
    # syntax errors
    ("{% if x %}", {}),
    # JSON null reaching a template (tool schemas, tool-call arguments, extra variables) is Python
    # None, distinct from undefined: printed, tested, serialized and concatenated as jinja2 does.
    ("{{ m.content }}|{{ m['content'] }}|{{ m.content is none }}|{{ m.content is defined }}|{{ m.missing is defined }}|{{ m.missing is none }}", NM),
    ("{{ m.content|tojson }} {{ m|tojson }} {{ m.args|tojson }} {{ m.args.x }} {{ m.args['y'] }}", NM),
    ("{% if m.content %}T{% else %}F{% endif %} {{ m.content or 'empty' }} {{ m.content|default('d') }} {{ m.content|default('d', true) }} {{ m.get('content') }} {{ m.get('nope', 'dflt') }} {{ 'content' in m }}", NM),
    ("{{ m.content|string }} {{ m.content ~ '!' }} {{ m.content|trim }} {{ m.content == none }} {{ m.content != '' }} {{ [m.content]|length }}", NM),
    ("{{ '<|im_start|>' + m.role + '\\n' + m['content'] }}", NM),
    ("{{ m.content|length }}", NM),
    ("{{ m.content.strip() }}", NM),
    ("{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %} {% for k in m.args %}{{ k }}{% endfor %} {{ m.args.values()|list }}", NM),
    ("{{ m.args.x is none }} {{ m.args.x is not defined }} {% for t in m.calls %}{{ t.function.arguments|tojson }}{% endfor %} {{ m.calls[0].id }}", NM),
    ("{% for x in %}{% endfor %}", {}),
    ("{{ 1 + }}", {}),
    ("{% endif %}", {}),
    ("{% unknowntag %}", {}),
    ("{{ 'unterminated }}", {}),
    ("{{ (1, 2 }}", {}),
    ("{% break %}", {}),
    ("{# never closed", {}),
    ("{% include 'x.html' %}", {}),
]


def main():
    env_tpl = ctu._compile_jinja_template  # noqa: F841 (documents what renders)
    out = []
    for src, ctx in S:
        entry = {"template": src, "context": ctx}
        try:
            entry["output"] = ctu._compile_jinja_template(src).render(**ctx)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    print(f"{len(out)} snippets, {sum('error' in e for e in out)} raise")


if __name__ == "__main__":
    main()
