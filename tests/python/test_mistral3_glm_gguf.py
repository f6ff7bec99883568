"""Devstral Small 2 / Ministral 3 (llama.cpp's `mistral3`) and GLM-4.7-Flash (llama.cpp's
`deepseek2`) as GGUF files of the tiny random-weight models (scripts/mistral3_gguf.py and
scripts/glm_gguf.py apply the converter's transforms with gguf-py):
- the GGUF is right: llama-cpp-python running the f32 file gives mlx-lm's greedy tokens and logits
  on the same weights (a missing Q/K permutation, YaRN attention factor, query scaling, k_b / v_b
  split or gating function would not);
- `rapid-mlx run --raw` on the f32 file prints llama-cpp-python's greedy text of the same prompt
  (both tokenize with the file's own vocabulary: Mistral's tekken pre-tokenizer with <s> added as
  the file says, GLM's glm4), and on the quantized files runs to the end;
- `rapid-mlx tokenize` on the file gives llama.cpp's ids (tekken / glm4 pre-tokenizers);
- `rapid-mlx serve` on the f32 file answers several clients at once with llama.cpp's text, on the
  Q8_0 file with what `run` prints for each prompt alone, and (devstral with Devstral's template,
  glm with GLM-4.6's, in tokenizer.chat_template) picks the tool parser from the file's template and
  answers a chat as llama.cpp continues the rendered conversation.

Skips when the binary is not built or mlx-lm is not installed; the llama.cpp comparisons skip
without llama-cpp-python."""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import conftest
from test_qwen35 import BIN, CACHE, PROMPT, ROOT, STEPS, complete, serve_f32  # skips without mlx-lm

sys.path.insert(0, str(ROOT / "scripts"))  # qwen35_gguf: llama-cpp-python set up as for the goldens

# name -> (its set in the cache, the script that writes it, the model directory in the set)
SETS = {"devstral": ("mistral3-tiny", "mistral3_gguf.py", "devstral"),
        "ministral3": ("mistral3-tiny", "mistral3_gguf.py", "ministral3"),
        "glm": ("glm-tiny", "glm_gguf.py", "glm")}
# the file each script writes last
LAST = {"mistral3_gguf.py": "gguf-f32/greedy.json", "glm_gguf.py": "gguf-f32-kvb/greedy.json"}


def model_dir(name):
    root_name, script, sub = SETS[name]
    root = Path(CACHE) / root_name
    d = root / sub
    if not (d / LAST[script]).exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / script), str(root)], check=True,
                       stdout=subprocess.DEVNULL)
    return d


@pytest.fixture(scope="module", params=sorted(SETS))
def gguf_dir(request):
    return model_dir(request.param)


def llama_text(gguf, prompt, steps=STEPS, chat=False):
    """llama-cpp-python's greedy text of `prompt` on the file: its BOS added as the file says, or
    (chat: a rendered template, which writes <s> itself) control tokens parsed and no BOS added."""
    from qwen35_gguf import llama
    lm = llama(gguf)
    ids = lm.tokenize(prompt.encode(), add_bos=not chat, special=chat)
    out = []
    lm.eval(ids)
    for _ in range(steps):
        t = int(np.argmax(lm.scores[lm.n_tokens - 1]))
        if t == lm.token_eos():
            break
        out.append(t)
        lm.eval([t])
    return lm.detokenize(out).decode("utf-8", errors="replace")



def test_llamacpp_on_the_gguf_gives_mlx_lm_greedy_output(gguf_dir):
    pytest.importorskip("llama_cpp")
    mlx = json.load(open(gguf_dir / "hf-f32" / "greedy.json"))
    lc = json.load(open(gguf_dir / "gguf-f32" / "greedy.json"))
    assert lc["probe_ids"] == mlx["probe_ids"]
    worst = 0.0
    for a, b in zip(mlx["cases"], lc["cases"], strict=True):
        assert a["prompt_ids"] == b["prompt_ids"]
        assert [s["token"] for s in b["steps"]] == [s["token"] for s in a["steps"]], a["prompt"]
        for sa, sb in zip(a["steps"], b["steps"]):
            d = np.abs(np.array(sa["top_logits"] + sa["probe_logits"]) - np.array(sb["top_logits"] + sb["probe_logits"]))
            worst = max(worst, float(d.max()) / sa["max_abs_logit"])
    # measured 3.1e-6 (devstral), 7.8e-6 (ministral3), 2.1e-6 (glm, first steps) on 2026-12-03
    assert worst < 1e-4, worst


# Texts that tell pre-tokenizers apart: contractions, digit runs, punctuation runs, non-Latin
# letters, marks and symbols, whitespace runs and newlines.
TEXTS = ["Hello world, it's 2026-12-03: 1234567 tokens!", "  leading\tspaces\n\n\nand   runs  \r\n",
         "naïve café — déjà vu; ÀÉÎ 東京 Москва 😀👍", "def f(x):\n    return x**2  # it'll do\n",
         "I'M YOU'RE we'd they'LL 3.14e-10 $5,000.00 ((nested)) <|user|> [INST]"]


def test_the_files_vocabulary_tokenizes_as_llamacpp(gguf_dir):
    """`rapid-mlx tokenize` on the file (its tokenizer.ggml.* keys: gpt2 BPE with the tekken or glm4
    pre-tokenizer, BOS as the file says) gives llama.cpp's ids for texts that tell pre-tokenizers
    apart (the tiny vocabulary is small, so most words split: every pre-token boundary shows)."""
    pytest.importorskip("llama_cpp")
    if not Path(BIN).exists():
        pytest.skip(f"{BIN} not built")
    from qwen35_gguf import llama
    gguf = gguf_dir / "gguf-f32" / "model.gguf"
    lm = llama(gguf)
    for text in TEXTS:
        r = subprocess.run([BIN, "tokenize", "--tokenizer", str(gguf), "--no-parse-special", text], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert [int(x) for x in r.stdout.split()] == lm.tokenize(text.encode(), add_bos=True, special=False), text


def test_a_mixture_of_experts_mistral3_file_is_refused_by_key(tmp_path):
    """llama.cpp's mistral3 graph can route experts; ministral3 cannot: such a file is refused
    naming the key and the file, not later on a missing tensor."""
    import mistral3_gguf
    from safetensors.numpy import load_file
    hf = model_dir("ministral3") / "hf-f32"
    gguf = mistral3_gguf.import_gguf()
    tc = json.load(open(hf / "config.json"))
    tensors = mistral3_gguf.hf_to_gguf_tensors(gguf, tc, load_file(str(hf / "model.safetensors")))
    path = tmp_path / "moe.gguf"
    mistral3_gguf.write_gguf(path, tc, tensors, mistral3_gguf.tokenizer_from_json(hf / "tokenizer.json"),
                             extra=lambda w: w.add_expert_count(4))
    rc, _, err = run_raw(path)
    assert rc != 0
    assert "mistral3.expert_count" in err and str(path) in err, err


def run_raw(gguf, *flags):
    if not Path(BIN).exists():
        pytest.skip(f"{BIN} not built")
    r = subprocess.run([BIN, "run", "--model", str(gguf), "--raw", *flags, "--temperature", "0",
                        "--max-tokens", str(STEPS), "--threads", "2", PROMPT], capture_output=True, timeout=120)
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8", errors="replace")


def test_run_raw_prints_llamacpp_greedy_text(gguf_dir):
    """Also on GLM's file with the MTP block the converter appends by default (both engines leave it
    out) and on its file from before MLA absorption (attn_kv_b whole)."""
    pytest.importorskip("llama_cpp")
    for copy in ("gguf-f32", "gguf-f32-mtp", "gguf-f32-kvb"):
        gguf = gguf_dir / copy / "model.gguf"
        if not gguf.exists():
            continue
        want = llama_text(gguf, PROMPT)
        rc, out, err = run_raw(gguf, "--exact", "--kv-dtype", "f32")
        assert rc == 0, err
        assert want, "an empty continuation would compare nothing"
        assert out.removesuffix("\n") == want, (copy, err)


# Quantized files on the shipping path: no token criterion (quantization moves this random model's
# near-tied logits, as for the other tiny GGUF sets), only that the file loads and generates.
def test_run_raw_on_the_quantized_files_generates(gguf_dir):
    for copy in ("gguf-q8_0", "gguf-q4_k"):
        gguf = gguf_dir / copy / "model.gguf"
        if not gguf.exists():
            continue
        rc, out, err = run_raw(gguf)
        assert rc == 0, err
        assert out.strip(), err


@pytest.fixture(scope="module", params=sorted(SETS))
def served(request, tmp_path_factory):
    pytest.importorskip("llama_cpp")
    if not Path(BIN).exists():
        pytest.skip(f"{BIN} not built")
    d = tmp_path_factory.mktemp("gguf-" + request.param)
    gguf = model_dir(request.param) / "gguf-f32" / "model.gguf"
    srv = serve_f32(gguf, d)
    yield srv, gguf, d
    conftest.stop(srv)


def test_serve_completions_match_llamacpp_with_clients_at_once(served):
    """One client per prompt, all at once (their rows share batches; Ministral's query scale and
    YaRN follow each row's own positions): each gets llama.cpp's greedy text on the same file."""
    srv, gguf, _ = served
    prompts = [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model", "def main():\n"]
    with ThreadPoolExecutor(len(prompts)) as ex:
        got = list(ex.map(lambda p: complete(srv, p)[0], prompts))
    assert got == [llama_text(gguf, p) for p in prompts]
    assert srv.alive()


@pytest.fixture(scope="module", params=sorted(SETS))
def served_q8(request, tmp_path_factory):
    if not Path(BIN).exists():
        pytest.skip(f"{BIN} not built")
    d = tmp_path_factory.mktemp("gguf-q8-" + request.param)
    gguf = model_dir(request.param) / "gguf-q8_0" / "model.gguf"
    srv = serve_f32(gguf, d)
    yield srv, gguf
    conftest.stop(srv)


def test_serve_q8_0_clients_at_once_match_run_alone(served_q8):
    """The Q8_0 file on the shipping path: five clients at once (rows batched) get the text that
    `rapid-mlx run --raw` prints for each prompt alone with the same kernels and f32 KV (no
    llama.cpp criterion: its Q8_0 arithmetic differs, and this random model's logits are near-tied)."""
    srv, gguf = served_q8
    prompts = [PROMPT, "class Tiny:\n", "import json\nimport os\n", "    return model", "def main():\n"]
    with ThreadPoolExecutor(len(prompts)) as ex:
        got = list(ex.map(lambda p: complete(srv, p)[0], prompts))
    want = []
    for p in prompts:
        r = subprocess.run([BIN, "run", "--model", str(gguf), "--raw", "--kv-dtype", "f32", "--temperature", "0",
                            "--max-tokens", str(STEPS), "--threads", "2", p], capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        want.append(r.stdout.decode("utf-8").removesuffix("\n"))
    assert got == want
    assert srv.alive()


# name -> (the tool parser the server must pick from the file's template, extra template variables,
# extra request body): devstral carries Devstral's template, glm the GLM-4.6 one (thinking off).
CHAT = {"devstral": ("mistral", {"bos_token": "<s>", "eos_token": "</s>"}, None),
        "glm": ("glm45", {"enable_thinking": False}, {"chat_template_kwargs": {"enable_thinking": False}})}


def test_serve_reads_the_chat_template_from_the_gguf(served):
    """The file carries its chat template (tokenizer.chat_template): the server picks its tool
    parser from it, and a chat reply is llama.cpp's greedy continuation of the conversation rendered
    by jinja2 from the file's own template (control tokens parsed, no BOS added: the template
    writes its own)."""
    srv, gguf, d = served
    from qwen35_gguf import import_gguf
    field = import_gguf().GGUFReader(str(gguf)).fields.get("tokenizer.chat_template")
    name = gguf.parent.parent.name
    if field is None or name not in CHAT:
        pytest.skip("no chat template in this tiny file (written only when the fixture is there)")
    parser, variables, extra_body = CHAT[name]
    assert f"tool parser '{parser}'" in (d / "serve.log").read_text()
    import openai
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=conftest.API_KEY, max_retries=0, timeout=120)
    messages = [{"role": "system", "content": "You are a coding agent. Keep answers short."},
                {"role": "user", "content": "Fix the bug in the parser."}]
    r = client.chat.completions.create(model=conftest.MODEL_NAME, messages=messages, max_tokens=16, temperature=0,
                                       extra_body=extra_body)
    text = r.choices[0].message.content
    assert text, "an empty reply would compare nothing"
    prompt = conftest.template_env().from_string(field.contents()).render(
        messages=messages, add_generation_prompt=True, **variables)
    assert text == llama_text(gguf, prompt, 16, chat=True)
