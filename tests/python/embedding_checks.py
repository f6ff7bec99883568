"""Checks shared by the /v1/embeddings tests (test_embeddings.py: decoders, test_embeddings_bert.py:
encoders): vector closeness to an oracle's, and embeddings racing chat on one server."""
import json
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


def check_concurrent_embeddings_and_chat(srv, texts, want, chat, prompts, embedders=6, rounds=3):
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
