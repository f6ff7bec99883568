#!/usr/bin/env python3
"""One round of each hostile-client attack of issue #15 against `rapid-mlx serve` on loopback,
with the figures the issue quotes: /health latency during a slowloris run, RSS after a header
flood and after an oversized chunked body, /metrics growth after distinct unauthenticated paths,
how many pipelined requests get answers, and what a duplicate Content-Length gets.

Runs any build (--bin), so the same figures can be taken before and after a change:
  bench/hostile_probe.py --bin build/rapid-mlx [--model PATH] [--slow 300] [--seconds 10]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def get(port, path, timeout):
    t0 = time.time()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, time.time() - t0, r.read()
    except urllib.error.HTTPError as e:
        return e.code, time.time() - t0, e.read()
    except OSError:
        return None, time.time() - t0, b""


def slowloris(port, n, seconds):
    socks, lat = [], []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        except OSError:
            break
    t_end = time.time() + seconds
    while time.time() < t_end:
        for s in socks:
            try:
                s.send(b"a")
            except OSError:
                pass
        status, dt, _ = get(port, "/health", timeout=seconds)
        lat.append(dt if status == 200 else float("inf"))
    for s in socks:
        s.close()
    return {"connections": len(socks), "health_max_ms": round(max(lat) * 1000, 1),
            "health_ok": sum(1 for x in lat if x != float("inf")), "health_tries": len(lat)}


def flood_one(port, headers, size):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
        pad = b"p" * size
        for i in range(headers):
            s.sendall(b"X-%d: %s\r\n" % (i, pad))
        s.sendall(b"\r\n")
        data = s.recv(200)
        s.close()
        return data[9:12].decode() if data.startswith(b"HTTP/1.1") else "none"
    except OSError:
        return "reset"


def header_flood(port, pid, clients=8, headers=12500, size=8000):
    before = rss_mib(pid)
    out = []
    ts = [threading.Thread(target=lambda: out.append(flood_one(port, headers, size))) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    time.sleep(1)
    return {"statuses": sorted(out), "rss_before_mib": round(before, 1), "rss_after_mib": round(rss_mib(pid), 1)}


def chunked_big(port, pid, mib=300):
    before = rss_mib(pid)
    status = "reset"
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer probe-key\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"100000\r\n" + b"x" * (1 << 20) + b"\r\n"
        sent = 0
        for _ in range(mib):
            s.sendall(chunk)
            sent += 1
        s.sendall(b"0\r\n\r\n")
        data = s.recv(200)
        status = data[9:12].decode() if data.startswith(b"HTTP/1.1") else "none"
        s.close()
    except OSError:
        pass
    return {"status": status, "rss_before_mib": round(before, 1), "rss_after_mib": round(rss_mib(pid), 1)}


def metrics_growth(port, paths=20000):
    size0 = len(get(port, "/metrics", 30)[2])
    for start in range(0, paths, 500):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"".join(b'GET /v1/x%d"}injected{a="1 HTTP/1.1\r\nHost: x\r\n\r\n' % i
                               for i in range(start, start + 500)) + b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
            s.close()
        except OSError:
            pass
    text = get(port, "/metrics", 30)[2]
    return {"before_bytes": size0, "after_bytes": len(text), "injected_lines": text.count(b"\ninjected")}


def pipelined(port, n=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * (n - 1) + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except OSError:
        pass
    s.close()
    return {"sent": n, "answered": data.count(b"HTTP/1.1 ")}


def dup_cl(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer probe-key\r\n"
              b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}")
    try:
        data = s.recv(200)
    except OSError:
        data = b""
    s.close()
    return {"status": data[9:12].decode() if data.startswith(b"HTTP/1.1") else "none"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--model", default=os.path.join(os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser(
        "~/.cache/rapid-mlx/models")), "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, RAPID_API_KEY="probe-key")
    proc = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", str(port), "--ctx", "2048",
                             "--max-body-bytes", str(1 << 20), "--no-persist-cache"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if get(port, "/health", 1)[0] == 200:
                break
            time.sleep(0.2)
        def report(name, value):  # line by line: a probe that hangs an old server still leaves figures
            print(json.dumps({name: value}), flush=True)
        report("rss_start_mib", round(rss_mib(proc.pid), 1))
        report("slowloris", slowloris(port, a.slow, a.seconds))
        report("pipelined", pipelined(port))
        report("duplicate_content_length", dup_cl(port))
        report("header_flood", header_flood(port, proc.pid))
        report("chunked_300mib", chunked_big(port, proc.pid))
        report("metrics_20k_paths", metrics_growth(port))
        report("alive", proc.poll() is None)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
