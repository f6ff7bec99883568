"""The IQ1-IQ3 lattices the C++ dequantizers read (src/tensor/iq_grids.cpp) are gguf-py's, every row:
scripts/make_iq_grids.py renders them from the gguf-py that llama.cpp's sources vendor, and the
committed file must be that text. (model_loader_test's golden then checks the dequantizers, which
expand these rows, against gguf-py on random blocks.)"""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))


def test_committed_grids_are_gguf_pys():
    import make_iq_grids
    try:
        text = make_iq_grids.render()
    except ImportError as e:
        pytest.skip(f"no gguf-py (the llama-cpp-python sdist scripts/setup.sh fetches): {e}")
    with open(make_iq_grids.OUT) as f:
        committed = f.read()
    assert committed == text, "src/tensor/iq_grids.cpp differs from gguf-py's tables: run scripts/make_iq_grids.py"
