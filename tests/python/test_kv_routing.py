"""What prefix-aware routers (llm-d / Gateway API Inference Extension endpoint pickers, Dynamo) read
from a replica: vLLM-named Prometheus series, and KV-cache events over ZeroMQ in vLLM's wire format.

References: prometheus_client's text parser for /metrics; for the events an independent subscriber
(pyzmq + msgpack) that rebuilds the set of cached block-aligned prefixes from the stream alone and
compares it with the server's own listing (/v1/cache?sequences=1), recomputing every block hash
from the documented FNV-1a chain (bench/harness/kv_blocks.py, shared with the routing simulation);
and, when the vLLM 0.33.0 wheel is at hand, vLLM's own event
classes (vllm/distributed/kv_events.py read from the wheel, its four vllm-internal imports stubbed)
decoding every payload."""
import glob
import http.client
import json
import os
import socket
import sys
import threading
import time
import types
import zipfile

import msgpack
import pytest
import zmq
from prometheus_client.parser import text_string_to_metric_families

from conftest import API_KEY, MODEL_NAME, ROOT, own_server, stop

sys.path.insert(0, os.path.join(ROOT, "bench"))
from harness.kv_blocks import as_map, fnv_block_hash  # noqa: E402  (the chain a router computes too)

VLLM_WHEEL = os.environ.get("RAPID_VLLM_WHEEL") or next(
    iter(sorted(glob.glob(os.path.expanduser("~/.cache/rapid-mlx/wheels/vllm-0.33.0-*.whl")))), None)
BLOCK = 16  # the server's default --block size


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(srv):
    status, body = srv.get("/metrics")
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def value(fams, name):
    """The one sample called `name` (a counter's family drops `_total`, its sample keeps it)."""
    fam = fams.get(name) or fams[name.removesuffix("_total")]
    (s,) = [s for s in fam.samples if s.name == name]
    return s.value


def cache_view(srv, sequences=False):
    status, body = srv.get("/v1/cache" + ("?sequences=1" if sequences else ""),
                           {"Authorization": f"Bearer {API_KEY}"})
    assert status == 200, body
    return json.loads(body)


def open_stream(srv, max_tokens=1500):
    """A streaming completion held open; returns the connection once the server answered."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    body = {"model": MODEL_NAME, "prompt": "Count slowly:", "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "temperature": 0}
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    return conn


def wait_for(pred, timeout=60, what=""):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last is True:
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}: last {last}")


# --- metrics ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def msrv(tmp_path_factory):
    srv = own_server(tmp_path_factory, "metrics", ["--max-num-seqs", "2", "--no-persist-cache"])
    yield srv
    stop(srv)


def test_vllm_series_have_vllm_names_types_and_labels(msrv):
    fams = metrics(msrv)
    for name, kind in [("vllm:num_requests_waiting", "gauge"), ("vllm:num_requests_running", "gauge"),
                       ("vllm:kv_cache_usage_perc", "gauge"), ("vllm:gpu_cache_usage_perc", "gauge"),
                       ("vllm:cache_config_info", "gauge"), ("vllm:num_preemptions", "counter"),
                       ("vllm:prompt_tokens", "counter"), ("vllm:generation_tokens", "counter"),
                       ("vllm:prefix_cache_queries", "counter"), ("vllm:prefix_cache_hits", "counter")]:
        assert name in fams, name
        assert fams[name].type == kind, (name, fams[name].type)
        for s in fams[name].samples:
            assert s.labels["model_name"] == MODEL_NAME and s.labels["engine"] == "0"
    (info,) = fams["vllm:cache_config_info"].samples
    pool = cache_view(msrv)["kv_pool"]
    assert info.value == 1
    assert int(info.labels["block_size"]) == pool["block_size"] == BLOCK
    assert int(info.labels["num_gpu_blocks"]) == pool["total_blocks"]
    assert info.labels["enable_prefix_caching"] == "True"


def test_waiting_and_running_follow_streams_and_kv_usage_matches_cache(msrv):
    fams = metrics(msrv)
    assert value(fams, "vllm:num_requests_running") == 0 and value(fams, "vllm:num_requests_waiting") == 0
    prompt0 = value(fams, "vllm:prompt_tokens_total")
    conns = [open_stream(msrv)]
    conns[0].getresponse().read1(1)  # headers and the first event: the engine runs it
    wait_for(lambda: (value(metrics(msrv), "vllm:num_requests_running"),
                      value(metrics(msrv), "vllm:num_requests_waiting")) == (1, 0) or "1 running", what="1/0")
    conns += [open_stream(msrv), open_stream(msrv)]  # --max-num-seqs 2: the third waits

    def both():
        f = metrics(msrv)
        got = (value(f, "vllm:num_requests_running"), value(f, "vllm:num_requests_waiting"))
        return got == (2, 1) or got
    wait_for(both, what="2 running, 1 waiting")
    for c in conns:
        c.close()  # disconnects cancel their generations

    def idle():
        f = metrics(msrv)
        got = (value(f, "vllm:num_requests_running"), value(f, "vllm:num_requests_waiting"))
        return got == (0, 0) or got
    wait_for(idle, what="0 running, 0 waiting")
    # Token counters move by what a finished request reports in its usage.
    gen0 = value(metrics(msrv), "vllm:generation_tokens_total")
    status, body = msrv.post("/v1/completions", {"model": MODEL_NAME, "prompt": "Hello there", "max_tokens": 5,
                                                 "temperature": 0})
    assert status == 200
    usage = json.loads(body)["usage"]
    fams = metrics(msrv)
    assert value(fams, "vllm:prompt_tokens_total") == prompt0 + usage["prompt_tokens"]
    assert value(fams, "vllm:generation_tokens_total") == gen0 + usage["completion_tokens"]
    # Idle: the prefix cache keeps the prompts' blocks, and both views read the same pool.
    pool = cache_view(msrv)["kv_pool"]
    fams = metrics(msrv)
    assert pool["used_blocks"] > 0
    usage = value(fams, "vllm:kv_cache_usage_perc")
    assert usage == pytest.approx(pool["used_blocks"] / pool["total_blocks"])
    assert value(fams, "vllm:gpu_cache_usage_perc") == usage
    assert value(fams, "rapid_kv_cache_usage_perc") == usage


# --- KV-cache events ----------------------------------------------------------------------------

class Index:
    """A router's view: live block hash -> the full token prefix it ends, from the events alone."""

    def __init__(self, arrays=True):
        self.prefix, self.next_seq, self.cleared, self.stored, self.removed = {}, 0, 0, 0, 0
        self.arrays = arrays

    def apply(self, seq, payload):
        assert seq == self.next_seq, f"sequence gap: got {seq}, expected {self.next_seq}"
        self.next_seq = seq + 1
        batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        assert isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float), batch
        ts, events, dp_rank = batch
        assert dp_rank == 0 and abs(ts - time.time()) < 600
        for ev in events:
            ev = as_map(ev, self.arrays)
            kind = ev["type"]
            if kind == "AllBlocksCleared":
                self.prefix.clear()
                self.cleared += 1
            elif kind == "BlockRemoved":
                assert ev["medium"] == "GPU"
                for h in ev["block_hashes"]:
                    assert self.prefix.pop(h, None) is not None, f"removed unknown block {h}"
                    self.removed += 1
            else:
                assert kind == "BlockStored", ev
                assert ev["medium"] == "GPU" and ev["block_size"] == BLOCK and ev["lora_id"] is None and ev["lora_name"] is None
                assert len(ev["token_ids"]) == BLOCK * len(ev["block_hashes"])
                parent = ev["parent_block_hash"]
                p = () if parent is None else self.prefix[parent]
                for i, h in enumerate(ev["block_hashes"]):
                    toks = ev["token_ids"][i * BLOCK:(i + 1) * BLOCK]
                    assert h == fnv_block_hash(parent, toks), "block hash is not the documented chain"
                    p = p + tuple(toks)
                    assert h not in self.prefix, "block stored twice"
                    self.prefix[h] = p
                    parent = h
                    self.stored += 1

    def prefixes(self):
        return set(self.prefix.values())


def server_prefixes(srv):
    seqs = cache_view(srv, sequences=True)["prefix_cache"]["sequences"]
    return {tuple(s[:k]) for s in seqs for k in range(BLOCK, len(s) + 1, BLOCK)}


class Subscriber:
    def __init__(self, ctx, port, topic=b""):
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, topic)
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.frames = []

    def drain(self, index, settle=0.3):
        """Applies everything received until the stream has been quiet for `settle` seconds."""
        while self.sock.poll(int(settle * 1000)):
            topic, seq, payload = self.sock.recv_multipart()
            self.frames.append((topic, seq, payload))
            index.apply(int.from_bytes(seq, "big"), payload)

    def close(self):
        self.sock.close(linger=0)


def replay(ctx, port, start):
    """vLLM's replay protocol: DEALER sends ("", start seq); gets (topic, seq, payload)... then seq -1."""
    s = ctx.socket(zmq.DEALER)
    s.connect(f"tcp://127.0.0.1:{port}")
    s.send_multipart([b"", start.to_bytes(8, "big")])
    out = []
    while True:
        assert s.poll(10000), "replay did not answer"
        frames = s.recv_multipart()
        assert frames[0] == b""
        topic, seq, payload = frames[1:]
        if int.from_bytes(seq, "big", signed=True) == -1:
            break
        out.append((topic, int.from_bytes(seq, "big"), payload))
    s.close(linger=0)
    return out


@pytest.fixture(scope="module")
def esrv(tmp_path_factory):
    pub, rep = free_port(), free_port()
    # A tiny pool (~20 blocks of 16 tokens): the workload below must evict.
    srv = own_server(tmp_path_factory, "kvevents", [
        "--kv-cache-memory", "8MiB", "--no-persist-cache", "--max-num-seqs", "1",
        "--kv-events-endpoint", f"tcp://*:{pub}", "--kv-events-replay-endpoint", f"tcp://*:{rep}"])
    srv.pub_port, srv.replay_port = pub, rep
    yield srv
    stop(srv)


def complete(srv, prompt, n=8):
    status, body = srv.post("/v1/completions", {"model": MODEL_NAME, "prompt": prompt, "max_tokens": n,
                                                "temperature": 0})
    assert status == 200, body


PROMPTS = [f"Story {i}: " + " ".join(["the quick brown fox jumps over the lazy dog"] * (2 + i % 3)) + f" part {i}"
           for i in range(10)]


def test_events_rebuild_the_cache_through_evictions_purge_and_replay(esrv):
    ctx = zmq.Context()
    try:
        events_scenario(ctx, esrv)
    finally:
        ctx.destroy(linger=0)  # closes what an early failure left open


def events_scenario(ctx, esrv):
    sub = Subscriber(ctx, esrv.pub_port)
    idx = Index()
    time.sleep(0.5)  # PUB/SUB slow joiner: subscribe before the first event
    for p in PROMPTS:
        complete(esrv, p)
        complete(esrv, p + " and more")  # shares the prompt's blocks: stored as a child chain
    sub.drain(idx)
    assert idx.next_seq > 0
    topic = sub.frames[0][0].decode()
    assert topic.startswith("kv@") and topic.endswith(f":{esrv.port}@{MODEL_NAME}"), topic
    assert cache_view(esrv)["prefix_cache"]["evicted_blocks"] > 0 and idx.removed > 0
    assert idx.prefixes() == server_prefixes(esrv)

    status, _ = esrv.delete("/v1/cache")
    assert status == 200
    sub.drain(idx)
    assert idx.cleared >= 1 and idx.prefixes() == set() == server_prefixes(esrv)

    for p in PROMPTS[:3]:
        complete(esrv, p)
    sub.drain(idx)
    assert idx.prefixes() == server_prefixes(esrv) != set()

    # A subscriber that goes away misses batches; the replay socket hands them back in order.
    sub.close()
    seen = idx.next_seq
    for p in PROMPTS[3:7]:
        complete(esrv, p)
    time.sleep(0.5)
    missed = replay(ctx, esrv.replay_port, seen)
    assert missed and missed[0][1] == seen
    for topic_b, seq, payload in missed:
        assert topic_b.decode() == topic
        idx.apply(seq, payload)
    assert idx.prefixes() == server_prefixes(esrv)

    # The whole history replayed into a fresh index ends in the same state.
    fresh = Index()
    for _, seq, payload in replay(ctx, esrv.replay_port, 0):
        fresh.apply(seq, payload)
    assert fresh.prefixes() == idx.prefixes()


def test_hostile_replay_requests_are_ignored_and_replay_keeps_working(esrv):
    ctx = zmq.Context()
    try:
        bad = ctx.socket(zmq.DEALER)
        bad.connect(f"tcp://127.0.0.1:{esrv.replay_port}")
        bad.send_multipart([b"", b"\x00" * 3])           # sequence of the wrong size
        bad.send_multipart([b"", b"a", b"b", b"c"])         # too many frames
        bad.send_multipart([b"", b"\xff" * (1 << 20)])     # 1 MiB frame: over the socket's limit
        assert not bad.poll(1000), "a malformed request was answered"
        complete(esrv, PROMPTS[0])
        time.sleep(0.3)
        got = replay(ctx, esrv.replay_port, 0)
        assert got and [s for _, s, _ in got] == list(range(got[0][1], got[0][1] + len(got)))
        assert esrv.get("/health")[0] == 200
    finally:
        ctx.destroy(linger=0)


def load_vllm_kv_events():
    """vllm/distributed/kv_events.py from the vLLM wheel, unchanged, with its vllm-internal imports
    (config, logger, network utils, the ExternalBlockHash alias) stubbed: they play no part in the
    event classes."""
    with zipfile.ZipFile(VLLM_WHEEL) as z:
        src = z.read("vllm/distributed/kv_events.py").decode()
    stubs = {
        "vllm": {}, "vllm.config": {}, "vllm.config.kv_events": {"KVEventsConfig": object},
        "vllm.logger": {"init_logger": lambda name: __import__("logging").getLogger(name)},
        "vllm.utils": {}, "vllm.utils.network_utils": {
            "get_ip": None, "get_tcp_uri": None, "is_valid_ipv6_address": None, "split_zmq_path": None},
        "vllm.v1": {}, "vllm.v1.core": {}, "vllm.v1.core.kv_cache_utils": {"ExternalBlockHash": bytes | int},
        "vllm.distributed": {},
    }
    saved = {k: sys.modules.get(k) for k in stubs}
    try:
        for name, attrs in stubs.items():
            m = types.ModuleType(name)
            m.__dict__.update(attrs)
            sys.modules[name] = m
        mod = types.ModuleType("vllm.distributed.kv_events")
        exec(compile(src, "vllm/distributed/kv_events.py", "exec"), mod.__dict__)
        return mod
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@pytest.mark.skipif(VLLM_WHEEL is None, reason="vLLM 0.33.0 wheel absent: `pip download vllm==0.33.0 --no-deps "
                    "-d ~/.cache/rapid-mlx/wheels` (336 MB) to decode with vLLM's own classes")
def test_vllms_own_event_classes_decode_the_map_format(tmp_path_factory):
    import msgspec
    kv = load_vllm_kv_events()
    pub = free_port()
    srv = own_server(tmp_path_factory, "kvmap", ["--kv-cache-memory", "8MiB", "--no-persist-cache",
                                                "--kv-events-endpoint", f"tcp://*:{pub}", "--kv-events-format", "map"])
    ctx = zmq.Context()
    try:
        sub = Subscriber(ctx, pub)
        time.sleep(0.5)
        idx = Index(arrays=False)
        for p in PROMPTS[:8]:
            complete(srv, p)
        srv.delete("/v1/cache")
        complete(srv, PROMPTS[0])
        sub.drain(idx)
        assert idx.prefixes() == server_prefixes(srv)
        dec = msgspec.msgpack.Decoder(type=kv.KVEventBatch)
        kinds = set()
        for _, _, payload in sub.frames:
            batch = dec.decode(payload)
            assert batch.data_parallel_rank == 0
            raw = msgpack.unpackb(payload, raw=False)
            assert len(batch.events) == len(raw[1])
            for ev, r in zip(batch.events, raw[1]):
                kinds.add(type(ev).__name__)
                assert type(ev).__name__ == r["type"]
                if isinstance(ev, kv.BlockStored):
                    assert ev.block_hashes == r["block_hashes"] and ev.token_ids == r["token_ids"]
                    assert ev.parent_block_hash == r["parent_block_hash"] and ev.block_size == BLOCK
                    assert ev.medium == kv.MEDIUM_GPU
                elif isinstance(ev, kv.BlockRemoved):
                    assert ev.block_hashes == r["block_hashes"]
            # vLLM's own encoder gives back our bytes exactly.
            assert msgspec.msgpack.encode(batch) == payload
        assert kinds == {"BlockStored", "BlockRemoved", "AllBlocksCleared"}
        sub.close()
    finally:
        ctx.destroy(linger=0)  # closes the sockets an early failure left open, then ends
        stop(srv)


def test_bad_endpoint_is_refused_at_startup_with_its_reason(tmp_path):
    from conftest import BIN, MODEL
    import subprocess
    out = subprocess.run([BIN, "serve", "--model", MODEL, "--port", "0", "--no-persist-cache",
                          "--kv-events-endpoint", "tcp://*:notaport"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "kv events: cannot bind tcp://*:notaport" in out.stderr
