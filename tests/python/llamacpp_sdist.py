"""llama.cpp's own test material, from the llama-cpp-python sdist (which vendors llama.cpp):
fetched with pip once into the model cache (scripts/setup.sh --test-clients does it too) and
checked against a pinned SHA-256. Nothing of it enters this repository."""
import hashlib
import os
import subprocess
import sys

import pytest

from conftest import CACHE

SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
VENDOR = "llama_cpp_python-0.3.36/vendor/llama.cpp/"


def sdist_dir():
    return os.path.join(os.path.dirname(CACHE.rstrip("/")), "llamacpp-tests")


def sdist_path():
    d = sdist_dir()
    path = os.path.join(d, SDIST)
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                            "llama-cpp-python==0.3.36", "-d", d], capture_output=True, text=True, timeout=1200)
        if r.returncode != 0 or not os.path.exists(path):
            pytest.skip(f"cannot download {SDIST} (offline?): {r.stderr[-500:]}")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert digest == SDIST_SHA256, f"{path}: unexpected SHA-256 {digest}"
    return path
