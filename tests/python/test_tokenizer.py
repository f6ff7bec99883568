"""rapid-mlx tokenize/detokenize against Hugging Face `tokenizers` (the reference), live, on the
committed corpus tests/corpus/tokenizer_corpus.bin.zst (>= 2 MB; see
scripts/make_tokenizer_corpus.py) for every tokenizer in the fixtures.

Invalid UTF-8: HF takes str, so each document's bytes are decoded with errors='replace' before
HF sees them; rapid-mlx receives the raw bytes and must apply the same repair (each maximal
invalid subsequence -> U+FFFD) itself, so the ids agree exactly.

The binary: $RAPID_MLX_BIN, else build/rapid-mlx, else build-tok/rapid-mlx.
"""
import json
import os
import struct
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "..", "shared", "fixtures", "tokenizers")
CORPUS = os.path.join(ROOT, "tests", "corpus", "tokenizer_corpus.bin.zst")
NAMES = ["gemma3", "gpt2", "llama2", "llama3_1", "mistral_nemo", "qwen2_5", "qwen3"]

tokenizers = pytest.importorskip("tokenizers")


def binary():
    for c in (os.environ.get("RAPID_MLX_BIN"), os.path.join(ROOT, "build", "rapid-mlx"),
              os.path.join(ROOT, "build-tok", "rapid-mlx")):
        if c and os.path.exists(c):
            return c
    pytest.skip("rapid-mlx binary not built")


def load_corpus():
    raw = subprocess.run(["zstd", "-d", "-c", CORPUS], check=True, capture_output=True).stdout
    docs, p = [], 0
    while p < len(raw):
        (kl,) = struct.unpack_from("<I", raw, p); p += 4
        kind = raw[p:p + kl].decode(); p += kl
        (n,) = struct.unpack_from("<I", raw, p); p += 4
        docs.append((kind, raw[p:p + n])); p += n
    return docs


@pytest.fixture(scope="module")
def corpus():
    docs = load_corpus()
    assert sum(len(d) for _, d in docs) >= 2_000_000
    return docs


@pytest.fixture(scope="module")
def records_file(corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "corpus.rec"
    with open(path, "wb") as f:
        for _, d in corpus:
            f.write(struct.pack("<I", len(d)) + d)
    return str(path)


def run_tokenize(tok_dir, records, *flags):
    out = subprocess.run([binary(), "tokenize", "--tokenizer", tok_dir, "--records", records, *flags],
                         check=True, capture_output=True).stdout.decode()
    return [list(map(int, line.split())) for line in out.split("\n")[:-1]]


def run_detokenize(tok_dir, id_lists, *flags):
    with tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False) as f:
        for ids in id_lists:
            f.write(" ".join(map(str, ids)) + "\n")
    try:
        out = subprocess.run([binary(), "detokenize", "--tokenizer", tok_dir, "--ids-file", f.name, *flags],
                             check=True, capture_output=True).stdout.decode()
    finally:
        os.unlink(f.name)
    return [json.loads(line) for line in out.split("\n")[:-1]]


def first_diff(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n


def check_encode(name, hf, want, got, corpus):
    assert len(got) == len(want)
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    if not bad:
        return None
    i = bad[0]
    k = first_diff(got[i], want[i])
    return (f"{name}: {len(bad)} of {len(want)} documents differ; doc {i} ({corpus[i][0]}): first diff "
            f"at token {k}: hf {want[i][max(0, k-3):k+5]} ours {got[i][max(0, k-3):k+5]} "
            f"hf pieces {[hf.id_to_token(t) for t in want[i][max(0, k-3):k+5]]}")


def check_decode(name, want, got):
    assert len(got) == len(want)
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    if not bad:
        return None
    i = bad[0]
    k = first_diff(got[i], want[i])
    return (f"{name}: {len(bad)} of {len(want)} decodes differ; case {i}: "
            f"hf {want[i][max(0, k-20):k+20]!r} ours {got[i][max(0, k-20):k+20]!r}")


# One test per tokenizer: loading the large ones dominates, so each is loaded once per side.
@pytest.mark.parametrize("name", NAMES)
def test_matches_hf(name, corpus, records_file):
    import random
    tok_dir = os.path.join(FIX, name)
    hf = tokenizers.Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    texts = [d.decode("utf-8", errors="replace") for _, d in corpus]
    errors = []

    # 1. encode with BOS/EOS per the post-processor and special tokens parsed.
    ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=True)]
    errors.append(check_encode(name, hf, ids, run_tokenize(tok_dir, records_file), corpus))

    # 2. encode without special handling: no BOS/EOS, special-token text stays text.
    hf.encode_special_tokens = True
    plain = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    hf.encode_special_tokens = False
    errors.append(check_encode(name + " (no special)", hf, plain,
                               run_tokenize(tok_dir, records_file, "--no-add-special", "--no-parse-special"),
                               corpus))

    # 3. decode the corpus ids and random id sequences (arbitrary byte tokens, specials, split
    #    UTF-8 sequences), with and without skipping special tokens.
    rng = random.Random(7)
    vs = hf.get_vocab_size()
    id_lists = ids + [[rng.randrange(vs) for _ in range(rng.randint(1, 60))] for _ in range(300)]
    for skip in (False, True):
        want = hf.decode_batch(id_lists, skip_special_tokens=skip)
        got = run_detokenize(tok_dir, id_lists, *(["--skip-special"] if skip else []))
        errors.append(check_decode(f"{name} (skip_special={skip})", want, got))

    errors = [e for e in errors if e]
    assert not errors, "\n".join(errors)


def test_cli_single_text_and_pieces():
    tok_dir = os.path.join(FIX, "qwen3")
    hf = tokenizers.Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    text = "Hello <|im_start|>world 你好"
    out = subprocess.run([binary(), "tokenize", "--tokenizer", tok_dir, text], check=True,
                         capture_output=True, text=True).stdout.split()
    assert list(map(int, out)) == hf.encode(text).ids
    out = subprocess.run([binary(), "tokenize", "--tokenizer", tok_dir, "--pieces", text], check=True,
                         capture_output=True, text=True).stdout.split(" ")
    assert [p.split(":", 1)[1].strip() for p in out] == [hf.id_to_token(i) for i in hf.encode(text).ids]


def test_cli_errors_are_clear(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    r = subprocess.run([binary(), "tokenize", "--tokenizer", str(bad), "x"], capture_output=True, text=True)
    assert r.returncode != 0 and "tokenizer.json" in r.stderr
    r = subprocess.run([binary(), "detokenize", "--tokenizer", os.path.join(FIX, "gpt2"), "99999999"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "outside the vocabulary" in r.stderr


@pytest.mark.parametrize("name", ["qwen3", "llama2"])
def test_long_runs_match_hf(name, tmp_path):
    # Pieces of hundreds of kilobytes (one pre-token each): regex stack limits, BPE on huge words.
    texts = [" " * 300000, "a" * 300000, "ab " * 100000, "1" * 200000, "\n" * 100000 + "x", "é" * 100000]
    rec = tmp_path / "long.rec"
    with open(rec, "wb") as f:
        for s in texts:
            b = s.encode()
            f.write(struct.pack("<I", len(b)) + b)
    hf = tokenizers.Tokenizer.from_file(os.path.join(FIX, name, "tokenizer.json"))
    want = [e.ids for e in hf.encode_batch(texts)]
    got = run_tokenize(os.path.join(FIX, name), str(rec))
    assert [g == w for g, w in zip(got, want)] == [True] * len(texts)
