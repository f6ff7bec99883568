"""Hostile clients against the real `rapid-mlx serve` on loopback (issue #15): slowloris, header
floods, oversized chunked bodies, metrics-label injection, pipelining, request smuggling via two
Content-Lengths, the admission bound, a second server on the same port, the API key kept out of
/proc/PID/cmdline, routes without /v1, CORS.

References: responses are parsed by h11 (an independent HTTP/1.1 implementation), /metrics by the
official prometheus_client text parser, errors by the openai / anthropic SDKs' own status mapping.
Every attack is bounded in connections, bytes and time; /health is timed while it runs (the
figures are printed; speed itself is measured in bench/, here only "answered during the attack")."""
import concurrent.futures
import json
import os
import select
import socket
import subprocess
import threading
import time

import h11
import pytest

from conftest import API_KEY, BIN, CTX, MODEL, MODEL_NAME, launch, need_server, own_server, stop

AUTH = f"Bearer {API_KEY}"
ENDPOINTS = {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
             "/v1/responses", "/v1/models", "/v1/models/{id}", "/v1/cache", "/health", "/metrics",
             "/openapi.json", "other"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = own_server(tmp_path_factory, "hardening", ["--no-persist-cache"])
    yield s
    stop(s)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request_bytes(method, path, body=b"", headers=()):
    h = [("Host", "127.0.0.1")] + list(headers)
    if body or method == "POST":
        h.append(("Content-Length", str(len(body))))
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h) + "\r\n").encode() + body


def read_responses(sock, methods, timeout=60):
    """Parses len(methods) responses in order off one socket with h11; returns [(status, headers, body)],
    plus whether the server then closed the connection."""
    out, data, closed = [], b"", False
    deadline = time.time() + timeout
    for i, method in enumerate(methods):
        conn = h11.Connection(our_role=h11.CLIENT)
        conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())
        if data:  # (an empty receive_data means end of stream to h11)
            conn.receive_data(data)
        status, headers, body = None, {}, b""
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                if time.time() > deadline:
                    raise AssertionError(f"response {i} not complete in time")
                sock.settimeout(max(0.1, deadline - time.time()))
                chunk = sock.recv(65536)
                conn.receive_data(chunk)
                if not chunk:
                    closed = True
                    if status is None:
                        break
                continue
            if isinstance(ev, h11.Response):
                status = ev.status_code
                headers = {k.decode().lower(): v.decode() for k, v in ev.headers}
            elif isinstance(ev, h11.Data):
                body += bytes(ev.data)
            elif isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
        out.append((status, headers, body))
        data, closed_after = conn.trailing_data
        closed = closed or closed_after
    return out, closed


def server_closed(sock, timeout=5):
    sock.settimeout(timeout)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def timed_get(port, path, timeout=5):
    t0 = time.time()
    with connect(port) as s:
        s.sendall(request_bytes("GET", path, headers=[("Connection", "close")]))
        responses, _ = read_responses(s, ["GET"], timeout=timeout)
    status, _, body = responses[0]
    return status, time.time() - t0, body


def chat_body(content="Say hello.", **kw):
    b = {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 8}
    b.update(kw)
    return json.dumps(b).encode()


def test_slowloris_does_not_block_health_or_chat(srv):
    socks, stop_dribble = [], threading.Event()
    try:
        for _ in range(300):
            s = connect(srv.port)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)

        def dribble():  # one byte per socket every half second: never completes a header line
            while not stop_dribble.wait(0.5):
                for s in socks:
                    try:
                        s.send(b"a")
                    except OSError:
                        pass
        t = threading.Thread(target=dribble)
        t.start()
        lat = []
        for _ in range(10):
            status, dt, _ = timed_get(srv.port, "/health")
            assert status == 200
            lat.append(dt)
        status, dt_metrics, _ = timed_get(srv.port, "/metrics")
        assert status == 200
        with connect(srv.port) as c:
            t0 = time.time()
            c.sendall(request_bytes("POST", "/v1/chat/completions", chat_body(),
                                    [("Authorization", AUTH), ("Content-Type", "application/json")]))
            [(status, _, body)], _ = read_responses(c, ["POST"], timeout=60)
            dt_chat = time.time() - t0
        assert status == 200, body
        assert json.loads(body)["choices"][0]["message"]["content"]
        print(f"\nslowloris x300: /health max {max(lat)*1000:.1f} ms, /metrics {dt_metrics*1000:.1f} ms, "
              f"chat {dt_chat*1000:.0f} ms")
    finally:
        stop_dribble.set()
        for s in socks:
            s.close()
    assert srv.alive()


def test_header_flood_is_431_and_rss_stays_bounded(srv):
    """8 unauthenticated requests offering 12,500 x 8 KB headers each (the issue's attack)."""
    before = rss_kb(srv.proc.pid)
    pad = "p" * 8000

    def flood(i):
        with connect(srv.port) as s:
            s.sendall(f"GET /v1/models HTTP/1.1\r\nHost: x\r\n".encode())
            batch = "".join(f"X-Flood-{i}-{{}}: {pad}\r\n".format(j) for j in range(100)).encode()
            sent = 0
            for _ in range(125):  # 125 batches x 100 headers = 12,500
                try:
                    s.sendall(batch)
                    sent += len(batch)
                except OSError:
                    break
                if select.select([s], [], [], 0)[0]:
                    break  # the server has answered: stop offering
            [(status, headers, body)], closed = read_responses(s, ["GET"], timeout=10)
            return status, closed or server_closed(s), sent

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(flood, range(8)))
    after = rss_kb(srv.proc.pid)
    print(f"\nheader flood x8: RSS {before/1024:.1f} -> {after/1024:.1f} MiB; "
          f"bytes offered per connection before the 431: {[r[2] for r in results]}")
    for status, closed, _ in results:
        assert status == 431
        assert closed
    assert after - before < 64 * 1024, (before, after)
    assert timed_get(srv.port, "/health")[0] == 200


def test_chunked_body_over_the_limit_is_413(srv):
    """--max-body-bytes is 1 MiB (conftest): a chunked body is cut off as it crosses it."""
    before = rss_kb(srv.proc.pid)
    with connect(srv.port) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: " + AUTH.encode() +
                  b"\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        sent = 0
        while sent < 300 << 20:  # up to 300 MB offered
            try:
                s.sendall(chunk)
            except OSError:
                break
            sent += 0x10000
            if select.select([s], [], [], 0)[0]:
                break
        [(status, _, body)], closed = read_responses(s, ["POST"], timeout=10)
        assert status == 413
        assert json.loads(body)["error"]["type"] == "invalid_request_error"
        assert closed or server_closed(s)
    assert sent < 32 << 20, sent
    assert rss_kb(srv.proc.pid) - before < 64 * 1024


def test_metrics_labels_cannot_be_injected_or_multiplied(srv):
    from prometheus_client.parser import text_string_to_metric_families
    size_before = len(srv.get("/metrics")[1])
    # 2,000 distinct unauthenticated paths, shaped to close a label value and add a metric line.
    for conn_i in range(4):
        with connect(srv.port) as s:
            burst = b"".join(request_bytes("GET", f'/v1/p{conn_i}_{i}"}}evil_metric{{a="{i}')
                             for i in range(500))
            s.sendall(burst + request_bytes("GET", "/nope", headers=[("Connection", "close")]))
            responses, _ = read_responses(s, ["GET"] * 501, timeout=60)
            assert [r[0] for r in responses] == [401] * 501
            assert responses[0][1]["www-authenticate"].startswith("Bearer")
    status, text = srv.get("/metrics")
    assert status == 200
    text = text.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert not any("evil" in name for name in families)
    for sample in families["rapid_requests"].samples:
        assert sample.labels["endpoint"] in ENDPOINTS, sample
        assert sample.labels["status"] in {"1xx", "2xx", "3xx", "4xx", "5xx"}, sample
    assert len(text) - size_before < 1024, (size_before, len(text))


def test_pipelined_requests_are_answered_in_order(srv, oai):
    body = chat_body("Name a colour.")
    alone = oai.chat.completions.create(**json.loads(body)).choices[0].message.content
    with connect(srv.port) as s:
        s.sendall(request_bytes("GET", "/health") +
                  request_bytes("POST", "/v1/chat/completions", body,
                                [("Authorization", AUTH), ("Content-Type", "application/json")]) +
                  request_bytes("GET", "/v1/models", headers=[("Authorization", AUTH), ("Connection", "close")]))
        responses, closed = read_responses(s, ["GET", "POST", "GET"], timeout=60)
        assert closed or server_closed(s)
    assert [r[0] for r in responses] == [200, 200, 200]
    assert json.loads(responses[0][2])["status"] == "ok"
    assert json.loads(responses[1][2])["choices"][0]["message"]["content"] == alone
    assert json.loads(responses[2][2])["data"][0]["id"] == MODEL_NAME


def test_duplicate_content_length_is_400_and_closes(srv):
    with connect(srv.port) as s:
        body = chat_body()
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\n"
                  f"Content-Length: {len(body)}\r\nContent-Length: 5\r\n\r\n".encode() + body +
                  request_bytes("GET", "/health"))
        [(status, headers, resp)], closed = read_responses(s, ["POST"], timeout=10)
        assert status == 400
        assert "Content-Length" in json.loads(resp)["error"]["message"]
        assert headers["connection"] == "close"
        assert closed or server_closed(s)  # the smuggled GET is never answered


def test_malformed_request_is_answered_then_closed(srv):
    with connect(srv.port) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n" + request_bytes("GET", "/health"))
        [(status, _, _)], closed = read_responses(s, ["GET"], timeout=10)
        assert status == 400
        assert closed or server_closed(s)


def test_queue_bound_gives_429_and_529_with_retry_after(tmp_path):
    import anthropic
    import openai
    need_server()
    q = launch(["--no-persist-cache", "--max-num-seqs", "1", "--max-queued-requests", "2"], str(tmp_path / "q.log"))
    streams = []
    try:
        long = chat_body("Count to a thousand.", max_tokens=1500, stream=True, ignore_eos=True)
        for _ in range(3):  # 1 running + 2 queued: the bound
            s = connect(q.port)
            s.sendall(request_bytes("POST", "/v1/chat/completions", long,
                                    [("Authorization", AUTH), ("Content-Type", "application/json")]))
            streams.append(s)
        for s in streams:  # each is admitted: its stream has started (headers, keep-alives)
            s.settimeout(30)
            assert s.recv(64).startswith(b"HTTP/1.1 200")
        oai = openai.OpenAI(base_url=q.base + "/v1", api_key=API_KEY, max_retries=0, timeout=30)
        with pytest.raises(openai.RateLimitError) as e:
            oai.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        assert e.value.response.headers["retry-after"] == "1"
        ant = anthropic.Anthropic(base_url=q.base, api_key=API_KEY, max_retries=0, timeout=30)
        with pytest.raises(anthropic.APIStatusError) as e:
            ant.messages.create(model=MODEL_NAME, max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        assert e.value.status_code == 529
        assert e.value.body["error"]["type"] == "overloaded_error"
        status, dt, _ = timed_get(q.port, "/health")
        assert status == 200
        from prometheus_client.parser import text_string_to_metric_families
        # The engine counts a request as running from its first step on, which can come after its
        # stream's headers: wait (bounded) until the running one has left the queue count.
        deadline = time.time() + 30
        while True:
            fam = {f.name: f for f in text_string_to_metric_families(q.get("/metrics")[1].decode())}
            if fam["rapid_http_queue_depth"].samples[0].value == 2 or time.time() > deadline:
                break
            time.sleep(0.05)
        assert fam["rapid_requests_rejected"].samples[0].value == 2
        assert fam["rapid_http_queue_depth"].samples[0].value == 2
        print(f"\nqueue full: /health {dt*1000:.1f} ms")
        for s in streams:  # the clients leave: their slots come back
            s.close()
        streams = []
        deadline, ok = time.time() + 30, False
        while time.time() < deadline and not ok:
            try:
                oai.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=4)
                ok = True
            except openai.RateLimitError:
                time.sleep(0.2)
        assert ok
    finally:
        for s in streams:
            s.close()
        stop(q)


def test_second_server_on_the_same_port_is_refused(srv, tmp_path):
    out = subprocess.run([BIN, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", str(srv.port),
                          "--ctx", str(CTX), "--no-persist-cache"], capture_output=True, text=True, timeout=180)
    assert out.returncode != 0
    assert "cannot listen" in out.stderr and "in use" in out.stderr, out.stderr[-2000:]
    assert srv.get("/health")[0] == 200


def test_api_key_file_keeps_the_key_out_of_cmdline(tmp_path):
    import openai
    need_server()
    key_file = tmp_path / "key"
    key_file.write_text("file-key-789\n")
    k = launch(["--no-persist-cache"], str(tmp_path / "k.log"), key_args=["--api-key-file", str(key_file)])
    try:
        with open(f"/proc/{k.proc.pid}/cmdline", "rb") as f:
            assert b"file-key-789" not in f.read()
        oai = openai.OpenAI(base_url=k.base + "/v1", api_key="file-key-789", max_retries=0, timeout=60)
        assert oai.models.list().data[0].id == MODEL_NAME
        bad = openai.OpenAI(base_url=k.base + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    finally:
        stop(k)


def test_routes_without_v1_request_ids_and_cors_off(srv, oai):
    import openai
    plain = openai.OpenAI(base_url=srv.base, api_key=API_KEY, max_retries=0, timeout=60)
    body = json.loads(chat_body("Name a colour."))
    a = plain.chat.completions.create(**body).choices[0].message.content
    assert a == oai.chat.completions.create(**body).choices[0].message.content
    raw = oai.chat.completions.with_raw_response.create(**body, extra_headers={"x-request-id": "trace-7"})
    assert raw.headers["x-request-id"] == "trace-7" and raw.headers["request-id"] == "trace-7"
    raw = oai.chat.completions.with_raw_response.create(**body)
    assert raw.headers["x-request-id"].startswith("req_")
    with connect(srv.port) as s:
        s.sendall(request_bytes("OPTIONS", "/v1/chat/completions",
                                headers=[("Origin", "http://localhost:3000"),
                                         ("Access-Control-Request-Method", "POST"), ("Connection", "close")]))
        [(status, headers, _)], _ = read_responses(s, ["OPTIONS"])
    assert status == 403 and "access-control-allow-origin" not in headers


def test_cors_preflight_without_key_when_enabled(tmp_path):
    need_server()
    c = launch(["--no-persist-cache", "--allowed-origins", "http://localhost:3000"], str(tmp_path / "c.log"))
    try:
        with connect(c.port) as s:
            s.sendall(request_bytes("OPTIONS", "/v1/messages",
                                    headers=[("Origin", "http://localhost:3000"),
                                             ("Access-Control-Request-Method", "POST"),
                                             ("Access-Control-Request-Headers", "x-api-key, content-type")]) +
                      request_bytes("GET", "/v1/models", headers=[("Origin", "http://localhost:3000"),
                                                                  ("x-api-key", API_KEY), ("Connection", "close")]))
            (pre, models), _ = read_responses(s, ["OPTIONS", "GET"])
        assert pre[0] == 204
        assert pre[1]["access-control-allow-origin"] == "http://localhost:3000"
        assert "POST" in pre[1]["access-control-allow-methods"]
        assert pre[1]["access-control-allow-headers"] == "x-api-key, content-type"
        assert models[0] == 200 and models[1]["access-control-allow-origin"] == "http://localhost:3000"
    finally:
        stop(c)


def metric_samples(srv):
    from prometheus_client.parser import text_string_to_metric_families
    status, text = srv.get("/metrics")
    assert status == 200
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k in ("endpoint", "status")))): s.value
            for f in text_string_to_metric_families(text.decode()) for s in f.samples}


def metric_value(srv, name, **labels):
    return sum(v for (n, ls), v in metric_samples(srv).items()
               if n == name and all((k, v2) in ls for k, v2 in labels.items()))


def test_non_streaming_client_that_leaves_frees_its_slot(srv):
    """A buffered (non-streaming) chat request writes nothing until its answer is whole, so only a
    look at its socket tells that the client left: the generation must stop then, not run on to
    max_tokens. Its request is counted as a client error (499), and the server answers the next."""
    gone_before = metric_value(srv, "rapid_requests_total", endpoint="/v1/chat/completions", status="4xx")
    body = chat_body("Count from one to one thousand in words.", max_tokens=1800, ignore_eos=True)
    s = connect(srv.port)
    s.sendall(request_bytes("POST", "/v1/chat/completions", body,
                            headers=[("Authorization", AUTH), ("Content-Type", "application/json")]))
    deadline = time.time() + 60
    while metric_value(srv, "rapid_num_requests_running") < 1:
        assert time.time() < deadline, "the request never started"
        time.sleep(0.05)
    steps_running = metric_value(srv, "rapid_engine_steps_total")
    s.close()
    deadline = time.time() + 10
    while metric_value(srv, "rapid_num_requests_running") > 0:
        assert time.time() < deadline, "the generation ran on after its client left"
        time.sleep(0.05)
    steps_after = metric_value(srv, "rapid_engine_steps_total")
    time.sleep(1.0)
    assert metric_value(srv, "rapid_engine_steps_total") == steps_after  # nothing generates any more
    assert steps_after - steps_running < 1800
    assert metric_value(srv, "rapid_requests_total", endpoint="/v1/chat/completions", status="4xx") == gone_before + 1
    with connect(srv.port) as s2:
        s2.sendall(request_bytes("POST", "/v1/chat/completions", chat_body(),
                                 headers=[("Authorization", AUTH), ("Content-Type", "application/json"),
                                          ("Connection", "close")]))
        [(status, _, resp)], _ = read_responses(s2, ["POST"], timeout=60)
    assert status == 200 and json.loads(resp)["choices"][0]["message"]["content"]
