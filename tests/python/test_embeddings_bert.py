"""/v1/embeddings from BERT encoders (sentence-transformers layout) against an independent oracle:
mlx-embeddings' BERT forward (weights cast to f32) pooled in numpy as the model's own
sentence-transformers files say (modules.json, 1_Pooling/config.json, 2_Normalize,
sentence_bert_config.json's max_seq_length), token ids and truncation from Hugging Face
`tokenizers`. The tiny random models come from scripts/make_tiny_bert.py: mean pooling over f32
weights and CLS pooling over bf16 weights (BERT, WordPiece), mean pooling over f16 weights
(RoBERTa: positions after padding_idx + 1, byte-level BPE). (sentence-transformers itself needs torch: see
test_embeddings.py.) Served beside the SmolLM2 chat model, alone, and beside --models-dir."""
import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import API_KEY, BIN, CACHE, ROOT, launch, need_server, stop
from embedding_checks import PoolingOracle, assert_close, check_concurrent_embeddings_and_chat, embed

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_tiny_bert  # noqa: E402

TEXTS = ["hello world", "The Quick brown FOX, jumps over the lazy dog!", "Café naïve résumé ÜBER straße",
         "数据模型 ✓ — 向量", "def add(a, b):\n\treturn a + b", "x", "zzqx 0123 ~~ \u200b\u0301e\u00a0",
         "embeddings " * 80]
MODELS = [m[0] for m in make_tiny_bert.MODELS]


@pytest.fixture(scope="module")
def tiny_root():
    root = os.path.join(CACHE, "tiny-bert-st-v2")
    if not os.path.exists(os.path.join(root, "golden.json")):
        make_tiny_bert.make_set(root)
    return root


class Oracle(PoolingOracle):
    """mlx-embeddings' BERT / XLM-RoBERTa forward; HF tokenizers truncating as sentence-transformers
    does: tokenizer(texts, truncation=True, max_length=max_seq_length)."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        super().__init__(path)
        self.model = make_tiny_bert.load_oracle_model(path)
        with open(os.path.join(path, "sentence_bert_config.json")) as f:
            self.max_seq_length = json.load(f)["max_seq_length"]
        self.tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        self.tok.enable_truncation(max_length=self.max_seq_length)

    def hidden(self, ids):
        return make_tiny_bert.hidden_states(self.model, ids)


@pytest.fixture(scope="module")
def oracles(tiny_root):
    return {name: Oracle(os.path.join(tiny_root, name)) for name in MODELS}


@pytest.fixture(scope="module")
def beside_chat(tiny_root, tmp_path_factory):
    """SmolLM2 chat + the mean-pooling BERT as --embedding-model."""
    need_server()
    d = tmp_path_factory.mktemp("bert-beside")
    s = launch(["--embedding-model", os.path.join(tiny_root, "mean-f32"), "--no-persist-cache"], str(d / "serve.log"))
    yield s
    stop(s)


@pytest.fixture(scope="module")
def servers(beside_chat, tiny_root, tmp_path_factory):
    """Each model's server and served name: the mean-pooling BERT beside chat; the CLS-pooling bf16
    BERT and the RoBERTa (byte-level BPE, f16, mean pooling) each as the only --model (embeddings
    only)."""
    out = {"mean-f32": (beside_chat, "mean-f32")}
    for model, name in (("cls-bf16", "bert-cls"), ("roberta-mean-f16", "roberta")):
        d = tmp_path_factory.mktemp(name)
        out[model] = (launch(["--no-persist-cache"], str(d / "serve.log"), model=os.path.join(tiny_root, model),
                             name=name), name)
    yield out
    for model in ("cls-bf16", "roberta-mean-f16"):
        stop(out[model][0])


@pytest.mark.parametrize("name", MODELS)
def test_strings_match_the_oracle(servers, oracles, name):
    srv, model_id = servers[name]
    oracle = oracles[name]
    for text in TEXTS:
        out = embed(srv, {"model": model_id, "input": text})
        assert out["model"] == model_id and out["data"][0]["index"] == 0
        assert_close(out["data"][0]["embedding"], oracle.embed(text))
        n = len(oracle.ids(text))
        assert out["usage"] == {"prompt_tokens": n, "total_tokens": n}


@pytest.mark.parametrize("name", MODELS)
def test_list_token_ids_base64_and_dimensions(servers, oracles, name):
    srv, model_id = servers[name]
    oracle = oracles[name]
    out = embed(srv, {"model": model_id, "input": TEXTS})
    assert [d["index"] for d in out["data"]] == list(range(len(TEXTS)))
    for d, text in zip(out["data"], TEXTS):
        assert_close(d["embedding"], oracle.embed(text))
    assert out["usage"]["prompt_tokens"] == sum(len(oracle.ids(t)) for t in TEXTS)
    # Token ids are taken as given: no [CLS]/[SEP] added, nothing truncated.
    ids = [oracle.ids(t) for t in TEXTS[:3]] + [oracle.ids(TEXTS[1])[1:-1]]
    many = embed(srv, {"input": ids})
    for d, i in zip(many["data"], ids):
        assert_close(d["embedding"], oracle.embed_ids(i))
    b64 = embed(srv, {"input": TEXTS, "encoding_format": "base64"})
    for df, db in zip(out["data"], b64["data"]):
        dec = np.frombuffer(base64.b64decode(db["embedding"]), dtype="<f4")
        assert np.array_equal(dec, np.asarray(df["embedding"], dtype=np.float32))
    for dims in (1, 16, 64):
        v = embed(srv, {"input": TEXTS[2], "dimensions": dims})["data"][0]["embedding"]
        assert len(v) == dims
        assert_close(v, oracle.embed(TEXTS[2], dims))


def test_long_text_is_truncated_as_sentence_transformers_does(servers, oracles):
    """max_seq_length 48 (sentence_bert_config.json): the text's tokens are cut, [CLS]/[SEP] kept."""
    srv, _ = servers["mean-f32"]
    oracle = oracles["mean-f32"]
    text = "the quick brown fox jumps over the lazy dog " * 40
    assert len(oracle.ids(text)) == 48
    out = embed(srv, {"input": [text, "hello world"]})
    assert_close(out["data"][0]["embedding"], oracle.embed(text))
    assert out["usage"]["prompt_tokens"] == 48 + len(oracle.ids("hello world"))


@pytest.mark.parametrize("name", MODELS)
def test_token_ids_beyond_the_positions_are_a_400(servers, name):
    srv, _ = servers[name]
    status, raw = srv.post("/v1/embeddings", {"input": [5] * 129})
    err = json.loads(raw)["error"]
    assert status == 400 and err["code"] == "context_length_exceeded" and "128" in err["message"]
    status, raw = srv.post("/v1/embeddings", {"input": [[5, 6], [1 << 20]]})
    assert status == 400 and json.loads(raw)["error"]["param"] == "input"
    assert srv.alive()


def test_openai_sdk_against_an_encoder(servers, oracles):
    import openai
    srv, model_id = servers["cls-bf16"]
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    r = client.embeddings.create(model=model_id, input=TEXTS[:3])  # base64 on the wire
    for d, text in zip(r.data, TEXTS[:3]):
        assert_close(d.embedding, oracles["cls-bf16"].embed(text))
    assert [m.id for m in client.models.list().data] == [model_id]


def test_encoder_alone_serves_no_chat(servers):
    srv, _ = servers["cls-bf16"]
    assert srv.get("/health")[0] == 200
    status, raw = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    err = json.loads(raw)["error"]
    assert status == 404 and "embeddings only" in err["message"]
    status, raw = srv.post("/v1/chat/completions", {"model": "bert-cls", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 404
    assert srv.alive()


@pytest.mark.parametrize("name", ["mean-f32", "roberta-mean-f16"])
def test_tokenizer_matches_hf_tokenizers(tiny_root, tmp_path, name):
    """The WordPiece pipeline (BertNormalizer, BertPreTokenizer, [CLS] $A [SEP]) and RoBERTa's
    byte-level BPE (<s> $A </s>) on hostile text."""
    from tokenizers import Tokenizer
    path = os.path.join(tiny_root, name)
    hf = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    texts = TEXTS + ["", " ", "\x00\x01 a\tb\r\nc", "ÀÉÎÕÜ àéîõü ñ ç", "e\u0301 a\u0308 Å", "ＡＢＣ１２３",
                     "日本語のテキスト", "한국어", "a" * 150, "hello[SEP]world [CLS]", "über-straße's \"quotes\"",
                     "😀 emoji 👍🏽", "tab\there", "mixed中文english", "\u2028\u2029\u3000", "۱۲۳ ١٢٣"]
    rec = tmp_path / "texts.rec"
    with open(rec, "wb") as f:
        for t in texts:
            b = t.encode()
            f.write(len(b).to_bytes(4, "little") + b)
    got = subprocess.run([BIN, "tokenize", "--tokenizer", path, "--records", str(rec)], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    for t, line in zip(texts, got):
        assert [int(x) for x in line.split()] == hf.encode(t).ids, t


def test_concurrent_encoder_embeddings_and_chat(servers, oracles):
    srv, _ = servers["mean-f32"]
    want = {t: oracles["mean-f32"].embed(t) for t in TEXTS}
    check_concurrent_embeddings_and_chat(srv, TEXTS, want, ["Name a colour.", "What is 2+2?", "Say hi."])


def test_embeddings_do_not_load_models_dir_chat_models(tiny_root, oracles, tmp_path):
    """With --models-dir, /v1/embeddings answers from the embedding model and loads no chat model."""
    need_server()
    from conftest import MODEL
    shelf = tmp_path / "models"
    shelf.mkdir()
    os.symlink(MODEL, shelf / "smol.gguf")
    s = launch(["--no-persist-cache", "--models-dir", str(shelf), "--embedding-model",
                os.path.join(tiny_root, "mean-f32")], str(tmp_path / "serve.log"), model=None, name=None)
    try:
        for model in (None, "mean-f32"):
            body = {"input": TEXTS[:2], **({"model": model} if model else {})}
            for d, t in zip(embed(s, body)["data"], TEXTS[:2]):
                assert_close(d["embedding"], oracles["mean-f32"].embed(t))
        status, raw = s.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
        states = {m["id"]: m.get("state") for m in json.loads(raw)["data"]}
        assert states["smol.gguf"] == "not-loaded", states
        status, raw = s.post("/v1/embeddings", {"model": "smol.gguf", "input": "a"})
        assert status == 404 and json.loads(raw)["error"]["code"] == "model_not_found"
        assert s.get("/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})[0] == 200
        assert "rapid_model_loads_total 0" in s.get("/metrics")[1].decode()
    finally:
        stop(s)


def test_bad_encoder_files_are_refused_with_their_path(tiny_root, tmp_path):
    import shutil
    from conftest import MODEL
    need_server()
    bad = tmp_path / "bert"
    shutil.copytree(os.path.join(tiny_root, "mean-f32"), bad)
    cfg = bad / "config.json"
    c = json.loads(cfg.read_text())
    c["position_embedding_type"] = "relative_key"
    cfg.write_text(json.dumps(c))
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--embedding-model", str(bad), "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and str(cfg) in r.stderr and "relative_key" in r.stderr
    c["position_embedding_type"] = "absolute"
    cfg.write_text(json.dumps(c))
    st = bad / "sentence_bert_config.json"
    st.write_text(json.dumps({"max_seq_length": 48, "do_lower_case": True}))
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--embedding-model", str(bad), "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and str(st) in r.stderr and "do_lower_case" in r.stderr


def test_xlm_roberta_unigram_tokenizer_is_refused_with_its_path(tiny_root, tmp_path):
    """XLM-R's layers would run, its SentencePiece Unigram tokenizer does not (yet): said at start."""
    import shutil
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    need_server()
    xlmr = tmp_path / "xlmr"
    shutil.copytree(os.path.join(tiny_root, "roberta-mean-f16"), xlmr)
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(make_tiny_bert.VOCAB_CORPUS, trainers.UnigramTrainer(
        vocab_size=60, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"))
    tok.save(str(xlmr / "tokenizer.json"))
    cfg = json.loads((xlmr / "config.json").read_text())
    cfg["model_type"] = "xlm-roberta"
    (xlmr / "config.json").write_text(json.dumps(cfg))
    r = subprocess.run([BIN, "serve", "--model", str(xlmr), "--port", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and str(xlmr / "tokenizer.json") in r.stderr and "Unigram" in r.stderr


def test_task_model_prefix_and_old_layer_norm_names(tiny_root, oracles, tmp_path):
    """A checkpoint saved from a task model (BertForMaskedLM & co: every tensor under "bert.", plus
    a head the encoder ignores) and one with the old LayerNorm.gamma / .beta names give the same
    vectors as the sentence-transformers layout they were rewritten from."""
    import shutil
    from safetensors.numpy import load_file, save_file
    need_server()
    src = os.path.join(tiny_root, "mean-f32")
    w = load_file(os.path.join(src, "model.safetensors"))
    head = {"cls.predictions.bias": np.zeros(4, np.float32)}
    variants = {
        "prefixed": {**{"bert." + k: v for k, v in w.items()}, **head},
        "gamma-beta": {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                       for k, v in w.items()},
    }
    for name, tensors in variants.items():
        d = tmp_path / name
        shutil.copytree(src, d)
        assert any(k not in w for k in tensors)  # really renamed
        save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
        s = launch(["--no-persist-cache"], str(tmp_path / f"{name}.log"), model=str(d), name=name)
        try:
            got = embed(s, {"model": name, "input": TEXTS[:3]})["data"]
            for item, text in zip(got, TEXTS[:3]):
                assert_close(item["embedding"], oracles["mean-f32"].embed(text))
        finally:
            stop(s)
