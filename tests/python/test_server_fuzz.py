"""Robustness of the real server: raw-socket garbage, hand-made malformed bodies and schemathesis
against /openapi.json. Nothing may produce a 5xx, a dropped connection on a well-framed request,
or a crash (the server must stay healthy). Bounded: seeded, fixed counts, small max_tokens."""
import json
import random
import socket

import pytest

from conftest import API_KEY, MODEL_NAME

GEN_LIMIT = 4  # generation length cap for fuzzed requests that happen to be valid


def raw_exchange(port, payload, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            return b""  # the server may close early on garbage: fine
        out = b""
        try:
            while len(out) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return out


def status_of(resp):
    if not resp.startswith(b"HTTP/1."):
        return None
    return int(resp.split(b" ", 2)[1])


def test_raw_socket_garbage(server):
    rng = random.Random(1234)
    payloads = [
        b"\x00\xff\xfe garbage\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n",
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n",
        b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
        + API_KEY.encode() + b"\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00\x01",
    ]
    for _ in range(40):
        payloads.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600))))
        line = rng.choice([b"GET", b"POST", b"PUT", b"DELETE", b"\x01"]) + b" " + rng.choice(
            [b"/v1/chat/completions", b"/v1/messages", b"/health", b"/%zz", b"*"]) + b" HTTP/1.1\r\n"
        payloads.append(line + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
    for p in payloads:
        st = status_of(raw_exchange(server.port, p))
        assert st is None or st < 500, (p[:80], st)
        assert server.alive(), server.log()
    assert server.get("/health")[0] == 200


def mutations(valid, extra_keys):
    """Each field (present ones and a few optional ones) replaced by values of the wrong type/range."""
    bad_values = [None, True, -1, 1e308, "x", [1, "a"], {"a": {"b": []}}]
    for key in list(valid.keys()) + extra_keys:
        for v in bad_values:
            body = dict(valid)
            body[key] = v
            yield body


EXTRA_KEYS = {
    "/v1/chat/completions": ["tools", "tool_choice", "response_format", "stop", "logit_bias", "n", "top_logprobs"],
    "/v1/completions": ["stop", "logprobs", "echo"],
    "/v1/messages": ["system", "tools", "tool_choice", "thinking", "stop_sequences"],
    "/v1/messages/count_tokens": ["system", "tools"],
    "/v1/responses": ["instructions", "tools", "tool_choice", "text"],
}


VALID = {
    "/v1/chat/completions": {"model": MODEL_NAME, "max_tokens": GEN_LIMIT,
                             "messages": [{"role": "user", "content": "hi"}]},
    "/v1/completions": {"model": MODEL_NAME, "max_tokens": GEN_LIMIT, "prompt": "hi"},
    "/v1/messages": {"model": MODEL_NAME, "max_tokens": GEN_LIMIT, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages/count_tokens": {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": MODEL_NAME, "max_output_tokens": GEN_LIMIT, "input": "hi"},
}


def clamp(body):
    """Keeps a fuzzed request that happens to be valid short: generation capped at GEN_LIMIT."""
    if not isinstance(body, dict):
        return body
    for k in ("max_tokens", "max_completion_tokens", "max_output_tokens", "min_tokens"):
        v = body.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > GEN_LIMIT:
            body[k] = GEN_LIMIT
    if ("messages" in body or "prompt" in body) and body.get("max_tokens") is None \
            and body.get("max_completion_tokens") is None:
        body["max_tokens"] = GEN_LIMIT
    if "input" in body and body.get("max_output_tokens") is None:
        body["max_output_tokens"] = GEN_LIMIT
    n = body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 2:
        body["n"] = 2
    return body


def test_malformed_bodies(server):
    seen = set()
    for path, valid in VALID.items():
        for raw in [b"", b"{", b"[]", b"null", b"\"s\"", b"{\"model\":}", b"\xff\xfe", b"{" * 5000 + b"}" * 5000,
                    json.dumps({"model": MODEL_NAME, "messages": [[[[[]]]]] * 1000}).encode()]:
            st, body = server.post(path, raw, raw=True)
            assert 400 <= st < 500, (path, raw[:40], st, body[:200])
            json.loads(body)
        for body in mutations(valid, EXTRA_KEYS[path]):
            st, resp = server.post(path, clamp(body))
            seen.add(st)
            assert st < 500, (path, body, st, resp[:300])
            if st >= 400:
                err = json.loads(resp)
                assert ("error" in err) if path != "/v1/messages" else err["type"] == "error"
        assert server.alive(), server.log()
    assert 200 in seen and 400 in seen


def test_schemathesis(server):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_url(server.base + "/openapi.json")
    headers = {"Authorization": f"Bearer {API_KEY}"}
    failures = []
    for result in schema.get_all_operations():
        op = result.ok()

        @settings(max_examples=12, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy())
        def check(case):
            if isinstance(case.body, dict):
                clamp(case.body)
                if "model" in case.body and random.random() < 0.5:
                    case.body["model"] = MODEL_NAME  # reach past the model check half the time
            resp = case.call(base_url=server.base, headers=headers, timeout=60)
            if resp.status_code >= 500:
                failures.append((op.label, case.body, resp.status_code, resp.text[:300]))

        check()
        assert server.alive(), server.log()
    assert not failures, failures[:5]
