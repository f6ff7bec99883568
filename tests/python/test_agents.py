"""Issue #14: real agent clients run multi-turn tool loops (tool call -> tool result -> answer)
against the real server on SmolLM2-135M, over Chat Completions, Responses and Messages, streamed
and not; Claude-Code- and Codex-shaped request recordings are replayed.

The references are the clients themselves: each library parses our tool call, runs the tool,
sends the result back in its own wire shape, and must get an answer. The openai / anthropic SDK
loops run here (the pinned SDKs of .venv); the agent frameworks run in .venv-agents (aider in
.venv-aider), created by scripts/setup.sh from tests/python/requirements-agents.txt /
requirements-aider.txt, each driven by a small script in tests/python/agents/. A 135M model does
not reliably decide to call a tool, so the loops force the first call (tool_choice naming the
tool, decoded under the tool's schema) and ask for an answer after the result: what is checked
is the protocol, not the model's judgement."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from conftest import API_KEY, MODEL_NAME, ROOT, launch, need_server, stop

AGENTS_DIR = os.path.join(ROOT, "tests", "python", "agents")
RECORDINGS = os.path.join(ROOT, "tests", "python", "recordings")
AGENTS_PY = os.path.join(ROOT, ".venv-agents", "bin", "python")
AIDER = os.path.join(ROOT, ".venv-aider", "bin", "aider")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
PROMPT = "What is the weather in Paris? Use the get_weather tool."
REPORT = "18 C and sunny in Paris"


def _venv(path, req):
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run scripts/setup.sh (installs {req})")
    return path


# ---------------------------------------------------------------- the official SDKs, in-process

def _chat(oai, messages, stream, **kw):
    kw = dict(model=MODEL_NAME, messages=messages, tools=[WEATHER], temperature=0, max_tokens=40, **kw)
    if not stream:
        m = oai.chat.completions.create(**kw).choices[0]
        return m.message.content, [(c.id, c.function.name, c.function.arguments) for c in m.message.tool_calls or []], \
            m.finish_reason
    content, calls, finish = "", {}, None
    for chunk in oai.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            content += c.delta.content or ""
            for t in c.delta.tool_calls or []:
                cur = calls.setdefault(t.index, ["", "", ""])
                cur[0] += t.id or ""
                cur[1] += (t.function and t.function.name) or ""
                cur[2] += (t.function and t.function.arguments) or ""
            finish = c.finish_reason or finish
    return content, [tuple(v) for _, v in sorted(calls.items())], finish


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_sdk_chat_tool_loop(oai, stream):
    msgs = [{"role": "user", "content": PROMPT}]
    _, calls, finish = _chat(oai, msgs, stream, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert finish == "tool_calls" and len(calls) == 1
    call_id, name, args = calls[0]
    assert name == "get_weather" and "city" in json.loads(args)
    # Turn two, in the shape the SDK and agent loops send: content null beside tool_calls.
    msgs += [{"role": "assistant", "content": None,
              "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}]},
             {"role": "tool", "tool_call_id": call_id, "content": REPORT}]
    content, calls2, finish2 = _chat(oai, msgs, stream, tool_choice="auto")
    assert finish2 in ("stop", "length", "tool_calls") and (content or calls2)
    content, calls3, finish3 = _chat(oai, msgs, stream, tool_choice="none")
    assert content.strip() and not calls3 and finish3 in ("stop", "length")
    # A third turn after the answer (history holds call, result and answer).
    msgs += [{"role": "assistant", "content": content}, {"role": "user", "content": "And in Tokyo?"}]
    _, calls4, _ = _chat(oai, msgs, stream, tool_choice="required")
    assert calls4 and calls4[0][1] == "get_weather"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_openai_sdk_responses_tool_loop(oai, stream):
    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}

    def create(inp, choice):
        kw = dict(model=MODEL_NAME, input=inp, tools=[tool], tool_choice=choice, temperature=0, max_output_tokens=40,
                  instructions="You answer weather questions.")
        if not stream:
            return oai.responses.create(**kw)
        done = [ev.response for ev in oai.responses.create(stream=True, **kw) if ev.type == "response.completed"]
        assert len(done) == 1
        return done[0]

    inp = [{"role": "developer", "content": "Use tools."}, {"role": "user", "content": PROMPT}]
    r = create(inp, {"type": "function", "name": "get_weather"})
    fcs = [o for o in r.output if o.type == "function_call"]
    assert len(fcs) == 1 and fcs[0].name == "get_weather"
    inp += [o.model_dump(exclude_none=True) for o in r.output]  # sent back as returned
    inp.append({"type": "function_call_output", "call_id": fcs[0].call_id, "output": REPORT})
    assert create(inp, "auto").status in ("completed", "incomplete")
    r3 = create(inp, "none")
    assert r3.output_text.strip()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_sdk_messages_tool_loop(ant, stream):
    tool = {"name": "get_weather", "description": "Get the current weather for a city.",
            "input_schema": WEATHER["function"]["parameters"]}

    def create(messages, choice):
        kw = dict(model=MODEL_NAME, max_tokens=40, extra_body={"temperature": 0}, tools=[tool], tool_choice=choice,
                  messages=messages,
                  system=[{"type": "text", "text": "You answer weather questions.", "cache_control": {"type": "ephemeral"}}])
        if not stream:
            return ant.messages.create(**kw)
        with ant.messages.stream(**kw) as s:
            return s.get_final_message()

    msgs = [{"role": "user", "content": PROMPT}]
    m = create(msgs, {"type": "tool", "name": "get_weather"})
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and len(uses) == 1 and "city" in uses[0].input
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                           "content": [{"type": "text", "text": REPORT}]}]}]
    m2 = create(msgs, {"type": "auto"})
    assert m2.stop_reason in ("end_turn", "max_tokens", "tool_use") and m2.content
    m3 = create(msgs, {"type": "none"})
    text = "".join(b.text for b in m3.content if b.type == "text")
    assert text.strip() and m3.stop_reason in ("end_turn", "max_tokens")


# ---------------------------------------------------------------- agent frameworks (.venv-agents)

CLIENTS = {
    "openai_agents_loop.py": ["chat", "chat_stream", "responses", "responses_stream"],
    "pydantic_ai_loop.py": ["chat", "chat_stream", "responses", "responses_stream", "anthropic", "anthropic_stream"],
    "litellm_loop.py": ["chat", "chat_stream", "anthropic", "anthropic_stream", "responses", "responses_stream"],
    "langchain_loop.py": ["chat", "chat_stream", "responses", "responses_stream"],
    "smolagents_loop.py": ["chat", "chat_stream"],
    "llm_loop.py": ["chat", "chat_stream"],
}


@pytest.fixture(scope="module")
def client_runs(server):
    """Every framework script started at once against the one server (agents share a server,
    and it keeps CI short); each test below waits for its own."""
    py = _venv(AGENTS_PY, "tests/python/requirements-agents.txt")
    env = dict(os.environ, RAPID_BASE=server.base, RAPID_KEY=API_KEY, RAPID_MODEL=MODEL_NAME,
               PYTHONPATH=AGENTS_DIR, OPENAI_API_KEY=API_KEY, ANTHROPIC_API_KEY=API_KEY)
    procs = {s: subprocess.Popen([py, os.path.join(AGENTS_DIR, s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env, cwd=AGENTS_DIR) for s in CLIENTS}
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("script", list(CLIENTS))
def test_agent_framework_tool_loops(server, client_runs, script):
    p = client_runs[script]
    out, err = p.communicate(timeout=900)
    lines = [l.split("RAPID_RESULT ", 1)[1] for l in out.splitlines() if "RAPID_RESULT " in l]
    assert p.returncode == 0 and lines, f"{script} exited {p.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    results = json.loads(lines[-1])
    assert sorted(results) == sorted(CLIENTS[script])
    failed = {k: v["error"] for k, v in results.items() if not v["ok"]}
    assert not failed, "\n\n".join(f"== {k}\n{e}" for k, e in failed.items())
    for loop, r in results.items():
        # The library parsed our tool call and ran the tool with the model's arguments.
        assert r["calls"] and all(isinstance(c, str) for c in r["calls"]), (loop, r)
        assert isinstance(r["answer"], str) and r["answer"].strip(), (loop, r)
    assert server.alive()


def test_mini_swe_agent_round_trips(server, tmp_path):
    """mini-swe-agent's CLI (litellm, tool calls to its bash tool), non-interactive: each step's
    tool call is parsed into a command and its observation goes back as a `tool` message."""
    py = _venv(AGENTS_PY, "tests/python/requirements-agents.txt")
    log = tmp_path / "commands.jsonl"
    traj = tmp_path / "traj.json"
    env = dict(os.environ, RAPID_MINI_LOG=str(log), PYTHONPATH=AGENTS_DIR, MSWEA_COST_TRACKING="ignore_errors",
               MSWEA_CONFIGURED="true", MSWEA_GLOBAL_CONFIG_DIR=str(tmp_path / "cfg"), OPENAI_API_KEY=API_KEY)
    mini = os.path.join(os.path.dirname(py), "mini")
    cfg = ["-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={server.base}/v1",
           "-c", f"model.model_kwargs.api_key={API_KEY}", "-c", "model.model_kwargs.temperature=0",
           "-c", "model.model_kwargs.max_tokens=40", "-c", "model.model_kwargs.tool_choice=required",
           "-c", "agent.step_limit=2"]
    p = subprocess.run([mini, "-m", "openai/" + MODEL_NAME, "-t", "Print hello with echo.", "--yolo",
                        "--exit-immediately", "--environment-class", "mini_env.RecordingEnvironment",
                        "-o", str(traj)] + cfg, capture_output=True, text=True, timeout=600, env=env,
                       cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert traj.exists(), f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    t = json.loads(traj.read_text())
    assert t["info"]["exit_status"] in ("LimitsExceeded", "Submitted"), t["info"]
    msgs = t["messages"]
    # Two model turns, each a parsed bash call whose observation went back as a tool message.
    assistant = [m for m in msgs if m["role"] == "assistant"]
    tool = [m for m in msgs if m["role"] == "tool"]
    assert len(assistant) >= 2 and len(tool) >= 2, [m["role"] for m in msgs]
    assert all(m.get("tool_calls") for m in assistant)
    assert len(log.read_text().splitlines()) >= 2


def _chat_requests(server):
    """Chat-completions requests the server has answered, by HTTP status class (from /metrics)."""
    _, body = server.get("/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("rapid_requests_total{") and 'endpoint="/v1/chat/completions"' in line:
            status = line.split('status="')[1].split('"')[0]
            out[status] = out.get(status, 0) + float(line.rsplit(" ", 1)[1])
    return out


def test_aider_round_trip(server, tmp_path):
    """aider's CLI (litellm, openai/ provider), non-interactive with --yes-always --message on a
    temp git repo: it sends the chat with the repo's file and gets our reply (max_tokens 48 through
    its model settings: a 135M model would otherwise write until the context is full)."""
    aider = _venv(AIDER, "tests/python/requirements-aider.txt")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "hello.py").write_text("print('hello')\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "."],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, check=True)
    settings = tmp_path / "model-settings.yml"
    settings.write_text(f"- name: openai/{MODEL_NAME}\n  extra_params:\n    max_tokens: 48\n")
    env = dict(os.environ, OPENAI_API_KEY=API_KEY, OPENAI_API_BASE=server.base + "/v1", HOME=str(tmp_path),
               AIDER_ANALYTICS="false")
    before = _chat_requests(server)
    p = subprocess.run([aider, "--model", "openai/" + MODEL_NAME, "--model-settings-file", str(settings),
                        "--yes-always", "--no-check-update", "--no-show-model-warnings", "--no-analytics",
                        "--no-auto-commits", "--map-tokens", "0", "--no-stream", "--edit-format", "whole",
                        "--message", "Add a comment to hello.py", "hello.py"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=repo, stdin=subprocess.DEVNULL)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    for bad in ("APIError", "BadRequestError", "APIConnectionError", "Traceback"):
        assert bad not in out, out[-4000:]
    after = _chat_requests(server)
    assert after.get("2xx", 0) > before.get("2xx", 0), (before, after)
    assert {k: v for k, v in after.items() if k != "2xx"} == {k: v for k, v in before.items() if k != "2xx"}


# ---------------------------------------------------------------- recorded agent requests

def _replay(server, rec):
    headers = {"Content-Type": "application/json"}
    headers.update({k: v.replace("$KEY", API_KEY) for k, v in rec["headers"].items()})
    body = dict(rec["body"], model=MODEL_NAME)
    req = urllib.request.Request(server.base + rec["path"], data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _sse_events(text):
    out = []
    for block in text.split("\n\n"):
        data = [l[6:] for l in block.splitlines() if l.startswith("data: ")]
        if data and data[0] != "[DONE]":
            out.append(json.loads("\n".join(data)))
    return out


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    """The recordings carry real agents' prompt sizes (20 tools, long system prompts): a server
    with SmolLM2's whole 8192-token context."""
    need_server()
    d = tmp_path_factory.mktemp("serve-long")
    srv = launch(["--ctx", "8192", "--cache-dir", str(d / "kv")], str(d / "serve.log"))
    yield srv
    stop(srv)


@pytest.mark.parametrize("name", sorted(f[:-5] for f in os.listdir(RECORDINGS) if f.endswith(".json")))
def test_recorded_agent_requests(long_server, name):
    server = long_server
    with open(os.path.join(RECORDINGS, name + ".json")) as f:
        rec = json.load(f)
    status, text = _replay(server, rec)
    assert status == 200, text[:2000]
    stream = rec["body"].get("stream", False)
    events = _sse_events(text) if stream else [json.loads(text)]
    kind = rec["api"]
    if kind == "messages":
        if stream:
            types = [e["type"] for e in events]
            assert types[0] == "message_start" and types[-1] == "message_stop", types
            stop = [e for e in events if e["type"] == "message_delta"][-1]["delta"]["stop_reason"]
        else:
            stop = events[0]["stop_reason"]
            assert events[0]["content"], events[0]
        assert stop in rec["expect_stop"], stop
    elif kind == "responses":
        final = events[-1]["response"] if stream else events[0]
        assert final["status"] in ("completed", "incomplete")
        kinds = {o["type"] for o in final["output"]}
        assert kinds & set(rec["expect_output"]), final["output"]
    else:
        finish = [c["finish_reason"] for e in events for c in e.get("choices", []) if c.get("finish_reason")]
        assert len(finish) == 1 and finish[0] in rec["expect_stop"], events[-3:]
    assert server.alive()
