"""`rapid-mlx ps`: the servers running on this machine, found through their announcement files,
with figures that must agree with each server's own /metrics and the kernel's VmRSS; a server
stopped normally leaves nothing behind, one killed with -9 is swept by the next `ps`."""
import os
import signal
import subprocess

from conftest import BIN, launch, need_server, stop


def ps(env):
    out = subprocess.run([BIN, "ps"], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    return [line.split() for line in out.splitlines()[1:]]


def metric(srv, name):
    _, body = srv.get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[1])
    raise KeyError(name)


def test_ps_lists_running_servers(tmp_path):
    need_server()
    env = {**os.environ, "RAPID_SERVERS_DIR": str(tmp_path / "servers")}
    a = launch([], str(tmp_path / "a.log"), name="model-a", env=env)
    b = launch([], str(tmp_path / "b.log"), name="model-b", env=env)
    try:
        rows = {int(r[0]): r for r in ps(env)}
        assert set(rows) == {a.proc.pid, b.proc.pid}
        for srv, name in ((a, "model-a"), (b, "model-b")):
            r = rows[srv.proc.pid]
            assert r[1] == name and r[2] == srv.base
            total = metric(srv, "rapid_kv_cache_blocks_total")
            used = total - metric(srv, "rapid_kv_cache_blocks_free")
            assert r[5] == f"{used:.0f}/{total:.0f}"
            with open(f"/proc/{srv.proc.pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
            assert abs(float(r[3]) - rss) < max(20, 0.2 * rss)
        stop(a)
        assert [int(r[0]) for r in ps(env)] == [b.proc.pid]
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        assert ps(env) == []
        assert os.listdir(tmp_path / "servers") == []
    finally:
        for s in (a, b):
            if s.proc.poll() is None:
                stop(s)
