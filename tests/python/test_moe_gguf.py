"""The mixture-of-experts GGUF files (scripts/moe_gguf.py: llama.cpp's `qwen3moe` and `qwen35moe`
layouts, experts stacked as 3-D ffn_*_exps tensors, written with gguf-py) end to end:
- `rapid-mlx run --raw` on each f32 file prints mlx-lm's greedy continuation of the Hugging Face /
  MLX copy of the same weights (tokenized from that copy's tokenizer.json by HF `tokenizers`; the
  GGUF carries the same vocabulary), and llama.cpp's own greedy text on the file when
  llama-cpp-python is installed;
- `rapid-mlx serve` on the GGUF answers six clients at once (their rows share experts in one batch)
  with that same text each, and growing multi-turn prompts resume from the prefix cache (KV pages,
  plus recurrent checkpoints on the hybrid) and still match.

Skips when the binary is not built or mlx-lm is not installed."""
from pathlib import Path

import pytest

import conftest
from test_qwen35 import CACHE, PROMPT, clients_at_once_match_mlx_lm, mlx_greedy_text, multi_turn_resumes_and_matches, \
    run_raw, serve_f32, tiny_set

SET = Path(CACHE) / "moe-gguf-tiny"
CONFIGS = ["qwen3-moe", "qwen35-moe"]


@pytest.fixture(scope="module")
def gguf_set():
    return tiny_set(SET, "moe_gguf.py", "qwen35-moe/gguf-f32/model.gguf")


def reference(root, config):
    """The same weights as a directory mlx-lm loads."""
    return root / config / "mlx-f32"


@pytest.mark.parametrize("config", CONFIGS)
def test_run_raw_on_the_gguf_prints_mlx_lm_greedy_text(gguf_set, config):
    assert run_raw(gguf_set / config / "gguf-f32" / "model.gguf") == mlx_greedy_text(reference(gguf_set, config))


@pytest.mark.parametrize("config", CONFIGS)
def test_run_raw_on_the_gguf_prints_llamacpp_greedy_text(gguf_set, config):
    pytest.importorskip("llama_cpp")
    from test_qwen35_gguf import llama_greedy_text
    gguf = gguf_set / config / "gguf-f32" / "model.gguf"
    assert run_raw(gguf) == llama_greedy_text(gguf)


@pytest.fixture(scope="module", params=CONFIGS)
def served(gguf_set, tmp_path_factory, request):
    srv = serve_f32(gguf_set / request.param / "gguf-f32" / "model.gguf", tmp_path_factory.mktemp("moe-gguf"))
    yield srv, reference(gguf_set, request.param)
    conftest.stop(srv)


def test_serve_gguf_completions_match_mlx_lm_with_clients_at_once(served):
    clients_at_once_match_mlx_lm(*served, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model",
                                           "def main():\n", "# MoE\n"])


def test_serve_gguf_multi_turn_prompts_resume_and_match(served):
    multi_turn_resumes_and_matches(*served)
