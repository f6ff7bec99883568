#!/usr/bin/env python3
"""Soak test (issue #15, not CI): mixed valid and hostile traffic from bounded loops against
`rapid-mlx serve` on loopback, with `kill -9` of the server every few minutes and a restart on the
same port (over TIME_WAIT, with the disk KV cache left as the kill left it).

Counts: crashes (server exits we did not cause), corrupt answers (a temperature-0 answer that
differs from the cold run's answer to the same prompt), /health latency, RSS over time, and what
the hostile loops got back.

usage: bench/soak.py [--minutes 30] [--kill-every 180] [--bin build/rapid-mlx] [--model PATH] [--out FILE]
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
KEY = "soak-key"
PROMPTS = ["Name a colour.", "What is 2+2?", "Say hello in French.", "Name a planet.", "Write one word.",
           "What is the capital of Italy?", "Count to three.", "Name an animal."]


class Server:
    def __init__(self, args, port, workdir):
        self.args, self.port, self.workdir = args, port, workdir
        self.proc, self.killed, self.crashes, self.restarts = None, False, 0, 0
        self.lock = threading.Lock()
        self.rss_max_kb, self.rss_samples = 0, []

    def start(self):
        log = open(os.path.join(self.workdir, "serve.log"), "a")
        key_file = os.path.join(self.workdir, "key")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        self.proc = subprocess.Popen(
            [self.args.bin, "serve", "--model", self.args.model, "--host", "127.0.0.1", "--port", str(self.port),
             "--api-key-file", key_file, "--served-model-name", "m", "--ctx", "2048",
             "--max-body-bytes", str(1 << 20), "--cache-dir", os.path.join(self.workdir, "kv"),
             "--max-queued-requests", "16"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited with {self.proc.returncode} on start (see {log.name})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("serve did not become healthy")

    def kill9_and_restart(self):
        with self.lock:
            self.killed = True
            self.proc.kill()
            self.proc.wait()
            self.start()
            self.restarts += 1
            self.killed = False

    def check(self):
        """A server gone without our kill is a crash: counted, then restarted."""
        with self.lock:
            if self.proc.poll() is not None and not self.killed:
                self.crashes += 1
                self.start()
            try:
                with open(f"/proc/{self.proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            kb = int(line.split()[1])
                            self.rss_max_kb = max(self.rss_max_kb, kb)
                            self.rss_samples.append(kb)
            except OSError:
                pass


def chat(port, prompt, stream=False, timeout=120):
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 12,
            "stream": stream}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read().decode()
    if not stream:
        return json.loads(raw)["choices"][0]["message"]["content"]
    text = ""
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content") or ""
    return text


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, k, n=1):
        with self.lock:
            self.c[k] = self.c.get(k, 0) + n


def valid_loop(srv, ref, stop, cnt):
    rng = random.Random()
    while not stop.is_set():
        p = rng.choice(PROMPTS)
        gen = srv.restarts
        try:
            got = chat(srv.port, p, stream=rng.random() < 0.5)
            cnt.add("valid_ok" if got == ref[p] else "corrupt")
            if got != ref[p]:
                cnt.add("corrupt_example:" + json.dumps([p, got, ref[p]])[:200])
        except urllib.error.HTTPError as e:
            cnt.add(f"valid_http_{e.code}")
        except (OSError, http.client.HTTPException):
            # Expected when a kill -9 cuts the request; anything else is a server fault.
            cnt.add("valid_cut_by_kill" if srv.killed or srv.restarts != gen else "valid_cut_unexpected")
            time.sleep(0.2)


def hostile_once(port, rng, cnt):
    kind = rng.choice(["slowloris", "header_flood", "chunked_big", "malformed", "dup_cl", "pipelined",
                       "metrics_injection", "stream_abandon"])
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        cnt.add("hostile_conn_error")
        return
    try:
        s.settimeout(15)
        if kind == "slowloris":
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-a: ")
            for _ in range(6):
                time.sleep(0.5)
                s.send(b"a")
        elif kind == "header_flood":
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"p" * 8000)
                                                                              for i in range(100)))
        elif kind == "chunked_big":
            s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(40):
                s.sendall(b"10000\r\n" + b"x" * 0x10000 + b"\r\n")
        elif kind == "malformed":
            s.sendall(rng.choice([b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /health HTTP/1.1\r\n a\r\n\r\n"]))
        elif kind == "dup_cl":
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}")
        elif kind == "pipelined":
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 20 + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        elif kind == "metrics_injection":
            s.sendall(b"".join(b'GET /v1/x%d"}evil{a="1 HTTP/1.1\r\nHost: x\r\n\r\n' % rng.randrange(10**9)
                               for _ in range(50)) + b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
        elif kind == "stream_abandon":
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Tell a story."}],
                               "max_tokens": 200, "stream": True}).encode()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                      b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            first = s.recv(200)
            cnt.add("hostile_stream_abandon_" + (first[9:12].decode() if first.startswith(b"HTTP/1.1 ") else "none"))
            return  # hang up mid-stream: the server must cancel the generation
        data = b""
        while len(data) < 1 << 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        status = data[9:12].decode(errors="replace") if data.startswith(b"HTTP/1.1 ") else "none"
        cnt.add(f"hostile_{kind}_{status}")
    except (OSError, http.client.HTTPException):
        cnt.add(f"hostile_{kind}_reset")
    finally:
        s.close()


def hostile_loop(srv, stop, cnt):
    rng = random.Random()
    while not stop.is_set():
        hostile_once(srv.port, rng, cnt)


def health_loop(srv, stop, lat, cnt):
    while not stop.wait(0.5):
        t0, gen = time.time(), srv.restarts
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/health", timeout=5) as r:
                r.read()
            lat.append(time.time() - t0)
        except (OSError, http.client.HTTPException):
            cnt.add("health_fail_killed" if srv.killed or srv.restarts != gen else "health_fail")
        srv.check()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--kill-every", type=float, default=180, help="seconds between kill -9s")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--model", default=os.path.join(os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser(
        "~/.cache/rapid-mlx/models")), "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--valid-clients", type=int, default=3)
    ap.add_argument("--hostile-clients", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    work = tempfile.mkdtemp(prefix="rapid-soak-")
    srv = Server(a, port, work)
    srv.start()
    ref = {p: chat(port, p) for p in PROMPTS}  # the cold run: the answers every later one must match
    srv.kill9_and_restart()  # and a cold restart before the soak proper
    srv.restarts = 0
    stop, cnt, lat = threading.Event(), Counters(), []
    threads = [threading.Thread(target=valid_loop, args=(srv, ref, stop, cnt)) for _ in range(a.valid_clients)]
    threads += [threading.Thread(target=hostile_loop, args=(srv, stop, cnt)) for _ in range(a.hostile_clients)]
    threads.append(threading.Thread(target=health_loop, args=(srv, stop, lat, cnt)))
    for t in threads:
        t.start()
    t_end, next_kill = time.time() + a.minutes * 60, time.time() + a.kill_every
    while time.time() < t_end:
        time.sleep(1)
        if time.time() >= next_kill:
            srv.kill9_and_restart()
            next_kill = time.time() + a.kill_every
    stop.set()
    for t in threads:
        t.join()
    srv.check()
    srv.proc.terminate()
    srv.proc.wait()
    lat.sort()
    pct = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 1) if lat else None
    report = {"minutes": a.minutes, "kills": srv.restarts, "crashes": srv.crashes,
              "corrupt_answers": cnt.c.get("corrupt", 0), "valid_ok": cnt.c.get("valid_ok", 0),
              "unexpected_failures": cnt.c.get("valid_cut_unexpected", 0) + cnt.c.get("health_fail", 0),
              "health_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0), "n": len(lat)},
              "rss_mib": {"first": round(srv.rss_samples[0] / 1024, 1) if srv.rss_samples else None,
                          "max": round(srv.rss_max_kb / 1024, 1),
                          "last": round(srv.rss_samples[-1] / 1024, 1) if srv.rss_samples else None},
              "counts": dict(sorted(cnt.c.items())), "workdir": work}
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0 if report["crashes"] == report["corrupt_answers"] == report["unexpected_failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
