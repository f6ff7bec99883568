"""rapid-mlx's stand-in for the `utils` module of llama.cpp's server test suite (tools/server/tests):
the same names the suite's tests use (ServerProcess, ServerPreset, ServerError, match_regex, ...),
but ServerProcess starts `rapid-mlx serve` on SmolLM2-135M-Instruct instead of llama-server.

Written for rapid-mlx (no llama.cpp code); the suite's test files run unchanged on top of it.
llama-server options with a rapid-mlx equivalent are mapped (alias -> --served-model-name,
n_ctx -> --ctx, n_slots -> --max-num-seqs, api_key); the others (n_batch, n_predict, jinja,
temperature, seed, ...) have no effect, and the tests that depend on them are deselected in
conftest.py with the reason."""
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Any, Iterator, Optional, Set  # noqa: F401  (the suite uses them via `import *`)

import requests

BIN = os.environ["RAPID_MLX_BIN"]
MODEL = os.environ["RAPID_TEST_MODEL"]
LOG_DIR = os.environ.get("RAPID_LLAMACPP_LOGS", os.getcwd())
DEFAULT_HTTP_TIMEOUT = 120
DEFAULT_REQUEST_TIMEOUT = 600
# llama-server also answers the OpenAI routes without the /v1 prefix; when rapid-mlx does not
# (probed at start), requests to these are sent under /v1.
ROOT_OPENAI_ROUTES = ("/chat/completions", "/completions", "/responses", "/models", "/embeddings")


class ServerResponse:
    headers: dict
    status_code: int
    body: Any


class ServerError(Exception):
    def __init__(self, code, body):
        super().__init__(f"HTTP {code}: {body}")
        self.code = code
        self.body = body


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    server_host = "127.0.0.1"
    model_alias: Optional[str] = None
    n_ctx: Optional[int] = None
    n_slots: Optional[int] = None
    api_key: Optional[str] = None
    # Accepted for the suite's sake; rapid-mlx has no such switches (see the module docstring).
    debug = False
    offline = False
    jinja: Optional[bool] = None
    chat_template: Optional[str] = None
    chat_template_file: Optional[str] = None
    reasoning_format: Optional[str] = None
    model_hf_repo: Optional[str] = None
    model_hf_file: Optional[str] = None
    n_batch: Optional[int] = None
    n_predict: Optional[int] = None
    temperature = 0.8
    seed = 42

    def __init__(self):
        self.server_port = _free_port()
        self.process = None
        self.root_routes = True

    def start(self, timeout_seconds: int = DEFAULT_HTTP_TIMEOUT) -> None:
        name = self.model_alias or "smollm2"
        args = [BIN, "serve", "--model", MODEL, "--host", self.server_host, "--port", str(self.server_port),
                "--served-model-name", name,
                # llama-server answers whatever `model` a client names: so does this server here.
                "--model-alias", f"*={name}", "--no-persist-cache"]
        if self.n_ctx:
            args += ["--ctx", str(self.n_ctx)]
        if self.n_slots:
            args += ["--max-num-seqs", str(self.n_slots)]
        if self.api_key:
            args += ["--api-key", self.api_key]
        self._log = open(os.path.join(LOG_DIR, f"serve-{self.server_port}.log"), "w")
        self.process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        server_instances.add(self)
        deadline = time.time() + timeout_seconds
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"rapid-mlx serve exited with {self.process.returncode}")
            try:
                if requests.get(self.make_url("/health"), timeout=5).status_code == 200:
                    self.root_routes = requests.get(self.make_url("/models"), headers=self._auth(),
                                                    timeout=5).status_code != 404
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"rapid-mlx serve did not start within {timeout_seconds} s")

    def stop(self) -> None:
        server_instances.discard(self)
        if self.process:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
            self._log.close()

    def _auth(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def make_url(self, path: str, host: Optional[str] = None) -> str:
        if not self.root_routes and path.startswith(ROOT_OPENAI_ROUTES):
            path = "/v1" + path
        return f"http://{host or self.server_host}:{self.server_port}{path}"

    def make_request(self, method: str, path: str, data: Any = None, headers: Optional[dict] = None,
                     timeout: Optional[float] = DEFAULT_REQUEST_TIMEOUT, host: Optional[str] = None) -> ServerResponse:
        h = {**self._auth(), **(headers or {})}
        h = {k: v for k, v in h.items() if v is not None}
        r = requests.request(method, self.make_url(path, host), headers=h,
                             json=data if method == "POST" else None, timeout=timeout)
        res = ServerResponse()
        res.headers = dict(r.headers)
        res.status_code = r.status_code
        try:
            res.body = r.json()
        except ValueError:
            res.body = r.text
        return res

    def make_stream_request(self, method: str, path: str, data: Optional[dict] = None,
                            headers: Optional[dict] = None, host: Optional[str] = None) -> Iterator[dict]:
        h = {k: v for k, v in {**self._auth(), **(headers or {})}.items() if v is not None}
        r = requests.request(method, self.make_url(path, host), headers=h, json=data, stream=True,
                             timeout=DEFAULT_REQUEST_TIMEOUT)
        if r.status_code != 200:
            raise ServerError(r.status_code, r.json())
        for raw in r.iter_lines():
            line = raw.decode("utf-8")
            if line.startswith("data: "):
                if line[6:].strip() == "[DONE]":
                    break
                yield json.loads(line[6:])


server_instances: Set[ServerProcess] = set()


class ServerPreset:
    """Every preset is the one small model rapid-mlx tests with; the names are the suite's."""

    @staticmethod
    def _preset(alias: str, n_ctx: int) -> ServerProcess:
        s = ServerProcess()
        s.model_alias, s.n_ctx, s.n_slots = alias, n_ctx, 2
        return s

    @staticmethod
    def tinyllama2() -> ServerProcess:
        return ServerPreset._preset("tinyllama-2", 512)

    @staticmethod
    def tinygemma3() -> ServerProcess:
        return ServerPreset._preset("tinygemma3", 1024)


def match_regex(regex: str, text: str) -> bool:
    return re.search(regex, text, flags=re.IGNORECASE | re.MULTILINE | re.DOTALL) is not None
