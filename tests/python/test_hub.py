"""Models by name: `rapid-mlx pull` / `ls` / `rm` and `serve --model org/name` against a local
server speaking the hub's API (fake_hub.py), with huggingface_hub as the reference both ways:
its snapshot_download must work against the fake hub (so the fake is faithful), a model it
downloaded must serve offline here, and a model pulled here must be what huggingface_hub's own
download writes (same blobs, links and refs), listed by scan_cache_dir and loaded by
transformers with local_files_only. Plus: an interrupted download resumes, a corrupt one is
refused, gated/missing repos and offline mode say what to do."""
import json
import os
import resource
import signal
import subprocess

import pytest

from conftest import BIN, MODEL, TINY_CHAT as TINY, launch, need_server, stop, tiny_chat_model
from fake_hub import FakeHub

huggingface_hub = pytest.importorskip("huggingface_hub")

GGUF_REPO, ST_REPO = "test-org/SmolLM2-135M-Instruct-GGUF", "test-org/tiny-qwen3-chat"


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def hub():
    if not os.path.exists(MODEL):
        pytest.skip(f"model file absent: {MODEL} (run scripts/fetch_models.sh)")
    tiny_chat_model()
    h = FakeHub()
    gguf = read(MODEL)
    h.add(GGUF_REPO, {"SmolLM2-135M-Instruct-Q4_1.gguf": gguf, "SmolLM2-135M-Instruct-IQ2_XS.gguf": b"GGUF" + b"\0" * 60,
                      "README.md": b"# SmolLM2 GGUF\n", ".gitattributes": b"*.gguf filter=lfs\n"})
    files = {n: read(os.path.join(TINY, n)) for n in os.listdir(TINY)}
    files.update({"README.md": b"# tiny\n", "onnx/model.onnx": b"not needed", "pytorch_model.bin": b"not needed either"})
    h.add(ST_REPO, files)
    h.add("test-org/gated-model", {"config.json": b"{}", "model.safetensors": b"x" * 100})
    h.gated.add("test-org/gated-model")
    yield h
    h.close()


def env_for(hub, cache, **extra):
    e = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(cache), "HF_HUB_DISABLE_TELEMETRY": "1"}
    for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME"):
        e.pop(k, None)
    e.update(extra)
    return e


def pull(hub, cache, name, **extra):
    return subprocess.run([BIN, "pull", name], capture_output=True, text=True, timeout=600, env=env_for(hub, cache, **extra))


def tree(cache):
    """Everything under a cache folder: files with their bytes' length, links with their targets."""
    out = {}
    for root, dirs, files in os.walk(cache):
        for n in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, cache)
            # Locks and huggingface_hub's own listing cache (trees/) are not part of the layout.
            if rel.startswith(".locks") or "/trees/" in rel:
                continue
            out[rel] = ("link", os.readlink(p)) if os.path.islink(p) else ("file", None if rel == "CACHEDIR.TAG" else os.path.getsize(p))
    return out


def test_huggingface_hub_downloads_from_the_fake_hub(hub, tmp_path):
    path = huggingface_hub.snapshot_download(GGUF_REPO, cache_dir=tmp_path, endpoint=hub.url)
    assert read(os.path.join(path, "SmolLM2-135M-Instruct-Q4_1.gguf")) == read(MODEL)
    assert sorted(os.listdir(path)) == sorted(hub.repos[GGUF_REPO].files)


@pytest.mark.parametrize("repo", [ST_REPO, GGUF_REPO])
def test_pull_writes_what_huggingface_hub_writes(hub, tmp_path, repo):
    r = pull(hub, tmp_path / "ours", repo)
    assert r.returncode == 0, r.stderr
    ours = tree(tmp_path / "ours")
    wanted = sorted({rel.split("/snapshots/")[1].split("/", 1)[1] for rel in ours if "/snapshots/" in rel})
    huggingface_hub.snapshot_download(repo, cache_dir=tmp_path / "theirs", endpoint=hub.url, allow_patterns=wanted)
    assert ours == tree(tmp_path / "theirs")
    # Only what a model needs: no README, ONNX copy or .bin weights; the other GGUF quantization skipped.
    assert not any(w in ("README.md", "pytorch_model.bin", "SmolLM2-135M-Instruct-IQ2_XS.gguf") or w.startswith("onnx/") for w in wanted)
    info = huggingface_hub.scan_cache_dir(tmp_path / "ours")
    (entry,) = [x for x in info.repos if x.repo_id == repo]
    assert {f.file_name for rev in entry.revisions for f in rev.files} == {os.path.basename(w) for w in wanted}
    assert r.stdout.strip().startswith(str(tmp_path / "ours"))


def test_pulled_model_loads_in_transformers(hub, tmp_path):
    transformers = pytest.importorskip("transformers")
    assert pull(hub, tmp_path, ST_REPO).returncode == 0
    tok = transformers.AutoTokenizer.from_pretrained(ST_REPO, cache_dir=tmp_path, local_files_only=True)
    ref = transformers.AutoTokenizer.from_pretrained(TINY)
    text = "def add(a, b):\n    return a + b  # héllo"
    assert tok(text)["input_ids"] == ref(text)["input_ids"]
    assert transformers.AutoConfig.from_pretrained(ST_REPO, cache_dir=tmp_path, local_files_only=True).model_type == "qwen3"


ASK = {"max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def answer(srv, model):
    status, body = srv.post("/v1/chat/completions", {"model": model, **ASK})
    assert status == 200, body
    return json.loads(body)["choices"][0]["message"]["content"]


def test_model_downloaded_by_huggingface_hub_serves_offline(hub, tmp_path, server):
    huggingface_hub.snapshot_download(GGUF_REPO, cache_dir=tmp_path / "hf", endpoint=hub.url)
    before = len(hub.requests)
    srv = launch([], str(tmp_path / "serve.log"), model=GGUF_REPO + ":Q4_1", name=None,
                 env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": hub.url})
    try:
        status, body = srv.get("/v1/models", headers={"Authorization": "Bearer test-key-123"})
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]][0] == GGUF_REPO + ":Q4_1"
        # The same weights as the session's server loads by path: the same greedy answer.
        assert answer(srv, GGUF_REPO + ":Q4_1") == answer(server, "smollm2")
    finally:
        stop(srv)
    assert len(hub.requests) == before  # offline: not one request


def test_serve_pulls_a_missing_model_by_name(hub, tmp_path, server):
    srv = launch([], str(tmp_path / "serve.log"), model=GGUF_REPO, name=None,
                 env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url})
    try:
        assert answer(srv, GGUF_REPO) == answer(server, "smollm2")
    finally:
        stop(srv)
    assert [r.repo_id for r in huggingface_hub.scan_cache_dir(tmp_path / "hf").repos] == [GGUF_REPO]


def test_serve_hf_cache_loads_a_cached_repo_on_its_first_request(hub, tmp_path, server):
    """`serve --hf-cache`: every model huggingface_hub put in the cache, by its repo id, loaded on demand."""
    huggingface_hub.snapshot_download(GGUF_REPO, cache_dir=tmp_path / "hf", endpoint=hub.url)
    srv = launch(["--hf-cache"], str(tmp_path / "serve.log"), model=None, name=None,
                 env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    try:
        auth = {"Authorization": "Bearer test-key-123"}
        listed = json.loads(srv.get("/v1/models", headers=auth)[1])["data"]
        assert [(m["id"], m["state"]) for m in listed] == [(GGUF_REPO, "not-loaded")]
        assert answer(srv, GGUF_REPO) == answer(server, "smollm2")
        listed = json.loads(srv.get("/v1/models", headers=auth)[1])["data"]
        assert [(m["id"], m["state"]) for m in listed] == [(GGUF_REPO, "loaded")]
    finally:
        stop(srv)


def test_cut_connection_resumes(hub, tmp_path):
    name = "SmolLM2-135M-Instruct-Q4_1.gguf"
    size = len(hub.repos[GGUF_REPO].files[name])
    # A third arrives, then the link is dead (every retry cut before a byte): the pull gives up,
    # keeping what arrived.
    hub.cuts[name] = [size // 3] + [0] * 20
    r = pull(hub, tmp_path, GGUF_REPO + ":Q4_1")
    hub.cuts[name] = []
    assert r.returncode != 0, r.stderr
    parts = [os.path.join(root, f) for root, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".incomplete")]
    assert len(parts) == 1 and os.path.getsize(parts[0]) == size // 3
    assert not os.path.exists(parts[0][:-len(".incomplete")])
    # The next pull asks for the rest; cut twice more, it resumes each time and completes.
    hub.ranges.clear()
    hub.cuts[name] = [size // 4, size // 4]
    r = pull(hub, tmp_path, GGUF_REPO + ":Q4_1")
    assert r.returncode == 0, r.stderr
    assert hub.ranges == [(name, f"bytes={size // 3}-"), (name, f"bytes={size // 3 + size // 4}-"),
                          (name, f"bytes={size // 3 + 2 * (size // 4)}-")]
    assert read(r.stdout.strip()) == read(MODEL)
    assert not any(f.endswith(".incomplete") for _, _, fs in os.walk(tmp_path) for f in fs)


def test_full_disk_keeps_nothing_as_complete(hub, tmp_path):
    """A write that fails (here: a file-size limit, as a full disk would) stops the pull with the
    cause; nothing gets a final name or a snapshot link; the next pull resumes."""
    name, limit = "SmolLM2-135M-Instruct-Q4_1.gguf", 10 << 20

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG instead

    r = subprocess.run([BIN, "pull", GGUF_REPO], capture_output=True, text=True, timeout=600,
                       env=env_for(hub, tmp_path), preexec_fn=small_disk)
    assert r.returncode != 0 and "write failed" in r.stderr and "File too large" in r.stderr, r.stderr
    repo = os.path.join(tmp_path, "models--test-org--SmolLM2-135M-Instruct-GGUF")
    assert [f for f in os.listdir(os.path.join(repo, "blobs")) if not f.endswith(".incomplete")] == []
    assert not os.path.exists(os.path.join(repo, "snapshots")) or not any(fs for _, _, fs in os.walk(os.path.join(repo, "snapshots")))
    hub.ranges.clear()
    r = pull(hub, tmp_path, GGUF_REPO)
    assert r.returncode == 0, r.stderr
    assert hub.ranges == [(name, f"bytes={limit}-")] and read(r.stdout.strip()) == read(MODEL)


def test_corrupt_download_is_refused(hub, tmp_path):
    name = "SmolLM2-135M-Instruct-Q4_1.gguf"
    hub.corrupt.add(name)
    try:
        r = pull(hub, tmp_path, GGUF_REPO)
    finally:
        hub.corrupt.discard(name)
    assert r.returncode != 0 and "corrupt download" in r.stderr and "sha256" in r.stderr
    blobs = os.path.join(tmp_path, "models--test-org--SmolLM2-135M-Instruct-GGUF", "blobs")
    assert [f for f in os.listdir(blobs) if len(f) == 64] == []  # nothing with a final name
    assert huggingface_hub.scan_cache_dir(tmp_path).repos == frozenset() or all(
        not rev.files for x in huggingface_hub.scan_cache_dir(tmp_path).repos for rev in x.revisions)


def test_refusals_say_what_to_do(hub, tmp_path):
    r = pull(hub, tmp_path, "test-org/gated-model")
    assert r.returncode != 0 and "gated" in r.stderr and "HF_TOKEN" in r.stderr
    assert pull(hub, tmp_path, "test-org/gated-model", HF_TOKEN=hub.token).returncode == 0
    r = pull(hub, tmp_path, "test-org/no-such-model")
    assert r.returncode != 0 and "test-org/no-such-model" in r.stderr
    r = pull(hub, tmp_path, GGUF_REPO + "@no-such-branch")
    assert r.returncode != 0 and "revision" in r.stderr
    r = pull(hub, tmp_path, GGUF_REPO + ":Q5_K_M")
    assert r.returncode != 0 and "Q4_1" in r.stderr and "IQ2_XS" in r.stderr
    r = subprocess.run([BIN, "run", "--model", "test-org/not-cached", "hi"], capture_output=True, text=True, timeout=60,
                       env=env_for(hub, tmp_path, HF_HUB_OFFLINE="1"))
    assert r.returncode != 0 and "HF_HUB_OFFLINE" in r.stderr
    r = pull(hub, tmp_path, GGUF_REPO, HF_ENDPOINT="http://127.0.0.1:9")
    assert r.returncode != 0 and "127.0.0.1:9" in r.stderr


def test_ls_and_rm(hub, tmp_path):
    assert pull(hub, tmp_path, GGUF_REPO).returncode == 0
    huggingface_hub.snapshot_download(ST_REPO, cache_dir=tmp_path, endpoint=hub.url)
    env = env_for(hub, tmp_path)
    out = subprocess.run([BIN, "ls"], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows[GGUF_REPO][1:4] == ["main", "gguf", "Q4_1"]
    assert rows[ST_REPO][1:3] == ["main", "safetensors"]
    hf_sizes = {x.repo_id: x.size_on_disk for x in huggingface_hub.scan_cache_dir(tmp_path).repos}
    assert set(rows) == set(hf_sizes)
    r = subprocess.run([BIN, "rm", GGUF_REPO], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and "removed" in r.stdout
    assert [x.repo_id for x in huggingface_hub.scan_cache_dir(tmp_path).repos] == [ST_REPO]
    assert subprocess.run([BIN, "rm", GGUF_REPO], capture_output=True, text=True, timeout=60, env=env).returncode == 1
