"""Constrained random walks (run by the C++ test binary) validated by the `jsonschema` oracle.

tests/constrain_test.cpp's ConstrainWalk test samples only tokens allowed by the mask over the
Qwen2.5 vocabulary for every schema of tests/golden/constrain/schema_cases.json; with
RAPID_CONSTRAIN_DUMP set it writes the finished documents, which must all be valid JSON that the
schema accepts.
"""
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]


def find_binary():
    env = os.environ.get("RAPID_BUILD_DIR")
    candidates = [Path(env) / "constrain_test"] if env else []
    candidates += sorted(ROOT.glob("build*/constrain_test"), key=lambda p: p.stat().st_mtime, reverse=True)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def test_masked_walks_are_schema_valid(tmp_path):
    binary = find_binary()
    if binary is None:
        pytest.skip("constrain_test not built (scripts/build.sh release)")
    out = tmp_path / "walks.jsonl"
    env = dict(os.environ, RAPID_CONSTRAIN_DUMP=str(out))
    r = subprocess.run([str(binary), "--gtest_filter=ConstrainWalk.*"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cases = json.loads((ROOT / "tests/golden/constrain/schema_cases.json").read_text())
    walks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(walks) > len(cases), "too few finished walks"
    seen = set()
    for w in walks:
        schema = cases[w["schema"]]["schema"]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        doc = json.loads(w["text"])  # must be JSON
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(doc))
        assert not errors, f"schema {w['schema']}: {w['text']!r}: {errors[0].message}"
        seen.add(w["schema"])
    assert len(seen) > len(cases) * 3 // 4, f"only {len(seen)} schemas produced a finished walk"
