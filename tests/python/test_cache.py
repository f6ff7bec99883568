"""The KV cache end to end through the real server (SmolLM2): prefix-cache hits reported in
`usage.prompt_tokens_details.cached_tokens` with the same text as a cold run, GET/DELETE /v1/cache,
16 concurrent requests through a tiny KV pool (preemption) giving the sequential answers, and disk
snapshots that survive `kill -9` while corrupt files are skipped, never served."""
import concurrent.futures
import glob
import json
import os
import signal
import threading
import time
import uuid

import pytest

from conftest import MODEL_NAME, launch, need_server, stop

SYSTEM = (
    "You are a careful coding assistant working in a repository. You answer in short sentences and "
    "never invent APIs. Tools: read_file(path) returns a file's text; write_file(path, text) replaces "
    "a file; run(command) runs a shell command and returns its output; search(pattern) lists matching "
    "lines. Before you claim a fix works, run the tests. Prefer small, reviewable changes. When a test "
    "fails, read the error, find the cause, and explain it before changing code. Keep the style of the "
    "surrounding code. Never delete tests to make them pass. Ask when the request is ambiguous. ")


def ask(srv, user, system, max_tokens=16):
    status, body = srv.post("/v1/chat/completions", {
        "model": MODEL_NAME, "max_tokens": max_tokens, "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]})
    assert status == 200, body
    j = json.loads(body)
    return j["choices"][0]["message"]["content"], j["usage"]


def cache_info(srv):
    status, body = srv.get("/v1/cache", headers={"Authorization": "Bearer test-key-123"})
    assert status == 200, body
    return json.loads(body)


def unique_system():
    # A fresh prefix per test: nothing cached by other tests can match it.
    return f"Session {uuid.uuid4().hex}. " + SYSTEM


def test_prefix_hit_is_reported_and_changes_nothing(server):
    system = unique_system()
    cold_text, cold = ask(server, "Which tool reads a file?", system)
    # A match may end mid-block, so an earlier request can lend the template's opening
    # (`<|im_start|>system\nSession`, 4 tokens) and a first character or two of another session id;
    # never the rest of this prompt.
    assert cold["prompt_tokens_details"]["cached_tokens"] <= 8
    warm_text, warm = ask(server, "Which tool reads a file?", system)
    assert warm_text == cold_text
    assert warm["prompt_tokens"] == cold["prompt_tokens"]
    assert warm["prompt_tokens_details"]["cached_tokens"] >= cold["prompt_tokens"] - 17
    # Another question after the same system prompt: the shared part is a hit.
    _, other = ask(server, "How do I run the tests?", system)
    assert other["prompt_tokens_details"]["cached_tokens"] >= 100
    assert other["prompt_tokens_details"]["cached_tokens"] < other["prompt_tokens"]


def test_cache_endpoint_reports_and_purges(server):
    system = unique_system()
    ask(server, "Which tool writes a file?", system)
    info = cache_info(server)
    assert info["object"] == "cache"
    assert info["kv_pool"]["total_blocks"] > 0 and info["kv_pool"]["block_size"] == 16
    assert info["prefix_cache"]["enabled"] is True and info["prefix_cache"]["cached_blocks"] > 0
    assert info["disk"]["enabled"] is True
    assert 0.0 <= info["prefix_cache"]["hit_rate"] <= 1.0
    # Auth applies to /v1/cache too.
    assert server.get("/v1/cache")[0] == 401
    status, body = server.delete("/v1/cache")
    assert status == 200, body
    purged = json.loads(body)
    assert purged["object"] == "cache.purged"
    assert purged["prefix_cache"]["cached_blocks"] == 0
    assert purged["disk"]["entries"] == 0
    assert purged["kv_pool"]["free_blocks"] == purged["kv_pool"]["total_blocks"]
    _, usage = ask(server, "Which tool writes a file?", system)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    metrics = server.get("/metrics")[1].decode()
    assert "rapid_kv_cache_blocks_total" in metrics and "rapid_prefix_cache_hit_rate" in metrics


def test_purge_is_not_refilled_by_turn_warming(server):
    # Each answer queues a background prefill of the conversation's next turn (turn warming) after
    # its last byte, i.e. possibly after the client's DELETE /v1/cache: the purge must win, whether
    # that warm-up was still to be queued, queued or running.
    system = unique_system()
    for i in range(4):
        status, body = server.post("/v1/chat/completions", {
            "model": MODEL_NAME, "max_tokens": 24, "temperature": 0, "stream": True,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": f"Step {i}: which tool runs a command?"}]})
        assert status == 200 and b"[DONE]" in body, body
        assert server.delete("/v1/cache")[0] == 200
        time.sleep(1.5)  # a warm-up that escaped the purge has filled the cache by now
        info = cache_info(server)
        assert info["prefix_cache"]["cached_blocks"] == 0, info
        assert info["kv_pool"]["free_blocks"] == info["kv_pool"]["total_blocks"], info
    # Warming still runs for turns that begin after the purge.
    before = cache_info(server)["warm_turns"]["requests"]
    ask(server, "Which tool runs a command?", system)
    deadline = time.time() + 30
    while time.time() < deadline and cache_info(server)["warm_turns"]["requests"] == before:
        time.sleep(0.1)
    assert cache_info(server)["warm_turns"]["requests"] > before


def test_sixteen_concurrent_requests_through_a_tiny_pool(tmp_path):
    need_server()
    # ~11 blocks of 16 tokens for 16 requests of ~40-70 tokens: they cannot all fit at once, and
    # admitted ones outgrow what is left while decoding.
    srv = launch(["--kv-cache-memory", "4MiB", "--no-persist-cache", "--max-num-seqs", "16"],
                 str(tmp_path / "serve.log"))
    try:
        questions = [f"Give me one word that rhymes with {w}." for w in
                     ["cat", "dog", "sun", "tree", "car", "book", "rain", "light", "stone", "river",
                      "cloud", "bread", "chair", "green", "blue", "night"]]
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            together = list(ex.map(lambda q: ask(srv, q, "Be brief.", 40)[0], questions))
        assert cache_info(srv)["preemptions"] > 0
        alone = [ask(srv, q, "Be brief.", 40)[0] for q in questions]
        assert together == alone
        assert srv.delete("/v1/cache")[0] == 200
        info = cache_info(srv)
        assert info["kv_pool"]["free_blocks"] == info["kv_pool"]["total_blocks"]  # nothing leaked
        assert srv.alive()
    finally:
        stop(srv)


def _kvs_files(d):
    return glob.glob(os.path.join(d, "**", "*.kvs"), recursive=True)


def test_snapshots_survive_kill_9_and_corruption_is_skipped(tmp_path):
    need_server()
    kv, key = str(tmp_path / "kv"), str(tmp_path / "kv.key")
    system = unique_system()
    a = launch(["--cache-dir", kv, "--cache-key-file", key], str(tmp_path / "a.log"))
    try:
        ask(a, "Which tool reads a file?", system)
        deadline = time.time() + 60
        while time.time() < deadline:
            d = cache_info(a)["disk"]
            if d["writes"] >= 1 and d["pending_writes"] == 0:
                break
            time.sleep(0.1)
        assert cache_info(a)["disk"]["writes"] >= 1
        # More long prompts so snapshot writes are in flight, then kill -9 mid-way.
        busy = [threading.Thread(target=lambda i=i: _try_ask(a, f"Question {i}: what does run do?",
                                                              unique_system()))
                for i in range(3)]
        for t in busy:
            t.start()
        time.sleep(0.8)
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        for t in busy:
            t.join()
    finally:
        a.log_file.close()

    b = launch(["--cache-dir", kv, "--cache-key-file", key], str(tmp_path / "b.log"))
    try:
        assert not glob.glob(os.path.join(kv, "**", "*.tmp*"), recursive=True)  # crash leftovers gone
        warm_text, warm = ask(b, "How do I run the tests?", system)
        assert warm["prompt_tokens_details"]["cached_tokens"] >= 100  # the system prompt, from disk
        assert cache_info(b)["disk"]["restored_entries"] >= 1
        # The same request cold (memory and disk purged) gives the same text.
        assert b.delete("/v1/cache")[0] == 200
        cold_text, cold = ask(b, "How do I run the tests?", system)
        assert cold["prompt_tokens_details"]["cached_tokens"] == 0
        assert warm_text == cold_text
        # Leave one snapshot behind for the corruption check.
        deadline = time.time() + 60
        while time.time() < deadline and not _kvs_files(kv):
            time.sleep(0.1)
    finally:
        stop(b)

    files = _kvs_files(kv)
    assert files
    for f in files:
        with open(f, "r+b") as fh:
            fh.seek(-64, os.SEEK_END)
            byte = fh.read(1)
            fh.seek(-64, os.SEEK_END)
            fh.write(bytes([byte[0] ^ 0xFF]))
    c = launch(["--cache-dir", kv, "--cache-key-file", key], str(tmp_path / "c.log"))
    try:
        text, usage = ask(c, "How do I run the tests?", system)
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
        assert text == cold_text
        assert cache_info(c)["disk"]["corrupt_skipped"] >= 1
        assert "authentication failed" in c.log()
    finally:
        stop(c)


def _try_ask(srv, user, system):
    try:
        ask(srv, user, system, max_tokens=64)
    except Exception:  # the server is killed under it: any outcome is fine here
        pass
