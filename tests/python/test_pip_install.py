"""`pip install <repo>` in a fresh venv: scikit-build-core builds the native binaries into the
wheel; the `rapid-mlx` console script and the reference system's command,
`python -m rapid_mlx.server --model NAME --port P`, then serve a chat that equals what
build/rapid-mlx serves for the same request, with no Python left in the serving process.

The build reuses ccache (CCACHE_BASEDIR at the repo root, pyproject's build-wheel/ at build/'s
depth) and build-wheel/ itself, so after the first install it costs a relink, not a rebuild."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import BIN, MODEL, ROOT, _free_port, launch, need_server, stop

REQUEST = {"model": "smollm2", "messages": [{"role": "user", "content": "Name three fruits."}],
           "max_tokens": 24, "temperature": 0}


def build_compilers():
    """build/'s compilers: ccache keys on the compiler's path (c++ and g++ are the same binary but
    miss each other's objects), and CMake under pip may pick g++ where build/ has c++."""
    env = {}
    try:
        with open(os.path.join(ROOT, "build", "CMakeCache.txt")) as f:
            for line in f:
                for var, key in (("CMAKE_CXX_COMPILER:", "CXX"), ("CMAKE_C_COMPILER:", "CC")):
                    if line.startswith(var):
                        env[key] = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    need_server()
    d = tmp_path_factory.mktemp("pipvenv")
    subprocess.run([sys.executable, "-m", "venv", str(d / "venv")], check=True, timeout=300)
    py = str(d / "venv" / "bin" / "python")
    env = {**os.environ, "CCACHE_BASEDIR": ROOT, **build_compilers()}
    t0 = time.time()
    r = subprocess.run([py, "-m", "pip", "install", "-q", ROOT], capture_output=True, text=True, env=env,
                       timeout=3600)
    print(f"\npip install {ROOT}: {time.time() - t0:.0f} s", file=sys.stderr)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return d / "venv"


def chat(base):
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(REQUEST).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def wait_healthy(proc, base, log):
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{open(log).read()[-3000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail("server did not become healthy")


def test_console_script_help(venv):
    r = subprocess.run([str(venv / "bin" / "rapid-mlx"), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "serve" in (r.stdout + r.stderr).split()
    r = subprocess.run([str(venv / "bin" / "rapid-mlx"), "serve", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "--embedding-model" in r.stdout + r.stderr


def test_reference_command_serves_the_same_chat(venv, tmp_path):
    ref = launch(["--no-persist-cache"], str(tmp_path / "ref.log"), key_args=[])
    try:
        want = chat(ref.base)
    finally:
        stop(ref)
    port = _free_port()
    log = str(tmp_path / "pip.log")
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [str(venv / "bin" / "python"), "-m", "rapid_mlx.server", "--model", MODEL, "--port", str(port),
             "--host", "127.0.0.1", "--served-model-name", "smollm2", "--continuous-batching", "--timeout", "300"],
            stdout=f, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(proc, base, log)
        # execv kept the pid: the serving process is the native binary, not Python.
        assert os.path.basename(os.readlink(f"/proc/{proc.pid}/exe")) == "rapid-mlx-http"
        assert chat(base) == want
        text = open(log).read()
        assert "--continuous-batching: always on" in text and "--timeout: no rapid-mlx counterpart" in text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_unknown_flag_is_refused(venv):
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "rapid_mlx.server", "--model", MODEL, "--gpu-layers", "9"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unknown flag '--gpu-layers'" in r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "rapid_mlx.server", "--port", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--model" in r.stderr


def test_wheel_carries_both_binaries_of_this_tree(venv):
    # Side by side (rapid-mlx execs rapid-mlx-http from its own directory), built from these
    # sources: every command's help equals the build tree's binary's.
    import glob
    bins = glob.glob(str(venv / "lib" / "python*" / "site-packages" / "rapid_mlx" / "bin" / "*"))
    assert sorted(os.path.basename(b) for b in bins) == ["rapid-mlx", "rapid-mlx-http"]
    for cmd in (["--help"], ["serve", "--help"], ["run", "--help"]):
        got = subprocess.run([str(venv / "bin" / "rapid-mlx")] + cmd, capture_output=True, text=True, timeout=60)
        want = subprocess.run([BIN] + cmd, capture_output=True, text=True, timeout=60)
        assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
