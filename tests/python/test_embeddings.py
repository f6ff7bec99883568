"""/v1/embeddings end to end: `rapid-mlx serve --model SmolLM2 --embedding-model TINY` (chat and
embeddings on one port) against an independent oracle: mlx-lm's Qwen3Model body (hidden states
after the final norm) pooled as the model's sentence-transformers files say (modules.json,
1_Pooling/config.json, 2_Normalize), token ids from Hugging Face `tokenizers`. The tiny random
Qwen3-Embedding-shaped models come from scripts/make_tiny_embedding_model.py. (sentence-transformers
itself needs torch, whose PyPI wheels pull ~3 GB of CUDA libraries: too heavy for CI.)"""
import base64
import json
import os
import sys

import numpy as np
import pytest

from conftest import API_KEY, MODEL, ROOT, launch, need_server, stop
from embedding_checks import PoolingOracle, assert_close, check_concurrent_embeddings_and_chat, embed

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_tiny_embedding_model  # noqa: E402

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.",
         "def add(a, b):\n    return a + b\n", "Ünïcödé ✓ 数据 — embeddings", "x"]


class Oracle(PoolingOracle):
    """mlx-lm Qwen3Model + the sentence-transformers pooling config of the model directory."""

    def __init__(self, path):
        import mlx.core as mx
        from mlx_lm.models import qwen3
        from tokenizers import Tokenizer
        super().__init__(path)
        with open(os.path.join(path, "config.json")) as f:
            self.body = qwen3.Qwen3Model(qwen3.ModelArgs.from_dict(json.load(f)))
        self.body.load_weights(list(mx.load(os.path.join(path, "model.safetensors")).items()))
        self.mx = mx
        self.tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))

    def hidden(self, ids):
        return np.array(self.body(self.mx.array([ids])).astype(self.mx.float32))[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("emb")
    return make_tiny_embedding_model.make(str(d / "tiny-qwen3-embedding"))


@pytest.fixture(scope="module")
def oracle(tiny):
    return Oracle(tiny)


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    need_server()
    d = tmp_path_factory.mktemp("emb-serve")
    s = launch(["--embedding-model", tiny, "--no-persist-cache"], str(d / "serve.log"))
    yield s
    stop(s)


def post(srv, body):
    status, raw = srv.post("/v1/embeddings", body)
    return status, json.loads(raw)


def assert_error(srv, body, status=400, param=None):
    got, out = post(srv, body)
    assert got == status, out
    err = out["error"]
    assert isinstance(err["message"], str) and err["message"] and err["type"]
    if param:
        assert err["param"] == param, err
    assert srv.alive()
    return err


def test_single_strings_match_oracle(srv, oracle):
    for text in TEXTS:
        out = embed(srv, {"model": "tiny-qwen3-embedding", "input": text})
        assert out["object"] == "list" and out["model"] == "tiny-qwen3-embedding"
        assert out["data"][0]["object"] == "embedding" and out["data"][0]["index"] == 0
        assert_close(out["data"][0]["embedding"], oracle.embed(text))
        n = len(oracle.ids(text))
        assert out["usage"] == {"prompt_tokens": n, "total_tokens": n}


def test_list_input_in_order_with_usage(srv, oracle):
    out = embed(srv, {"model": "tiny-qwen3-embedding", "input": TEXTS})
    assert [d["index"] for d in out["data"]] == list(range(len(TEXTS)))
    for d, text in zip(out["data"], TEXTS):
        assert_close(d["embedding"], oracle.embed(text))
    n = sum(len(oracle.ids(t)) for t in TEXTS)
    assert out["usage"] == {"prompt_tokens": n, "total_tokens": n}


def test_token_id_inputs(srv, oracle):
    ids = [oracle.ids(t) for t in TEXTS[:3]]
    one = embed(srv, {"input": ids[0]})
    assert_close(one["data"][0]["embedding"], oracle.embed_ids(ids[0]))
    many = embed(srv, {"input": ids})
    for d, i in zip(many["data"], ids):
        assert_close(d["embedding"], oracle.embed_ids(i))
    assert many["usage"]["prompt_tokens"] == sum(map(len, ids))
    # Token ids are taken as given (no special tokens added): a sequence without the final
    # <|endoftext|> pools another position.
    bare = oracle.ids(TEXTS[0])[:-1]
    assert_close(embed(srv, {"input": bare})["data"][0]["embedding"], oracle.embed_ids(bare))


def test_base64_decodes_to_the_float_result(srv):
    f = embed(srv, {"input": TEXTS, "encoding_format": "float"})
    b = embed(srv, {"input": TEXTS, "encoding_format": "base64"})
    for df, db in zip(f["data"], b["data"]):
        dec = np.frombuffer(base64.b64decode(db["embedding"]), dtype="<f4")
        assert np.array_equal(dec, np.asarray(df["embedding"], dtype=np.float32))


def test_dimensions_truncate_then_normalise(srv, oracle):
    for dims in (1, 8, 32, 63, 64):
        out = embed(srv, {"input": TEXTS[1], "dimensions": dims})
        v = np.asarray(out["data"][0]["embedding"])
        assert len(v) == dims
        assert abs(np.linalg.norm(v) - 1.0) < 1e-5
        assert_close(v, oracle.embed(TEXTS[1], dims))


def test_openai_sdk_client(srv, oracle):
    import openai
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    # The SDK asks for base64 by default and decodes it itself.
    r = client.embeddings.create(model="tiny-qwen3-embedding", input=TEXTS[:2])
    assert len(r.data) == 2
    for d, text in zip(r.data, TEXTS[:2]):
        assert_close(d.embedding, oracle.embed(text))
    assert r.usage.prompt_tokens == sum(len(oracle.ids(t)) for t in TEXTS[:2])
    r = client.embeddings.create(model="tiny-qwen3-embedding", input="hello world", dimensions=16,
                                 encoding_format="float")
    assert_close(r.data[0].embedding, oracle.embed("hello world", 16))
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="x")
    models = [m.id for m in client.models.list().data]
    assert "tiny-qwen3-embedding" in models and "smollm2" in models


@pytest.mark.parametrize("body,param", [
    ({"input": []}, "input"),
    ({"input": ""}, "input"),
    ({"input": ["a", ""]}, "input"),
    ({"input": [[]]}, "input"),
    ({"input": 5}, "input"),
    ({"input": {"text": "a"}}, "input"),
    ({"input": [1.5, 2]}, "input"),
    ({"input": [[1, "a"]]}, "input"),
    ({"input": ["a", 3]}, "input"),
    ({"input": [-1]}, "input"),
    ({"input": [151936]}, "input"),
    ({"input": ["a"] * 2049}, "input"),
    ({}, "input"),
    ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
    ({"input": "a", "dimensions": 0}, "dimensions"),
    ({"input": "a", "dimensions": 65}, "dimensions"),
    ({"input": "a", "dimensions": "8"}, "dimensions"),
    ({"input": "a", "model": 7}, "model"),
])
def test_hostile_input_is_a_400(srv, body, param):
    assert_error(srv, body, 400, param)


def test_too_long_input_is_a_400(srv):
    err = assert_error(srv, {"input": [1000] * 8193}, 400, "input")
    assert err["code"] == "context_length_exceeded" and "8192" in err["message"]
    err = assert_error(srv, {"input": ["ok", " a" * 9000]}, 400, "input")
    assert "input 1" in err["message"]


def test_non_json_and_unknown_model(srv):
    status, raw = srv.post("/v1/embeddings", b"{not json", raw=True)
    assert status == 400 and json.loads(raw)["error"]["message"]
    assert_error(srv, {"model": "smollm2-typo", "input": "a"}, 404, "model")


def test_concurrent_embeddings_and_chat(srv, oracle):
    want = {t: oracle.embed(t) for t in TEXTS}
    check_concurrent_embeddings_and_chat(srv, TEXTS, want, ["Name a colour.", "What is 2+2?", "Say hi.",
                                                                  "Count to three."])


def test_chat_model_without_embeddings_is_a_400(server):
    status, raw = server.post("/v1/embeddings", {"model": "smollm2", "input": "hello"})
    assert status == 400
    err = json.loads(raw)["error"]
    assert err["code"] == "embeddings_not_supported" and "--embedding-model" in err["message"]


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_embedding_model_as_main_model_follows_its_pooling_config(pooling, tmp_path):
    need_server()
    path = make_tiny_embedding_model.make(str(tmp_path / f"tiny-{pooling}"), pooling=pooling, seed=3)
    oracle = Oracle(path)
    s = launch(["--no-persist-cache"], str(tmp_path / "serve.log"), model=path, name="emb")
    try:
        out = embed(s, {"model": "emb", "input": TEXTS})
        for d, text in zip(out["data"], TEXTS):
            assert_close(d["embedding"], oracle.embed(text))
    finally:
        stop(s)


def test_unsupported_pooling_is_refused_with_its_path(tmp_path):
    need_server()
    path = make_tiny_embedding_model.make(str(tmp_path / "tiny-max"))
    cfg = os.path.join(path, "1_Pooling", "config.json")
    with open(cfg) as f:
        pc = json.load(f)
    pc["pooling_mode_lasttoken"], pc["pooling_mode_max_tokens"] = False, True
    with open(cfg, "w") as f:
        json.dump(pc, f)
    import subprocess
    from conftest import BIN
    r = subprocess.run([BIN, "serve", "--model", MODEL, "--embedding-model", path, "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert cfg in r.stderr and "'max'" in r.stderr
