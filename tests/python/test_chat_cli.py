"""`rapid-mlx chat`: a terminal conversation. The reference for every answer is the server
(`/v1/chat/completions`, temperature 0) given the same history: the chat must keep the history
turn after turn, forget it on /reset, and keep an answer stopped with Ctrl-C (what was printed)
in the history, as the conversation the user saw."""
import json
import os
import select
import signal
import subprocess
import time

from conftest import BIN, MODEL, need_server

MAX = 16


def server_answer(server, messages, max_tokens=MAX):
    status, body = server.post("/v1/chat/completions", {"model": "smollm2", "max_tokens": max_tokens, "temperature": 0,
                                                        "messages": messages})
    assert status == 200, body
    return json.loads(body)["choices"][0]["message"]["content"]


def test_chat_keeps_history_and_resets(server):
    need_server()
    lines = ["What is the capital of France?", "And of Germany?", "/reset", "What is the capital of France?", "/exit"]
    r = subprocess.run([BIN, "chat", MODEL, "--max-tokens", str(MAX)], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    answers = [a.rstrip("\n") for a in r.stdout.split(">>> ") if a.strip()]
    q1, q2 = {"role": "user", "content": lines[0]}, {"role": "user", "content": lines[1]}
    a1 = server_answer(server, [q1])
    a2 = server_answer(server, [q1, {"role": "assistant", "content": a1}, q2])
    assert answers == [a1, a2, a1]


def test_ctrl_c_stops_an_answer_and_keeps_it(server):
    need_server()
    p = subprocess.Popen([BIN, "chat", MODEL, "--max-tokens", "400"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out = b""

    def read_until(pred, timeout=120):
        nonlocal out
        end = time.time() + timeout
        while not pred(out) and time.time() < end:
            if select.select([p.stdout], [], [], 0.5)[0]:
                out += os.read(p.stdout.fileno(), 4096)
        assert pred(out), out

    q1 = "Write a long story about a robot who learns to paint."
    p.stdin.write((q1 + "\n").encode())
    p.stdin.flush()
    read_until(lambda o: len(o.split(b">>> ")[-1]) > 40)  # well into the answer
    p.send_signal(signal.SIGINT)
    read_until(lambda o: b" [stopped]\n>>> " in o)
    partial = out.split(b">>> ")[1].split(b" [stopped]")[0].decode()
    q2 = "Give it a title."
    p.stdin.write((q2 + "\n").encode())
    p.stdin.flush()
    read_until(lambda o: o.count(b">>> ") >= 3)
    p.stdin.close()
    assert p.wait(timeout=60) == 0
    second = out.split(b">>> ")[2].decode().rstrip("\n")
    expect = server_answer(server, [{"role": "user", "content": q1}, {"role": "assistant", "content": partial},
                                    {"role": "user", "content": q2}], max_tokens=400)
    assert len(partial) < 2000 and second == expect
