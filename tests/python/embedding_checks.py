"""Checks shared by the /v1/embeddings tests (test_embeddings.py: decoders, test_embeddings_bert.py:
encoders): vector closeness to an oracle's, and embeddings racing chat on one server."""
import json
import os
import threading

import numpy as np

COS_MIN = 0.9999
ABS_TOL = 2e-4


def assert_close(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
    assert cos >= COS_MIN, cos
    assert np.max(np.abs(got - want)) <= ABS_TOL, np.max(np.abs(got - want))


def embed(srv, body):
    status, raw = srv.post("/v1/embeddings", body)
    out = json.loads(raw)
    assert status == 200, out
    return out


def chat(srv, text, max_tokens=24):
    """A greedy SmolLM2 chat answer (the conftest server's chat model, served as "smollm2")."""
    status, raw = srv.post("/v1/chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
        "temperature": 0})
    assert status == 200, raw
    return json.loads(raw)["choices"][0]["message"]["content"]


def check_concurrent_embeddings_and_chat(srv, texts, want, prompts, embedders=6, rounds=3):
    """`embedders` clients embed rotations of `texts` (each vector checked against want[text]) while
    one client per prompt chats: nothing fails, and each chat answers as it does alone (greedy)."""
    solo = [chat(srv, p) for p in prompts]
    errors, chats = [], {}

    def embed_many(k):
        try:
            for _ in range(rounds):
                batch = texts[k % len(texts):] + texts[:k % len(texts)]
                for d, t in zip(embed(srv, {"input": batch})["data"], batch):
                    assert_close(d["embedding"], want[t])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    def chat_one(i):
        try:
            chats[i] = chat(srv, prompts[i])
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=embed_many, args=(k,)) for k in range(embedders)]
    threads += [threading.Thread(target=chat_one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert [chats.get(i) for i in range(len(prompts))] == solo


class PoolingOracle:
    """sentence-transformers' pipeline after the transformer, in numpy, as the model directory's
    files say (modules.json, the Pooling module's config.json, a Normalize module). Subclasses give
    `hidden(ids)` (the reference forward: [tokens, hidden] floats) and `tok` (HF tokenizers)."""

    def __init__(self, path):
        with open(os.path.join(path, "modules.json")) as f:
            modules = json.load(f)
        pool_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        with open(os.path.join(path, pool_dir, "config.json")) as f:
            pc = json.load(f)
        self.mode = next(k[len("pooling_mode_"):] for k, v in pc.items() if k.startswith("pooling_mode_") and v is True)
        self.normalize = any(m["type"].endswith(".Normalize") for m in modules)

    def ids(self, text):
        return self.tok.encode(text).ids

    def embed_ids(self, ids, dims=None):
        h = self.hidden(ids)
        v = {"lasttoken": h[-1], "mean_tokens": h.mean(axis=0), "cls_token": h[0]}[self.mode].astype(np.float64)
        if self.normalize:
            v = v / max(np.linalg.norm(v), 1e-12)
        if dims is not None:  # Matryoshka: truncate, then normalise again
            v = v[:dims]
            if self.normalize:
                v = v / np.linalg.norm(v)
        return v

    def embed(self, text, dims=None):
        return self.embed_ids(self.ids(text), dims)
