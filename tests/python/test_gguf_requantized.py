"""GGUF types that no released SmolLM2 file holds, on the real model: SmolLM2-135M-Instruct
requantized from its Q8_0 file by llama.cpp's own quantizer (llama_model_quantize) to IQ4_NL and
IQ4_XS. SmolLM2's 576-wide rows are not whole 256-element super-blocks, so the IQ4_XS file holds
IQ4_XS in the 1536-wide down projections and IQ4_NL elsewhere (its Q2_K recipe holds no Q2_K at all:
Q3_K and Q4_0 fallbacks, so Q2_K is left to compute_test). The next-token log-probabilities
`rapid-mlx serve` reports at the end of several prompts are llama-cpp-python's on the same file,
within what two engines that quantize activations differently (llama.cpp: Q8_K blocks of 256 for
IQ4_XS) can agree on; Q4_1, long validated, is run the same way as the yardstick.

The files are written once into the model cache (derived/smollm2-requantized/). Skips without
llama-cpp-python; the formats' dequantization is checked against gguf-py in model_loader_test and
their kernels against it in compute_test, on every ISA, in CI."""
import json
import math
import os
import sys

import numpy as np
import pytest

from conftest import CACHE, MODEL, ROOT, launch, need_server, stop

SOURCE = os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q8_0.gguf")
DERIVED = os.path.join(CACHE, "derived", "smollm2-requantized")
PROMPTS = ["The capital of France is", "def fibonacci(n):\n", "Once upon a time, there was a",
           "The three primary colors are", "import numpy as np\n", "Water boils at",
           "My favourite food is", "In 1492, Columbus"]
TOP = 5

sys.path.insert(0, os.path.join(ROOT, "scripts"))


def quantized(ftype):
    path = os.path.join(DERIVED, f"smollm2-{ftype.lower()}.gguf")
    if not os.path.exists(path):
        if not os.path.exists(SOURCE):
            pytest.skip(f"{SOURCE} absent (run scripts/fetch_models.sh)")
        import qwen35_gguf
        os.makedirs(DERIVED, exist_ok=True)
        qwen35_gguf.quantize(SOURCE, path, "MOSTLY_" + ftype, requantize=True)
    return path


def llama_logprobs(path):
    """{prompt: (token ids, log-probabilities of the next token)} from llama-cpp-python."""
    import qwen35_gguf
    llm = qwen35_gguf.llama(path, n_ctx=256)  # all logits, no extra buffer types (AMX machines)
    out = {}
    for p in PROMPTS:
        ids = llm.tokenize(p.encode(), add_bos=False, special=False)
        llm.reset()
        llm.eval(ids)
        lg = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        lp = lg - lg.max() - math.log(np.exp(lg - lg.max()).sum())
        out[p] = (ids, lp, llm)
    return out


def our_logprobs(srv):
    """{prompt: (prompt tokens, {token text: log-probability}) of our top TOP} from /v1/completions."""
    out = {}
    for p in PROMPTS:
        code, body = srv.post("/v1/completions", {"model": "m", "prompt": p, "max_tokens": 1, "temperature": 0,
                                                  "logprobs": TOP})
        assert code == 200, body
        r = json.loads(body)
        out[p] = (r["usage"]["prompt_tokens"], r["choices"][0]["logprobs"]["top_logprobs"][0])
    return out


def distances(path, tmp_path):
    """Per prompt: the largest |ours − llama.cpp's| log-probability over our top TOP tokens, and
    whether our top token is llama.cpp's or within 0.5 of it (a near tie either engine may break)."""
    need_server()
    ref = llama_logprobs(path)
    srv = launch([], str(tmp_path / f"{os.path.basename(path)}.log"), model=path, name="m")
    try:
        ours = our_logprobs(srv)
    finally:
        stop(srv)
    rows = []
    for p in PROMPTS:
        ids, lp, llm = ref[p]
        n, top = ours[p]
        assert n == len(ids), f"{p!r}: {n} prompt tokens here, {len(ids)} in llama.cpp"
        # llama.cpp's 200 likeliest by text; one of our top tokens not among them counts as infinitely far.
        text = {llm.detokenize([int(i)]).decode(errors="replace"): i for i in np.argsort(-lp)[:200]}
        worst = max(abs(v - lp[text[t]]) if t in text else math.inf for t, v in top.items())
        best = max(top, key=top.get)
        rows.append((p, worst, lp.max() - lp[text[best]] if best in text else math.inf))
    return rows


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def q4_1_worst(llama_cpp, tmp_path_factory):
    if not os.path.exists(MODEL):
        pytest.skip(f"{MODEL} absent (run scripts/fetch_models.sh)")
    return max(w for _, w, _ in distances(MODEL, tmp_path_factory.mktemp("q4_1")))


@pytest.mark.parametrize("ftype", ["IQ4_NL", "IQ4_XS"])
def test_next_token_logprobs_are_llamacpps(ftype, q4_1_worst, tmp_path):
    rows = distances(quantized(ftype), tmp_path)
    for p, worst, gap in rows:
        # Measured (AMD EPYC, AVX-512), the worst of the top 5 per prompt: Q4_1 0.08-0.27 (median
        # 0.14), IQ4_NL 0.09-0.28 (0.13), IQ4_XS 0.05-0.69 (0.17; llama.cpp's Q8_K activations for
        # it are coarser than our 32-element blocks, and the worst is a token 3 nats below the top).
        assert worst <= max(0.75, 3 * q4_1_worst), f"{ftype} {p!r}: log-probabilities {worst:.3f} apart"
        assert gap <= 0.5, f"{ftype} {p!r}: our top token is {gap:.3f} below llama.cpp's best"
    assert np.median([w for _, w, _ in rows]) <= 0.25, rows
