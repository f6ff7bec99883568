"""GGUF types that no released SmolLM2 file holds, on the real model: SmolLM2-135M-Instruct
requantized from its Q8_0 file by llama.cpp's own quantizer (llama_model_quantize) to IQ4_NL and
IQ4_XS, and by ggml's tensor quantizer to the IQ1-IQ3 lattice types (checked against the file's
exact distribution, llama_numpy, below). SmolLM2's 576-wide rows are not whole 256-element
super-blocks, so the IQ4_XS file holds
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


def quantized(ftype, lattice=False):
    """SOURCE requantized: by llama.cpp's model quantizer to ftype, or (lattice) its 1536-wide down
    projections alone by ggml's tensor quantizer to GGML type ftype (scripts/iq_requantize.py)."""
    path = os.path.join(DERIVED, f"smollm2-{'down-' if lattice else ''}{ftype.lower()}.gguf")
    if not os.path.exists(path):
        if not os.path.exists(SOURCE):
            pytest.skip(f"{SOURCE} absent (run scripts/fetch_models.sh)")
        import iq_requantize
        import qwen35_gguf
        os.makedirs(DERIVED, exist_ok=True)
        if lattice:
            iq_requantize.requantize(SOURCE, path, ftype)
        else:
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
    """Per prompt: the largest |ours − llama.cpp's| log-probability over our top TOP tokens, whether
    our top token is llama.cpp's or within 0.5 of it (a near tie either engine may break), and what
    exact_judge needs to settle a disagreement."""
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
        rows.append((p, worst, lp.max() - lp[text[best]] if best in text else math.inf, (ids, top, lp, llm)))
    return rows


def exact_judge(path, ids, top, theirs, llm):
    """Where ours and llama.cpp's log-probabilities disagree on one prompt: each engine's largest
    distance from the file's exact ones (llama_numpy's float64 pass over gguf-py's dequantization),
    ours over our top TOP tokens, llama.cpp's over the exact top TOP."""
    import llama_numpy
    exact = llama_numpy.next_token_logprobs(path, [ids])[0]
    text = {llm.detokenize([int(t)]).decode(errors="replace"): t for t in np.argsort(-exact)[:200]}
    mine = max(abs(v - exact[text[t]]) if t in text else math.inf for t, v in top.items())
    o = np.argsort(-exact)[:TOP]
    return mine, float(np.abs(theirs[o] - exact[o]).max())


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def q4_1_worst(llama_cpp, tmp_path_factory):
    if not os.path.exists(MODEL):
        pytest.skip(f"{MODEL} absent (run scripts/fetch_models.sh)")
    return max(r[1] for r in distances(MODEL, tmp_path_factory.mktemp("q4_1")))


@pytest.mark.parametrize("ftype", ["IQ4_NL", "IQ4_XS"])
def test_next_token_logprobs_are_llamacpps(ftype, q4_1_worst, tmp_path):
    path = quantized(ftype)
    rows = distances(path, tmp_path)
    bound = max(0.75, 3 * q4_1_worst)
    for p, worst, gap, (ids, top, lp, llm) in rows:
        # Measured (AMD EPYC, AVX-512), the worst of the top 5 per prompt: Q4_1 0.08-0.27 (median
        # 0.14), IQ4_NL 0.09-0.28 (0.13), IQ4_XS 0.05-0.69 (0.17; llama.cpp's Q8_K activations for
        # it are coarser than our 32-element blocks, and the worst is a token 3 nats below the top).
        # On an AVX2-only EPYC, IQ4_XS "The capital of France is" came out 0.755 apart: there
        # llama.cpp was 0.78 from the exact log-probabilities and ours 0.12. A disagreement past the
        # bound is settled by the exact ones: ours must be within the bound of them, and closer.
        if worst > bound:
            mine, theirs = exact_judge(path, ids, top, lp, llm)
            assert mine <= bound and mine < theirs, \
                f"{ftype} {p!r}: log-probabilities {worst:.3f} apart; from the exact ones ours {mine:.3f}, llama.cpp's {theirs:.3f}"
        assert gap <= 0.5, f"{ftype} {p!r}: our top token is {gap:.3f} below llama.cpp's best"
    assert np.median([r[1] for r in rows]) <= 0.25, [r[:3] for r in rows]


def exact_distances(path, tmp_path):
    """Per prompt, against the exact distribution (llama_numpy's float64 forward pass over gguf-py's
    dequantization of the file): the largest |ours − exact| log-probability over our top TOP tokens,
    and the same for llama.cpp over the exact top TOP."""
    import llama_numpy
    import qwen35_gguf
    need_server()
    llm = qwen35_gguf.llama(path, n_ctx=256)
    ids = [llm.tokenize(p.encode(), add_bos=False, special=False) for p in PROMPTS]
    exact = llama_numpy.next_token_logprobs(path, ids)
    # An f32 KV cache in both engines: the default f16 one alone moves these log-probabilities by up
    # to 0.3-0.5 nats.
    srv = launch(["--kv-dtype", "f32"], str(tmp_path / f"{os.path.basename(path)}.log"), model=path, name="m")
    try:
        ours = our_logprobs(srv)
    finally:
        stop(srv)
    rows = []
    for p, i, lp in zip(PROMPTS, ids, exact):
        n, top = ours[p]
        assert n == len(i), f"{p!r}: {n} prompt tokens here, {len(i)} in llama.cpp's tokenizer"
        text = {llm.detokenize([int(t)]).decode(errors="replace"): t for t in np.argsort(-lp)[:200]}
        mine = max(abs(v - lp[text[t]]) if t in text else math.inf for t, v in top.items())
        llm.reset()
        llm.eval(i)
        lg = np.array(llm.scores[len(i) - 1], dtype=np.float64)
        theirs = lg - lg.max() - math.log(np.exp(lg - lg.max()).sum())
        o = np.argsort(-lp)[:TOP]
        rows.append((p, mine, float(np.abs(theirs[o] - lp[o]).max())))
    return rows


@pytest.mark.parametrize("ftype", ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"])
def test_lattice_types_give_the_files_exact_logprobs(ftype, llama_cpp, tmp_path):
    """The IQ1-IQ3 lattice types in SmolLM2's down projections (its only rows of whole super-blocks;
    the rest stays Q8_0): our next-token log-probabilities are at least as close to the file's exact
    ones (llama_numpy) as llama.cpp's. On such coarse weights both engines' int8 activations move
    them further than on the Q8_0 source (measured, worst of the top 5 per prompt, median over 8:
    Q8_0 source ours 0.05-0.24, llama.cpp 0.08-0.35; IQ2_XXS ours 0.13-0.58 (0.24), llama.cpp
    0.22-0.92 (0.54); IQ1_S ours 0.23-0.96 (0.35), llama.cpp 0.29-1.0 (0.57)). The top token is not
    asserted: at 1.5-2 bits these distributions are nearly flat (five tokens within a nat), and
    llama.cpp's top token misses the exact one as well.

    The worst prompt is a loose check at 1.5-1.75 bits: there it moves by up to half a nat with the
    float order of the same exact integer dots (IQ1_S, worst of 8 prompts, AVX2 host: scalar
    kernels 0.83, AVX2 per-block Q8_0 rows 1.25, AVX2 lane Q8_0 rows 1.33; llama.cpp 1.07; a single
    prompt moved 0.63 -> 1.22 -> 1.16), so it only catches what is wrong by more than that."""
    rows = exact_distances(quantized(ftype, lattice=True), tmp_path)
    print(ftype, [(round(float(m), 3), round(float(t), 3)) for _, m, t in rows])
    mine, theirs = [m for _, m, _ in rows], [t for _, _, t in rows]
    assert np.median(mine) <= np.median(theirs) + 0.05, rows
    assert max(mine) <= max(theirs) + (0.5 if ftype.startswith("IQ1") else 0.25), rows
