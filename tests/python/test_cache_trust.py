"""The snapshot store against a hostile disk, through the real server (issue #15): a cache
directory owned by someone else or writable by others, a second server on the same directory, a
snapshot planted from another install (valid format, other key) and encryption at rest. In every
case the server starts and serves; persistence is only switched off, with one clear warning."""
import glob
import json
import os
import struct
import time
import uuid

from conftest import launch, need_server, stop
from test_cache import SYSTEM, ask, cache_info


def _system():
    return f"Session {uuid.uuid4().hex}. " + SYSTEM


def _kvs(d):
    return sorted(glob.glob(os.path.join(d, "*", "*.kvs")))


def _wait_written(srv, n=1):
    deadline = time.time() + 60
    while time.time() < deadline:
        d = cache_info(srv)["disk"]
        if d["writes"] >= n and d["pending_writes"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"no snapshot written: {cache_info(srv)['disk']}")


def _serve(tmp_path, name, kv, key, extra=()):
    return launch(["--cache-dir", kv, "--cache-key-file", key] + list(extra), str(tmp_path / f"{name}.log"))


def _model_dir(kv):
    dirs = [d for d in glob.glob(os.path.join(kv, "*")) if os.path.isdir(d)]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _assert_serves_without_persistence(srv, needle):
    text, usage = ask(srv, "Which tool reads a file?", _system())
    assert usage["completion_tokens"] > 0
    disk = cache_info(srv)["disk"]
    assert disk["enabled"] is False
    assert needle in disk["disabled_reason"], disk
    log = srv.log()
    assert log.count("kv snapshots disabled") == 1, log
    assert needle in log


def test_untrusted_cache_dir_disables_persistence_and_the_server_serves(tmp_path):
    need_server()
    kv, key = str(tmp_path / "kv"), str(tmp_path / "kv.key")
    a = _serve(tmp_path, "a", kv, key)  # creates the model's directory, 0700
    stop(a)
    mdir = _model_dir(kv)
    os.chmod(mdir, 0o777)
    b = _serve(tmp_path, "b", kv, key)
    try:
        _assert_serves_without_persistence(b, "writable by group or others")
        assert not _kvs(kv)
    finally:
        stop(b)
    os.chmod(mdir, 0o700)
    if os.geteuid() == 0:  # a directory that belongs to another user (nobody)
        os.chown(mdir, 65534, 65534)
        c = _serve(tmp_path, "c", kv, key)
        try:
            _assert_serves_without_persistence(c, "owned by uid 65534")
        finally:
            stop(c)
        os.chown(mdir, 0, 0)
    # A cache directory that cannot even be created (a file is in the way).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    e = _serve(tmp_path, "e", str(blocker / "kv"), key)
    try:
        _assert_serves_without_persistence(e, "cannot create cache directory")
    finally:
        stop(e)
    # A key file others can read is refused the same way.
    os.chmod(key, 0o644)
    d = _serve(tmp_path, "d", kv, key)
    try:
        _assert_serves_without_persistence(d, "key file is accessible to group/others")
    finally:
        stop(d)


def test_second_server_on_the_same_cache_dir_runs_without_persistence(tmp_path):
    need_server()
    kv, key = str(tmp_path / "kv"), str(tmp_path / "kv.key")
    a = _serve(tmp_path, "a", kv, key)
    try:
        b = _serve(tmp_path, "b", kv, key)
        try:
            _assert_serves_without_persistence(b, "in use by another rapid-mlx server")
            ask(a, "Which tool reads a file?", _system())
            _wait_written(a)  # the first keeps persisting
        finally:
            stop(b)
    finally:
        stop(a)


def test_snapshot_planted_from_another_install_is_refused(tmp_path):
    need_server()
    system = _system()
    kv_a, kv_b = str(tmp_path / "kva"), str(tmp_path / "kvb")
    a = _serve(tmp_path, "a", kv_a, str(tmp_path / "a.key"))
    try:
        cold_text, _ = ask(a, "How do I run the tests?", system)
        _wait_written(a)
    finally:
        stop(a)
    b = _serve(tmp_path, "b", kv_b, str(tmp_path / "b.key"))  # another key: another install
    stop(b)
    planted = _kvs(kv_a)
    assert planted
    dst = _model_dir(kv_b)  # same model: same directory name
    assert os.path.basename(dst) == os.path.basename(os.path.dirname(planted[0]))
    for f in planted:
        with open(f, "rb") as src, open(os.path.join(dst, os.path.basename(f)), "wb") as out:
            out.write(src.read())
        os.chmod(os.path.join(dst, os.path.basename(f)), 0o600)
    c = _serve(tmp_path, "c", kv_b, str(tmp_path / "b.key"))
    try:
        text, usage = ask(c, "How do I run the tests?", system)
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
        assert text == cold_text
        disk = cache_info(c)["disk"]
        assert disk["corrupt_skipped"] >= 1 and disk["restored_entries"] == 0
        assert "authentication failed" in c.log()
    finally:
        stop(c)


def test_encrypted_snapshots_hold_no_prompt_tokens_and_still_restore(tmp_path):
    need_server()
    system = _system()
    files = {}
    for mode in ("plain", "encrypted"):
        kv = str(tmp_path / mode)
        extra = ["--encrypt-cache"] if mode == "encrypted" else []
        s = _serve(tmp_path, mode, kv, str(tmp_path / f"{mode}.key"), extra)
        try:
            ask(s, "Which tool writes a file?", system)
            _wait_written(s)
        finally:
            stop(s)
        f = max(_kvs(kv), key=os.path.getsize)  # the same prompt's entry in both modes
        with open(f, "rb") as fh:
            files[mode] = fh.read()
    plain = files["plain"]
    # The plain file holds the prompt's token ids right after the 88-byte header.
    n_tokens = struct.unpack_from("<Q", plain, 32)[0]
    assert n_tokens > 100
    token_bytes = plain[88:88 + 4 * n_tokens]
    assert token_bytes in plain
    enc = files["encrypted"]
    assert len(enc) == len(plain)
    for i in range(0, len(token_bytes) - 64, 64):  # no 16-token run of the prompt survives
        assert token_bytes[i:i + 64] not in enc
    assert plain[-4096:-16] not in enc  # nor the KV pages
    # And the encrypted store restores: a new server hits the system prompt from disk.
    s = _serve(tmp_path, "enc2", str(tmp_path / "encrypted"), str(tmp_path / "encrypted.key"), ["--encrypt-cache"])
    try:
        _, usage = ask(s, "How do I run the tests?", system)
        assert usage["prompt_tokens_details"]["cached_tokens"] >= 100
        assert cache_info(s)["disk"]["restored_entries"] >= 1
    finally:
        stop(s)
