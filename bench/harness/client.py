"""One OpenAI-API client for every server: a streaming chat request over raw http.client, timing
each SSE chunk as it arrives (the SDKs buffer, and we want per-token timestamps)."""
import http.client
import json
import time
import urllib.parse


class ApiError(RuntimeError):
    pass


def _conn(base_url, timeout):
    u = urllib.parse.urlparse(base_url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout), u.path.rstrip("/")


def get_json(base_url, path, timeout=5.0):
    conn, prefix = _conn(base_url, timeout)
    try:
        conn.request("GET", prefix + path)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise ApiError(f"GET {path}: HTTP {r.status}: {body[:200]!r}")
        return json.loads(body)
    finally:
        conn.close()


def chat(base_url, model, messages, max_tokens, tools=None, timeout=600.0, stream=True, extra=None):
    """Sends one chat completion; returns timings (seconds, relative to the send time):
    ttft, token_times (arrival of each chunk carrying generated text / tool-call deltas),
    total, n_chunks, completion_tokens (usage if reported, else chunks), prompt_tokens and
    cached_tokens (usage or None), text, finish_reason. `extra`: more request fields (e.g. {"ignore_eos": True})."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
            "stream": stream, **(extra or {})}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = tools
    data = json.dumps(body).encode()
    conn, prefix = _conn(base_url, timeout)
    t0 = time.perf_counter()
    try:
        conn.request("POST", prefix + "/chat/completions", body=data,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        r = conn.getresponse()
        if r.status != 200:
            raise ApiError(f"HTTP {r.status}: {r.read()[:300]!r}")
        if not stream:
            obj = json.loads(r.read())
            total = time.perf_counter() - t0
            usage = obj.get("usage") or {}
            return {"total": total, "prompt_tokens": usage.get("prompt_tokens"),
                    "completion_tokens": usage.get("completion_tokens"),
                    "text": (obj["choices"][0]["message"].get("content") or "")}
        times, parts, usage, finish, calls = [], [], None, None, {}
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators and ": ping" comments
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            now = time.perf_counter() - t0
            obj = json.loads(payload)
            if obj.get("error"):
                raise ApiError(f"stream error: {obj['error']}")
            if obj.get("usage"):
                usage = obj["usage"]
            for ch in obj.get("choices") or []:
                d = ch.get("delta") or {}
                piece = (d.get("content") or "") + (d.get("reasoning_content") or "") + \
                    (d.get("reasoning") or "")
                if piece or d.get("tool_calls"):
                    times.append(now)
                    parts.append(piece)
                for tc in d.get("tool_calls") or []:  # fragments of one call share its index
                    c = calls.setdefault(tc.get("index", 0), {"id": "", "type": "function",
                                                              "function": {"name": "", "arguments": ""}})
                    c["id"] = tc.get("id") or c["id"]
                    f = tc.get("function") or {}
                    c["function"]["name"] += f.get("name") or ""
                    c["function"]["arguments"] += f.get("arguments") or ""
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        total = time.perf_counter() - t0
    finally:
        conn.close()
    if finish is None:
        raise ApiError(f"stream ended after {len(times)} chunks without a finish_reason")
    usage = usage or {}
    return {"ttft": times[0] if times else total, "token_times": times, "total": total,
            "n_chunks": len(times), "completion_tokens": usage.get("completion_tokens") or len(times),
            "prompt_tokens": usage.get("prompt_tokens"), "text": "".join(parts),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
            "tool_calls": [calls[k] for k in sorted(calls)], "finish_reason": finish}


def prompt_tokens(base_url, model, messages, tools=None):
    """Prompt length as the server counts it (same template and tokenizer it just used)."""
    r = chat(base_url, model, messages, 1, tools=tools, stream=False)
    return r["prompt_tokens"]
