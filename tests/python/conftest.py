"""Fixtures for the end-to-end server tests: the real `rapid-mlx serve` on SmolLM2-135M, on a free
loopback port, driven by the official openai / anthropic SDKs.

Skips (with the reason) only when the binary has no `serve` command or the model file is absent."""
import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("RAPID_MLX_BIN", os.path.join(ROOT, "build", "rapid-mlx"))
CACHE = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
MODEL = os.path.join(CACHE, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
GOLDEN = os.path.join(ROOT, "tests", "golden", "server", "smollm2_prompts.json")
API_KEY = "test-key-123"
MODEL_NAME = "smollm2"
CTX = 2048
TINY_CHAT = os.path.join(CACHE, "tiny-qwen3-chat")


def tiny_chat_model():
    """tiny-qwen3-chat (scripts/make_tiny_chat_model.py, random weights), written into the model cache
    on first use. Every test that needs it asks here: test_hub runs before test_warm_turns, once its
    only writer, so on a fresh machine test_hub's 12 tests skipped."""
    if not os.path.exists(os.path.join(TINY_CHAT, "model.safetensors")):
        import sys
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import make_tiny_chat_model
        make_tiny_chat_model.make(TINY_CHAT)
    return TINY_CHAT


def _serve_available():
    if not os.path.exists(BIN):
        return False, f"{BIN} not built"
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    if "serve" not in (out.stdout + out.stderr).split():
        return False, f"{BIN} has no 'serve' command"
    return True, ""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc, port, log_path):
        self.proc, self.port, self.log_path = proc, port, log_path
        self.base = f"http://127.0.0.1:{port}"

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def alive(self):
        return self.proc.poll() is None

    def get(self, path, headers=None):
        req = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def delete(self, path):
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {API_KEY}"},
                                     method="DELETE")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path, body, headers=None, raw=False):
        data = body if raw else json.dumps(body).encode()
        h = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, headers=h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def launch(args, log_path, timeout=180, key_args=None, model=MODEL, name=MODEL_NAME, env=None):
    """Starts `rapid-mlx serve` on the test model with extra `args` on a free port; waits for /health.
    key_args replaces `--api-key API_KEY` (e.g. with --api-key-file); name None serves the
    model under the name rapid-mlx gives it (model None: no --model, for --models-dir); env adds
    environment variables."""
    port = _free_port()
    log = open(log_path, "w")
    key_args = ["--api-key", API_KEY] if key_args is None else list(key_args)
    name_args = ["--served-model-name", name] if name else []
    proc = subprocess.Popen(
        [BIN, "serve"] + (["--model", model] if model else []) + ["--host", "127.0.0.1", "--port", str(port)] +
        key_args + name_args +
        ["--ctx", str(CTX), "--max-body-bytes", str(1 << 20)] + list(args),
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    srv = Server(proc, port, log_path)
    srv.log_file = log
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"rapid-mlx serve exited with {proc.returncode}:\n{srv.log()}")
        try:
            if srv.get("/health")[0] == 200:
                return srv
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"rapid-mlx serve did not become healthy:\n{srv.log()}")


def stop(srv):
    srv.proc.terminate()
    try:
        srv.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()
    srv.log_file.close()


def own_server(tmp_path_factory, name, args=()):
    """A server of a test file's own (its requests leave no cached prefixes for other files)."""
    need_server()
    d = tmp_path_factory.mktemp(name)
    return launch(list(args), str(d / "serve.log"))


def need_server():
    ok, why = _serve_available()
    if not ok:
        pytest.skip(why)
    if not os.path.exists(MODEL):
        pytest.skip(f"model file absent: {MODEL} (run scripts/fetch_models.sh)")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    need_server()
    d = tmp_path_factory.mktemp("serve")
    # Snapshots go to a scratch folder: tests never touch the user's ~/.cache.
    srv = launch(["--cache-dir", str(d / "kv"), "--cache-key-file", str(d / "kv.key")], str(d / "serve.log"))
    yield srv
    stop(srv)


@pytest.fixture(scope="session")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.fixture(scope="session")
def oai(server):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def ant(server):
    import anthropic
    return anthropic.Anthropic(base_url=server.base, api_key=API_KEY, max_retries=0, timeout=120)


def template_env():
    """jinja2 set up as transformers' apply_chat_template sets it up (sandboxed, trim_blocks,
    lstrip_blocks, loopcontrols, tojson without ASCII escapes, raise_exception): the oracle that
    renders chat templates independently of the server."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, **k: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env
