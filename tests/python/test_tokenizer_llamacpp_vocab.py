"""Tokenizer vocabularies that ship only with llama.cpp (Qwen3.5's 248k `qwen35`, Gemma 4, ...):
every string of llama.cpp's test-tokenizer-0 vectors (models/ggml-vocab-*.gguf.inp) must give the
ids of the matching .out line, which llama.cpp generated with Hugging Face `tokenizers` from each
model's own tokenizer.json — the independent reference. add_special and parse_special off, as that
test does. The vocab files come from the llama-cpp-python sdist (llamacpp_sdist.py); the ones also
committed in ../shared/fixtures/vocab-gguf run in C++ (tokenizer_gguf_vocab_test)."""
import json
import os
import struct
import subprocess
import tarfile

import pytest

from conftest import BIN
from gguf_meta import read_metadata
from llamacpp_sdist import VENDOR, sdist_dir, sdist_path

SEP = "\n__ggml_vocab_test__\n"
# Vocabularies not covered by the shared fixtures; each must pass in full.
VOCABS = ["qwen35", "qwen2", "command-r", "gemma-4", "starcoder", "refact"]


def vocab_files(name):
    out = os.path.join(sdist_dir(), "vocab")
    paths = [os.path.join(out, f"ggml-vocab-{name}.gguf{ext}") for ext in ("", ".inp", ".out")]
    if not all(os.path.exists(p) for p in paths):
        os.makedirs(out, exist_ok=True)
        with tarfile.open(sdist_path()) as tar:
            for p in paths:
                member = VENDOR + "models/" + os.path.basename(p)
                with tar.extractfile(member) as src, open(p + ".part", "wb") as dst:
                    dst.write(src.read())
                os.replace(p + ".part", p)
    return paths


@pytest.mark.parametrize("name", VOCABS)
def test_vocab_matches_llamacpp_vectors(name, tmp_path):
    if not os.path.exists(BIN):
        pytest.skip("rapid-mlx binary not built")
    gguf, inp, out = vocab_files(name)
    texts = open(inp, encoding="utf-8", newline="").read().split(SEP)
    expected = [line.split() for line in open(out, encoding="utf-8").read().split("\n")[:len(texts)]]
    assert len(texts) == len(expected) >= 30
    rec = tmp_path / "texts.rec"
    with open(rec, "wb") as f:
        for t in texts:
            b = t.encode("utf-8")
            f.write(struct.pack("<I", len(b)) + b)
    r = subprocess.run([BIN, "tokenize", "--tokenizer", gguf, "--records", str(rec), "--no-add-special",
                        "--no-parse-special"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = [line.split() for line in r.stdout.split("\n")[:len(texts)]]
    bad = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not bad, f"{len(bad)} of {len(texts)} differ; first: {bad[0]!r}"
    # And back: the reference ids decode to the text (these vocabularies lose nothing).
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("".join(" ".join(e) + "\n" for e in expected))
    r = subprocess.run([BIN, "detokenize", "--tokenizer", gguf, "--ids-file", str(ids_file)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    decoded = [json.loads(line) for line in r.stdout.split("\n")[:len(texts)]]
    wrong = [(t, d) for t, d in zip(texts, decoded) if t != d]
    assert not wrong, f"{len(wrong)} of {len(texts)} decode differently; first: {wrong[0]!r}"


# Qwen3.5's pre-tokenizer as its tokenizer.json states it (Oniguruma syntax).
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def hf_tokenizer_from_gguf(gguf, split):
    """The Hugging Face tokenizer a byte-level BPE GGUF vocabulary was converted from, rebuilt
    with `tokenizers` itself (vocab, merges, control tokens as special tokens)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    md = read_metadata(gguf, {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"})
    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


def test_qwen35_tokenizer_json_matches_hf_on_corpus(tmp_path):
    """The tokenizer.json path for Qwen3.5: the file rebuilt from llama.cpp's vocab with HF
    `tokenizers` (checked first against llama.cpp's vectors), then rapid-mlx and HF on the 2 MB
    tokenizer corpus, every document identical."""
    tokenizers = pytest.importorskip("tokenizers")
    from test_tokenizer import load_corpus, run_tokenize
    gguf, inp, out = vocab_files("qwen35")
    hf = hf_tokenizer_from_gguf(gguf, QWEN35_SPLIT)
    texts = open(inp, encoding="utf-8", newline="").read().split(SEP)
    expected = [list(map(int, line.split())) for line in open(out, encoding="utf-8").read().split("\n")[:len(texts)]]
    assert [hf.encode(t, add_special_tokens=False).ids for t in texts] == expected
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    docs = load_corpus()
    rec = tmp_path / "corpus.rec"
    with open(rec, "wb") as f:
        for _, d in docs:
            f.write(struct.pack("<I", len(d)) + d)
    ours = run_tokenize(str(path), str(rec), "--no-add-special")
    ref = hf.encode_batch([d.decode("utf-8", errors="replace") for _, d in docs], add_special_tokens=False)
    bad = [i for i, (a, b) in enumerate(zip(ours, ref)) if a != b.ids]
    assert len(ours) == len(docs) and not bad, f"{len(bad)} of {len(docs)} documents differ, first #{bad[:1]}"
