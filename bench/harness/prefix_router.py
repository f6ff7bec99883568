"""TEST DOUBLE of a prefix-aware endpoint picker, for the routing simulation (routing_sim.py) only:
not a product router, not part of rapid-mlx. It picks a replica the way llm-d's inference
scheduler does with its precise-prefix-cache profile (EPP config epp-precise-prefix-cache-config:
precise-prefix-cache-scorer weight 2, kv-cache-utilization-scorer 1, queue-scorer 1,
max-score-picker), fed only by what a replica publishes to such a router:

* precise prefix-cache score: the replica's KV-cache events (ZMQ SUB, vLLM's wire format, replayed
  over the ROUTER socket after a sequence gap) give the set of block hashes each replica holds; the
  request's own block hashes (the same FNV-1a chain, kv_blocks.py) are matched from the first
  block on, and the score is the longest run held / the request's blocks (llm-d-kv-cache's
  LongestPrefixScorer, normalised as the scorer does);
* kv-cache-utilization score: 1 - vllm:kv_cache_usage_perc;
* queue score: (max - waiting) / (max - min) over the replicas of vllm:num_requests_waiting, 1 when
  all are equal;
* the weighted sum, highest wins, ties broken at random.

Simplifications (none changes what is scored): metrics are scraped at each decision instead of
every 50 ms in the background; the request's tokens come from a replica's vLLM-style render endpoint
(/v1/chat/completions/render), as llm-d's token producer gets them; one model, no LoRA, one medium."""
import json
import random
import threading
import urllib.request

import msgpack
import zmq
from prometheus_client.parser import text_string_to_metric_families

from .kv_blocks import as_map, block_hashes

WEIGHTS = {"prefix": 2.0, "kv_util": 1.0, "queue": 1.0}


class ReplicaIndex:
    """One replica's cached blocks, from its event stream (a thread per replica)."""

    def __init__(self, ctx, pub_port, replay_port):
        self.blocks, self.lock, self.next_seq, self.gaps = set(), threading.Lock(), 0, 0
        self.ctx, self.replay_port, self.stopping = ctx, replay_port, False
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.sub.connect(f"tcp://127.0.0.1:{pub_port}")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            if not self.sub.poll(100):
                continue
            _, seq, payload = self.sub.recv_multipart()
            seq = int.from_bytes(seq, "big")
            if seq > self.next_seq:  # missed batches (or joined late): the replay socket has them
                self.gaps += 1
                for _, s, p in self._replay(self.next_seq):
                    if self.next_seq <= s < seq:
                        self._apply(s, p)
            if seq >= self.next_seq:
                self._apply(seq, payload)
        self.sub.close(linger=0)

    def _replay(self, start):
        s = self.ctx.socket(zmq.DEALER)
        s.connect(f"tcp://127.0.0.1:{self.replay_port}")
        s.send_multipart([b"", start.to_bytes(8, "big")])
        out = []
        while s.poll(5000):
            _, topic, seq, payload = s.recv_multipart()
            if int.from_bytes(seq, "big", signed=True) == -1:
                break
            out.append((topic, int.from_bytes(seq, "big"), payload))
        s.close(linger=0)
        return out

    def _apply(self, seq, payload):
        _, events, _ = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        with self.lock:
            self.next_seq = seq + 1
            for ev in events:
                ev = as_map(ev, arrays=True)
                if ev["type"] == "BlockStored":
                    self.blocks.update(ev["block_hashes"])
                elif ev["type"] == "BlockRemoved":
                    self.blocks.difference_update(ev["block_hashes"])
                else:
                    self.blocks.clear()

    def longest_run(self, hashes):
        """Blocks of `hashes` held from the first on (a chain: a later block implies its parents)."""
        with self.lock:
            n = 0
            for h in hashes:
                if h not in self.blocks:
                    break
                n += 1
            return n

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)


def scrape(base_url):
    """vllm:num_requests_waiting and vllm:kv_cache_usage_perc from a replica's /metrics."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    got = {}
    for fam in text_string_to_metric_families(text):
        if fam.name in ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
            got[fam.name] = fam.samples[0].value
    return got["vllm:num_requests_waiting"], got["vllm:kv_cache_usage_perc"]


class RenderTokenizer:
    """The prompt a replica builds from a chat request, as token ids, asked of a replica's
    /v1/chat/completions/render as llm-d's token producer asks vLLM's (any replica: one model)."""

    def __init__(self, base_url, model_name):
        self.url, self.model = base_url + "/v1/chat/completions/render", model_name

    def __call__(self, messages):
        body = json.dumps({"model": self.model, "messages": messages}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["token_ids"]


class PrefixAwareRouter:
    """Picks among `replicas` (objects with .base_url and .index: ReplicaIndex) by llm-d's scoring."""

    name = "prefix-aware"

    def __init__(self, replicas, tokenize, block_size, seed=0):
        self.replicas, self.tokenize, self.block_size = replicas, tokenize, block_size
        self.rng = random.Random(seed)

    def scores(self, tokens):
        keys = block_hashes(tokens, self.block_size)
        loads = [scrape(r.base_url) for r in self.replicas]
        qmin, qmax = min(q for q, _ in loads), max(q for q, _ in loads)
        out = []
        for r, (waiting, usage) in zip(self.replicas, loads):
            prefix = r.index.longest_run(keys) / len(keys) if keys else 0.0
            queue = 1.0 if qmax == qmin else (qmax - waiting) / (qmax - qmin)
            parts = {"prefix": prefix, "kv_util": 1.0 - usage, "queue": queue}
            out.append({"total": sum(WEIGHTS[k] * v for k, v in parts.items()), **parts})
        return out

    def pick(self, messages):
        """(replica index, what the decision saw: scores, the request's tokens)."""
        tokens = self.tokenize(messages)
        scored = self.scores(tokens)
        order = list(range(len(self.replicas)))
        self.rng.shuffle(order)  # max-score-picker: random among equal scores
        best = max(order, key=lambda i: scored[i]["total"])
        return best, {"scores": scored, "tokens": tokens}


class RoundRobinRouter:
    """The baseline: replicas in turn, whatever the request (a Service without a gateway)."""

    name = "round-robin"

    def __init__(self, replicas):
        self.n, self.next, self.lock = len(replicas), 0, threading.Lock()

    def pick(self, messages):
        with self.lock:
            i, self.next = self.next, (self.next + 1) % self.n
        return i, {}
