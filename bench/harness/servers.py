"""Starts and stops the servers under test, one at a time, each with its best CPU settings
(all cores, a context large enough for the agent workload)."""
import os
import signal
import socket
import subprocess
import time

from . import client


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """engine: 'rapid-mlx' | 'llama.cpp' | 'mlx-lm'; model_path: file (GGUF) or directory."""

    def __init__(self, engine, model_path, rapid_bin=None, peer_python=None, log_dir="/tmp", extra_args=(),
                 log_name=None):
        self.engine, self.model_path = engine, model_path
        self.extra_args = list(extra_args)  # appended to the command (rapid-mlx flags)
        self.rapid_bin, self.peer_python = rapid_bin, peer_python
        self.log_path = os.path.join(log_dir, log_name or f"server-{engine}-{os.path.basename(model_path)}.log")
        self.proc, self.port = None, None
        # mlx-lm loads whatever the request names; "default_model" is its alias for --model.
        self.model_name = "default_model" if engine == "mlx-lm" else os.path.basename(model_path)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self):
        n = str(os.cpu_count() or 1)
        port = str(self.port)
        if self.engine == "rapid-mlx":
            return [self.rapid_bin, "serve", "--model", self.model_path, "--host", "127.0.0.1",
                    "--port", port] + self.extra_args
        if self.engine == "llama.cpp":
            return [self.peer_python, "-m", "llama_cpp.server", "--model", self.model_path,
                    "--host", "127.0.0.1", "--port", port, "--n_threads", n, "--n_threads_batch", n,
                    "--n_ctx", "8192", "--use_mlock", "False", "--verbose", "False",
                    # Its default cancels the running stream whenever a new request arrives.
                    "--interrupt_requests", "False"]
        if self.engine == "mlx-lm":
            return [self.peer_python, "-m", "mlx_lm", "server", "--model", self.model_path,
                    "--host", "127.0.0.1", "--port", port, "--log-level", "WARNING"]
        raise ValueError(f"unknown engine {self.engine}")

    def start(self, timeout=300.0):
        """Spawns the server and returns seconds until /v1/models answers."""
        self.port = free_port()
        t0 = time.perf_counter()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.engine} exited with {self.proc.returncode} at start-up; "
                                   f"see {self.log_path}")
            try:
                # mlx-lm's /v1/models scans the Hugging Face cache and fails without one.
                if self.engine == "mlx-lm":
                    client.get_json(f"http://127.0.0.1:{self.port}", "/health", timeout=2.0)
                else:
                    models = client.get_json(self.base_url, "/models", timeout=2.0)
                    ready = time.perf_counter() - t0
                    # Send the id the server announces (rapid-mlx rejects any other name).
                    self.model_name = (models.get("data") or [{}])[0].get("id", self.model_name)
                    return ready
                return time.perf_counter() - t0
            except (OSError, ValueError, client.ApiError):
                pass
            if time.perf_counter() - t0 > timeout:
                self.stop()
                raise RuntimeError(f"{self.engine} not ready after {timeout:.0f}s; see {self.log_path}")
            time.sleep(0.1)

    def alive(self):
        """Running and answering (a dying process may not have exited yet)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            if self.engine == "mlx-lm":
                client.get_json(f"http://127.0.0.1:{self.port}", "/health", timeout=5.0)
            else:
                client.get_json(self.base_url, "/models", timeout=5.0)
            return True
        except (OSError, ValueError, client.ApiError):
            return False

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: children go too
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def add_model_and_bin_args(ap):
    """--model (default: SmolLM2-135M Q4_1 in the model cache) and --bin (this checkout's build),
    the rapid-mlx-only harness tools' common arguments."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models")),
        "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=os.path.join(root, "build", "rapid-mlx"))
