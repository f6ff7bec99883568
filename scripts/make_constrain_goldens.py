#!/usr/bin/env python3
"""Regenerates tests/golden/constrain/*.json, the oracle data for tests/constrain_test.cpp.

- gbnf_cases.json: GBNF grammars paired with an equivalent Python regex; test strings are
  labelled by re.fullmatch (the oracle), the C++ matcher must agree.
- schema_cases.json: JSON schemas with documents labelled by the `jsonschema` package
  (Draft 2020-12) and json.loads. Documents are produced in the grammar's canonical form
  (properties in schema order, bounded whitespace, raw UTF-8), plus mutations that break them.

Run with the project venv:  .venv/bin/python scripts/make_constrain_goldens.py
"""
import copy
import json
import random
import re
import sys
from pathlib import Path

import jsonschema

OUT = Path(__file__).resolve().parent.parent / "tests" / "golden" / "constrain"
rng = random.Random(1234)

# ---------------------------------------------------------------- GBNF vs regex
GBNF_CASES = [
    ('root ::= "a" [b-d]* "e"', r"a[b-d]*e", "abcdex", ['ae', 'abe', 'abcdcbe', 'ab', 'be']),
    ('root ::= ("ab" | "c"){2,3} "x"?', r"(?:ab|c){2,3}x?", "abcx", ['abab', 'abcx', 'ccc', 'cccc', 'ababab x', 'ababx']),
    ('root ::= [^a-z]+', r"[^a-z]+", "az\u00e9\n\U0001F600A0", ['A', 'é😀', '\n0']),
    ('root ::= . . .', r"(?s)...", "a\u00e9\U0001F600\n", ['abc', 'é😀\n', 'ab']),
    ('root ::= item ("," item)*\nitem ::= [0-9]+', r"[0-9]+(?:,[0-9]+)*", "0129,", ['1', '12,3,456', '1,', '1,,2']),
    ('root ::= "\\u00e9" | "\\U0001F600" | "\\x41"', "\u00e9|\U0001F600|A", "\u00e9\U0001F600Aa", ['é', '😀', 'A', 'AA']),
    ('root ::= [\\]\\-a]{1,3}', r"[\]\-a]{1,3}", "]-ab", [']', 'a-]', '-', 'a-]a']),
    ('root ::= "x"{3}', r"x{3}", "xy", ['xxx', 'xx', 'xxxx']),
    ('root ::= "x"{2,} "y"', r"x{2,}y", "xy", ['xxy', 'xxxxxy', 'xy']),
    ('root ::= ("a" | "b"){0,4}', r"[ab]{0,4}", "abc", ['', 'abab', 'ababa']),
    ('# comment line\nroot ::=\n  word\n  (" " word)*   # trailing comment\nword ::= [a-c]+', r"[a-c]+(?: [a-c]+)*", "abc d", ['a', 'abc cab a', 'abc  a', 'a ']),
    ('root ::= "ab" | "a" "b"? "c"', r"ab|ab?c", "abcd", ['ab', 'ac', 'abc', 'abcd']),
    ('root ::= [\u0400-\u04ff]+ "!"', "[\u0400-\u04ff]+!", "\u0416\u0430!a\u00e9", ['Жа!', '!', 'Жa!']),
    ('root ::= ([a] | "") "b"', r"a?b", "ab", ['b', 'ab', 'aab']),
    ('root ::= s\ns ::= "(" s ")" | "x"', r"\({0,3}x\){0,3}", "()x", ['x', '(x)', '((x))', '(x', 'x)']),  # regex is a superset: only used on balanced strings below
    ('root ::= [^"\\\\\\x00-\\x1F]*', '[^"\\\\\x00-\x1f]*', 'a"\\\x01\u00e9 ', ['', 'abcé ', 'a"', '\x01']),
    ('root ::= "\\"" ( [^"\\\\] | "\\\\" ["\\\\nt] )* "\\""', r'"(?:[^"\\]|\\["\\nt])*"', '"\\nta', ['""', '"a\\nb"', '"\\\\"', '"\\x"', '"a']),
]


def balanced_ok(s):
    m = re.fullmatch(r"(\(*)x(\)*)", s)
    return bool(m) and len(m.group(1)) == len(m.group(2))


def gbnf_cases():
    cases = []
    for gbnf, rx, alphabet, examples in GBNF_CASES:
        strings = set(examples)
        while len(strings) < 150 + len(examples):
            n = rng.randint(0, 7)
            strings.add("".join(rng.choice(alphabet) for _ in range(n)))
        docs = []
        for s in sorted(strings):
            ok = balanced_ok(s) if 's ::= "("' in gbnf else bool(re.fullmatch(rx, s))
            docs.append({"text": s, "valid": ok})
        # make sure each case has positives: sample the regex's language by rejection
        if not any(d["valid"] for d in docs):
            raise SystemExit(f"no positive sample for {gbnf!r}")
        cases.append({"gbnf": gbnf, "regex": rx, "docs": docs})
    return cases


# ---------------------------------------------------------------- JSON schemas
SCHEMAS = [
    {"type": "object"},
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"},
                                      "c": {"type": "boolean"}, "d": {"type": "null"}},
     "required": ["b"], "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
     "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "integer"}},
     "required": ["id"], "additionalProperties": True},
    {"type": "object", "properties": {"id": {"type": "integer"}},
     "required": ["id"], "additionalProperties": {"type": "string"}},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "array", "items": {"type": "string"}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "items": {"type": "boolean"}, "maxItems": 1},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {"type": "string", "minLength": 2, "maxLength": 5},
    {"type": "string", "enum": ["red", "green", "blue \"quoted\""]},
    {"enum": [1, "one", None, True, [1, 2], {"k": "v"}]},
    {"const": {"fixed": [1, 2, 3]}},
    {"type": ["string", "null"]},
    {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"n": {"type": "string"}},
                                     "required": ["n"], "additionalProperties": False}]},
    {"oneOf": [{"type": "string", "maxLength": 1}, {"type": "array", "items": {"type": "null"}}]},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
    {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                         "required": ["x", "y"], "additionalProperties": False}},
     "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
     "required": ["from", "to"], "additionalProperties": False},
    {"definitions": {"node": {"type": "object", "properties": {
        "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
        "required": ["value"], "additionalProperties": False}},
     "$ref": "#/definitions/node"},
    {"type": "string", "pattern": "^[a-z]+-[0-9]{2,3}$"},
    {"type": "string", "pattern": "^(foo|bar)\\d*$"},
    {"type": "string", "pattern": "ab+c"},
    {"type": "string", "pattern": "^\\w+@\\w+\\.(com|org)$"},
    {"type": "string", "pattern": "^[^\"\\\\]{0,3}$"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "uuid"},
    {"type": "integer", "minimum": 0},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "object", "properties": {
        "location": {"type": "string", "description": "City"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
        "details": {"type": "object", "properties": {"wind": {"type": "boolean"}, "rain": {"type": "boolean"}},
                    "required": ["wind"], "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
     "required": ["location", "unit"], "additionalProperties": False},
    {"type": "object", "properties": {"q": {"type": "string"}, "r": {"type": "string"}, "s": {"type": "string"}},
     "required": ["r"], "additionalProperties": False},
    {"type": "object", "properties": {"k\u00e9y": {"type": "string"}, "key": {"type": "integer"}},
     "additionalProperties": {"type": "boolean"}},
    {"type": "array", "items": {}},
    True,
    {"type": "object", "properties": {"v": {"type": "string", "const": "only"}}, "required": ["v"],
     "additionalProperties": False},
    {"type": "array", "items": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}, "minItems": 1},
    {"type": "integer", "minimum": 1, "maximum": 12},
    {"type": "integer", "minimum": -20, "exclusiveMaximum": 20},
    {"type": "integer", "minimum": 1},
    {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 14}},
     "required": ["days"], "additionalProperties": False},
]

EXTRA_DOCS = {  # hand-picked candidates for formats / patterns / ranges; labelled by the oracle like the rest
    38: ["0", "1", "7", "12", "13", "-1", "07", "100"],
    39: ["-21", "-20", "0", "19", "20", "5"],
    40: ["0", "1", "10", "-1", "01"],
    21: ['"abc-12"', '"abc-1234"', '"-12"', '"x-999"', '"ABC-12"', '"abc-12 "'],
    22: ['"foo"', '"bar123"', '"foobar"', '"baz1"', '"foo1a"'],
    23: ['"abc"', '"xxabbbcyy"', '"ac"', '"a\\nabc"', '"ABC"'],
    24: ['"me@host.com"', '"a_b@c9.org"', '"me@host.net"', '"@host.com"', '"me@ho-st.com"'],
    25: ['""', '"abc"', '"abcd"', '"a\\"b"', '"\\\\"', '"\u00e9\u00e9\u00e9"'],
    26: ['"2024-01-31"', '"2024-13-01"', '"2024-1-01"', '"1999-12-00"', '"2024-02-29x"'],
    27: ['"123e4567-e89b-12d3-a456-426614174000"', '"123e4567e89b12d3a456426614174000"',
         '"123E4567-E89B-12D3-A456-42661417400G"'],
}

STRINGS = ["", "a", "hello", "caf\u00e9", "emoji \U0001F600", "quote \" and \\ backslash",
           "line\nbreak\ttab", "ctrl \x01", "\u4e2d\u6587", "x" * 12]


def resolve(s, root):
    while isinstance(s, dict) and "$ref" in s:
        ref = s["$ref"]
        node = root
        for part in ref.lstrip("#/").split("/"):
            if part:
                node = node[part]
        s = node
    return s


def merge_all_of(s, root):
    s = dict(s)
    subs = s.pop("allOf")
    for sub in subs:
        sub = resolve(sub, root)
        for k, v in sub.items():
            if k == "properties" and "properties" in s:
                s["properties"] = {**s["properties"], **v}
            elif k == "required" and "required" in s:
                s["required"] = list(dict.fromkeys(s["required"] + v))
            else:
                s[k] = v
    return s


def gen(s, root, depth=0):
    s = resolve(s, root)
    if s is True or s == {}:
        return rng.choice([1, "any", None, [1, "two"], {"k": False}, 2.5])
    if "allOf" in s:
        return gen(merge_all_of(s, root), root, depth)
    if "const" in s:
        return copy.deepcopy(s["const"])
    if "enum" in s:
        return copy.deepcopy(rng.choice(s["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in s:
            sib = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
            br = resolve(rng.choice(s[key]), root)
            return gen({**sib, **br} if sib else br, root, depth)
    t = s.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t is None:
        t = "object" if "properties" in s else "array" if "items" in s else "string"
    if s.get("nullable") and rng.random() < 0.3:
        return None
    if t == "object":
        props = s.get("properties", {})
        req = set(s.get("required", []))
        out = {}
        for k, v in props.items():
            if k in req or rng.random() < 0.6:
                out[k] = gen(v, root, depth + 1)
        ap = s.get("additionalProperties", None if props else True)
        if ap not in (None, False) and rng.random() < 0.5:
            for i in range(rng.randint(1, 2)):
                out[rng.choice(["extra", "z", "k\u00e9", "ke"]) + str(i)] = gen(ap, root, depth + 1)
        return out
    if t == "array":
        if "prefixItems" in s:
            return [gen(x, root, depth + 1) for x in s["prefixItems"]]
        lo = s.get("minItems", 0)
        hi = s.get("maxItems", lo + 3)
        if depth > 3:
            hi = lo
        return [gen(s.get("items", True), root, depth + 1) for _ in range(rng.randint(lo, hi))]
    if t == "string":
        lo, hi = s.get("minLength", 0), s.get("maxLength", None)
        cand = [x for x in STRINGS if len(x) >= lo and (hi is None or len(x) <= hi)]
        if cand and rng.random() < 0.7:
            return rng.choice(cand)
        n = rng.randint(lo, hi if hi is not None else lo + 6)
        return "".join(rng.choice("ab\u00e9\"\\\n z\U0001F600") for _ in range(n))
    if t == "integer":
        lo = s.get("minimum", -10**6)
        hi = s.get("maximum", s.get("exclusiveMaximum", 10**6 + 1) - 1)
        return rng.randint(lo, hi) if rng.random() < 0.8 else rng.choice([0, -1, 7, 10**15])
    if t == "number":
        return rng.choice([0, -3, 2.5, -0.001, 1e-7, 123456.789, 6.02e23, rng.uniform(-1e3, 1e3)])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    raise ValueError(t)


def dump(v):
    style = rng.choice(["compact", "spaced", "indent"])
    if style == "compact":
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(v, ensure_ascii=False, indent=2)


def mutate(v, s, root):
    """A document likely (not necessarily) invalid; the oracle decides."""
    s = resolve(s, root)
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice([1.5, "str", True, None, [], {}])
    if isinstance(v, dict) and v:
        k = rng.choice(list(v))
        if kind == 1:
            del v[k]
            return v
        if kind == 2 and isinstance(s, dict) and s.get("additionalProperties") is False:
            v["unknown"] = 1
            return v
        v[k] = rng.choice([1.5, "str", True, None, [3], {"q": 1}])
        return v
    if isinstance(v, list):
        if kind == 1 and v:
            v.pop()
        else:
            v.append(rng.choice([1.5, "s", None, 4, {}]))
        return v
    if isinstance(v, str):
        return v + rng.choice(["x", "\u00e9", "123", "-"])
    return rng.choice(["true", 0.5, "0", [1]])


TEXT_BREAKS = [
    lambda t: t[:-1],
    lambda t: t + ",",
    lambda t: t.replace(":", "", 1),
    lambda t: t.replace('"', "", 1),
    lambda t: t + "}",
    lambda t: t.replace(",", ",,", 1),
]
# Valid JSON, but outside the grammar's canonical form (leading / unbounded whitespace): the
# grammar must refuse these even when the schema accepts them.
NON_CANONICAL = [
    lambda t: "  " + t,
    lambda t: t + " " * 30,
]


def label(schema, text, validator):
    try:
        v = json.loads(text)
    except json.JSONDecodeError:
        return False
    return validator.is_valid(v)


def schema_cases():
    cases = []
    for i, schema in enumerate(SCHEMAS):
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        texts = set()
        pat = isinstance(schema, dict) and ("pattern" in schema or "format" in schema)
        if not pat:
            for _ in range(40):
                texts.add(dump(gen(schema, schema)))
            for _ in range(40):
                v = gen(schema, schema)
                texts.add(dump(mutate(v, schema, schema)))
        base = sorted(texts) or ['""']
        for t in list(base)[:15]:
            texts.add(rng.choice(TEXT_BREAKS)(t))
        texts.update(EXTRA_DOCS.get(i, []))
        docs = [{"text": t, "valid": label(schema, t, validator)} for t in sorted(texts)]
        for t in list(base)[:6]:
            docs.append({"text": rng.choice(NON_CANONICAL)(t), "valid": label(schema, t, validator),
                         "canonical": False})
        pos = sum(d["valid"] for d in docs)
        if pos == 0 or pos == len(docs):
            print(f"warning: schema {i} has {pos}/{len(docs)} valid docs", file=sys.stderr)
        cases.append({"schema": schema, "docs": docs})
    return cases


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "gbnf_cases.json").write_text(json.dumps(gbnf_cases(), ensure_ascii=False, indent=1) + "\n")
    (OUT / "schema_cases.json").write_text(json.dumps(schema_cases(), ensure_ascii=False, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
