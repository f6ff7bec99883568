#!/usr/bin/env python3
"""Server load and overhead on the real model (loopback only, bounded).

1. Overhead per streamed token: the client-observed inter-token interval of a streamed greedy
   request minus the engine-side inter-token latency the server records in /metrics for the same
   request (rapid_inter_token_latency_seconds sum/count deltas). Target < 50 µs.
2. 100 idle keep-alive connections held open while 32 concurrent streaming chat requests run:
   every stream must complete ([DONE], a finish_reason) and every idle connection must still answer
   afterwards. Zero errors expected.

usage: .venv/bin/python bench/server_bench.py [--bin build/rapid-mlx] [--model GGUF] [--tokens 64]
(The model-free per-token overhead is bench/server_bench.cpp.)"""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body


def stream_chat(port, content, max_tokens, arrivals=None):
    """Streams one chat request; returns (ok, n_content_chunks, finish_reason)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = json.dumps({"model": "bench", "stream": True, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "messages": [{"role": "user", "content": content}]})
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return False, 0, f"HTTP {r.status}"
    n, finish, done = 0, None, False
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        chunk = json.loads(line[6:])
        if "error" in chunk:
            return False, n, chunk["error"]["message"]
        for ch in chunk["choices"]:
            if ch["delta"].get("content"):
                n += 1
                if arrivals is not None:
                    arrivals.append(time.perf_counter())
            finish = ch.get("finish_reason") or finish
    c.close()
    return done and finish is not None, n, finish


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--model", default=os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--idle", type=int, default=100)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--stream-tokens", type=int, default=16)
    a = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", str(port), "--served-model-name", "bench",
                             "--ctx", "2048", "--http-threads", str(a.idle + a.streams + 32)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if get(port, "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        # 1. overhead per streamed token
        stream_chat(port, "Warm up.", 8)
        _, m0 = get(port, "/metrics")
        arrivals = []
        ok, n, _ = stream_chat(port, "Write a long story about a robot.", a.tokens, arrivals)
        _, m1 = get(port, "/metrics")
        name = "rapid_inter_token_latency_seconds"
        d_sum = metric(m1, name + "_sum") - metric(m0, name + "_sum")
        d_cnt = metric(m1, name + "_count") - metric(m0, name + "_count")
        gaps = [b - x for x, b in zip(arrivals, arrivals[1:])]
        client_itl = sum(gaps) / len(gaps)
        server_itl = d_sum / d_cnt
        print(f"streamed {n} chunks: client inter-token {client_itl * 1e6:.1f} us, engine {server_itl * 1e6:.1f} us, "
              f"server overhead {(client_itl - server_itl) * 1e6:.1f} us/token")

        # 2. idle keep-alive connections + concurrent streams
        idle = []
        for _ in range(a.idle):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("GET", "/health")
            c.getresponse().read()
            idle.append(c)
        results = [None] * a.streams
        def worker(i):
            try:
                results[i] = stream_chat(port, f"Count to {i + 3}.", a.stream_tokens)
            except Exception as e:  # noqa: BLE001 - every failure is counted
                results[i] = (False, 0, repr(e))
        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        errors = [r for r in results if not r or not r[0]]
        idle_errors = 0
        for c in idle:
            try:
                c.request("GET", "/health")
                if c.getresponse().status != 200:
                    idle_errors += 1
            except Exception:  # noqa: BLE001
                idle_errors += 1
            c.close()
        total = sum(r[1] for r in results if r)
        print(f"{a.idle} idle keep-alive + {a.streams} concurrent streams: {len(errors)} stream errors, "
              f"{idle_errors} idle-connection errors, {total} chunks in {wall:.1f} s")
        if errors:
            print("errors:", errors[:5])
        return 1 if errors or idle_errors else 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
