"""A peer server's own API tests against rapid-mlx: llama.cpp's server test files for OpenAI chat
completions, Anthropic Messages and the Responses API, unchanged, on rapid-mlx's stand-in harness
(tests/llamacpp_adapter/: utils.py starts `rapid-mlx serve` on SmolLM2; conftest.py lists every
deselected test with its reason). Every other test must pass.

llama.cpp's code is not part of this repository: its tests come from the llama-cpp-python sdist
(which vendors llama.cpp), fetched with pip once into the model cache (scripts/setup.sh does it
too), checked against a pinned SHA-256 and unpacked into a temporary folder per run."""
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import BIN, MODEL, ROOT, need_server
from llamacpp_sdist import VENDOR, sdist_path

SUITE = VENDOR + "tools/server/tests/unit/"
FILES = ["test_chat_completion.py", "test_compat_anthropic.py", "test_compat_oai_responses.py"]
ADAPTER = os.path.join(ROOT, "tests", "llamacpp_adapter")


def test_llamacpp_server_suite(tmp_path):
    need_server()
    work = tmp_path / "suite"
    (work / "unit").mkdir(parents=True)
    with tarfile.open(sdist_path()) as tar:
        for name in FILES:
            with tar.extractfile(SUITE + name) as src, open(work / "unit" / name, "wb") as dst:
                shutil.copyfileobj(src, dst)
    for name in ("utils.py", "conftest.py"):
        shutil.copy(os.path.join(ADAPTER, name), work / name)
    (work / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow\n    serial\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {**os.environ, "RAPID_MLX_BIN": BIN, "RAPID_TEST_MODEL": MODEL, "RAPID_LLAMACPP_LOGS": str(logs)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "unit"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    print(summary)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors|deselected|skipped)", summary)}
    assert counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("skipped"), summary
