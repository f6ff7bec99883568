"""The tiny random-weight Qwen3.5 models (scripts/make_tiny_qwen35.py) end to end: `rapid-mlx run
--raw` and `rapid-mlx serve` (driven by the openai SDK, several clients at once, growing
multi-turn prompts) print the text of mlx-lm's own greedy continuation of the same prompt
(tokenized by HF `tokenizers` from the model's tokenizer.json, decoded the same way); served with
`--speculative mtp` (the model's own random MTP head, scripts/make_qwen35_mtp.py), prompt lookup
or speculation off, the text is the same.

Skips when the binary is not built or mlx-lm is not installed."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import conftest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("RAPID_MLX_BIN", str(ROOT / "build" / "rapid-mlx"))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
TINY = Path(CACHE) / "qwen35-tiny"
TINY_MTP = Path(CACHE) / "qwen35-tiny-mtp"
PROMPT = "def goldens(model_dir, seed):\n    model, _ = load_model("
STEPS = 24

mlx_lm = pytest.importorskip("mlx_lm")


def tiny_set(path, script, marker):
    """The model set at `path`, written by scripts/`script` unless `marker` is already there."""
    if not os.path.exists(BIN):
        pytest.skip(f"{BIN} not built")
    if not (path / marker).exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / script), str(path)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


def run_raw(d):
    """`rapid-mlx run --raw` on the exact path (f32 KV): the greedy continuation of PROMPT."""
    r = subprocess.run([BIN, "run", "--model", str(d), "--raw", "--exact", "--kv-dtype", "f32", "--temperature", "0",
                        "--max-tokens", str(STEPS), "--threads", "2", PROMPT],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    # Decoded by hand: text=True would turn a generated "\r" into "\n" (universal newlines).
    return r.stdout.decode("utf-8").removesuffix("\n")


@pytest.fixture(scope="module")
def tiny():
    return tiny_set(TINY, "make_tiny_qwen35.py", "vheads-untied/mlx-q4/tokenizer.json")


def mlx_greedy_text(model_dir, prompt=PROMPT, steps=STEPS):
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model
    from tokenizers import Tokenizer

    mx.set_default_device(mx.cpu)
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    model, config = load_model(model_dir)
    eos = config.get("text_config", config)["eos_token_id"]
    cache = make_prompt_cache(model)
    logits = model(mx.array([tok.encode(prompt).ids]), cache=cache)[0, -1]
    out = []
    for _ in range(steps):
        t = int(mx.argmax(logits))
        if t == eos:
            break
        out.append(t)
        logits = model(mx.array([[t]]), cache=cache)[0, -1]
    return tok.decode(out)


@pytest.mark.parametrize("config", ["dense-tied", "vheads-untied"])
@pytest.mark.parametrize("copy", ["mlx-f32", "hf-f32", "mlx-q4"])
def test_run_raw_prints_mlx_lm_greedy_text(tiny, config, copy):
    d = tiny / config / copy
    assert run_raw(d) == mlx_greedy_text(d)


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    """serve on the untied model (f32 weights, f32 KV: the same arithmetic as the exact path)."""
    d = tmp_path_factory.mktemp("qwen35")
    model = str(tiny / "vheads-untied" / "mlx-f32")
    srv = conftest.launch(["--kv-dtype", "f32", "--cache-dir", str(d / "kv"), "--cache-key-file", str(d / "kv.key")],
                          str(d / "serve.log"), model=model)
    yield srv, Path(model)
    conftest.stop(srv)


def model_with_template(src, template, d):
    """A model directory under d: src's files (symlinked) with `template` as its chat template."""
    model = d / "model"
    model.mkdir()
    for f in src.iterdir():
        (model / f.name).symlink_to(f)
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template.read_text()}))
    return model


def chat_turns_match_mlx_lm(srv, model, render, extra_body=None, max_tokens=16):
    """A two-turn agent chat through the OpenAI SDK: each reply must be mlx-lm's greedy
    continuation of the conversation as `render` (the model's template) renders it, from scratch.
    Returns each turn's (cached tokens, prompt tokens)."""
    import openai
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=conftest.API_KEY, max_retries=0, timeout=120)
    messages = [{"role": "system", "content": "You are a coding agent. Keep answers short."},
                {"role": "user", "content": "Fix the bug in the parser."}]
    usage = []
    for turn in range(2):
        r = client.chat.completions.create(model=conftest.MODEL_NAME, messages=messages, max_tokens=max_tokens,
                                           temperature=0, extra_body=extra_body)
        text = r.choices[0].message.content
        assert text, f"turn {turn}: an empty reply would compare nothing"
        assert text == mlx_greedy_text(model, render(messages), max_tokens), f"turn {turn}"
        d = r.usage.prompt_tokens_details
        usage.append(((d.cached_tokens or 0) if d else 0, r.usage.prompt_tokens))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Now the tests, please."}]
    return usage


def complete(srv, prompt, max_tokens=STEPS):
    import openai
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=conftest.API_KEY)
    r = client.completions.create(model=conftest.MODEL_NAME, prompt=prompt, max_tokens=max_tokens, temperature=0)
    return r.choices[0].text, r.usage


def serve_f32(model, d, extra=()):
    """serve with f32 KV (on the f32 copy: the same arithmetic as the exact path), its prefix
    cache and log under d."""
    return conftest.launch(["--kv-dtype", "f32", "--cache-dir", str(d / "kv"), "--cache-key-file", str(d / "kv.key"),
                            *extra], str(d / "serve.log"), model=str(model))


def clients_at_once_match_mlx_lm(srv, model, prompts):
    """One client per prompt, all at once (their rows share batches): each gets mlx-lm's greedy text."""
    with ThreadPoolExecutor(len(prompts)) as ex:
        got = list(ex.map(lambda p: complete(srv, p)[0], prompts))
    assert got == [mlx_greedy_text(model, p) for p in prompts]
    assert srv.alive()


def test_serve_completions_match_mlx_lm_with_clients_at_once(served):
    clients_at_once_match_mlx_lm(*served, [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model"])


def test_serve_multi_turn_prompts_recompute_and_match(served):
    multi_turn_resumes_and_matches(*served)


def multi_turn_resumes_and_matches(srv, model):
    """Each turn's prompt extends the last one (as an agent's): later turns resume from the
    recurrent-state checkpoints of earlier ones (prompt and sequence ends) and still continue
    exactly as mlx-lm does from scratch."""
    status, _ = srv.delete("/v1/cache")  # the same cold start whatever ran on this server before
    assert status == 200
    prompt = PROMPT
    cached = []
    for turn in range(4):
        text, usage = complete(srv, prompt, 12)
        assert text == mlx_greedy_text(model, prompt, 12), f"turn {turn}"
        details = getattr(usage, "prompt_tokens_details", None)
        cached.append(details.cached_tokens or 0 if details else 0)
        assert cached[-1] < usage.prompt_tokens
        prompt = prompt + text + "\n# next\n"
    assert cached[0] == 0 and any(cached[1:]), cached


@pytest.fixture(scope="module")
def tiny_mtp(tiny):
    if not (TINY_MTP / "vheads-untied" / "gguf-f32" / "model.gguf").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_qwen35_mtp.py"), str(TINY_MTP)], check=True,
                       stdout=subprocess.DEVNULL)
    return TINY_MTP


@pytest.mark.parametrize("mode,copy", [("mtp", "hf"), ("mtp", "gguf"), ("ngram", "hf"), ("off", "hf")])
def test_serve_speculation_on_the_hybrid_keeps_mlx_lm_text(tiny_mtp, tmp_path, mode, copy):
    """The hybrid with its MTP head: every mode's text equals mlx-lm's greedy continuation (mlx-lm
    drops the head and decodes plainly), for several clients at once; the engine's own counters
    show that MTP drafted (random heads: mostly rejected, so the recurrent state rolled back).
    Prompt lookup drafts only where the random text repeats itself, which it may not. The head
    drafts from the GGUF copy too (llama.cpp's converter's nextn block, scripts/qwen35_gguf.py)."""
    model = tiny_mtp / "vheads-untied"
    served = model / "gguf-f32" / "model.gguf" if copy == "gguf" else model
    srv = conftest.launch(["--kv-dtype", "f32", "--speculative", mode, "--num-speculative-tokens", "3"],
                          str(tmp_path / "serve.log"), model=str(served))
    try:
        prompts = [PROMPT, "class Tiny:\n", "import json\nimport os\n" * 3, "    return model"]
        with ThreadPoolExecutor(len(prompts)) as ex:
            got = list(ex.map(lambda p: complete(srv, p)[0], prompts))
        assert got == [mlx_greedy_text(model, p) for p in prompts]
        status, body = srv.get("/v1/cache", headers={"Authorization": f"Bearer {conftest.API_KEY}"})
        assert status == 200
        spec = json.loads(body)["speculative"]
        assert spec["mode"] == mode
        if mode == "off":
            assert spec["drafted_tokens"] == 0
        if mode == "mtp":
            assert spec["drafted_tokens"] > 0
        assert srv.alive()
    finally:
        conftest.stop(srv)
