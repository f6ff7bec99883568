"""The routing simulation (bench/harness/routing_sim.py) at its smallest: 2 replicas, 2 agent
sessions of 2 turns, run one after another so round-robin's placement is fixed (turn 2 of each
session lands on the other replica). Behaviour, not timing:

* the prefix-aware router (a test double of llm-d's endpoint picker, fed by the replicas' KV events)
  tokenizes each request exactly as the replica that served it did: its ids have the length of the
  replica's usage.prompt_tokens and their full blocks are a prefix the replica's own cache listing
  (/v1/cache?sequences=1) holds;
* from the events alone it sees turn 1's blocks on the replica that served turn 1, sends turn 2
  there, and that turn finds turn 1's whole prompt in the cache;
* so its cache hits (usage cached_tokens) exceed round-robin's on the same workload."""
import os
import sys

import pytest

from conftest import MODEL, ROOT, need_server

sys.path.insert(0, os.path.join(ROOT, "bench"))
from harness import routing_sim  # noqa: E402

BLOCK = routing_sim.BLOCK
P = {"replicas": 2, "sessions": 2, "turns": 2, "system_words": 300, "gen_tokens": 4,
     "server_args": ["--kv-cache-memory", "64MiB"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    need_server()
    listings = {}

    def keep(replicas, records):
        listings["sequences"] = [r.cache(sequences=True)["prefix_cache"]["sequences"] for r in replicas]

    d = str(tmp_path_factory.mktemp("routing"))
    prefix = routing_sim.run_policy("prefix-aware", P, model=MODEL, log_dir=d, sequential=True, keep=keep)
    rr = routing_sim.run_policy("round-robin", P, model=MODEL, log_dir=d, sequential=True)
    return prefix, rr, listings["sequences"]


def by_turn(run):
    return {(r["session"], r["turn"]): r for r in run["requests"]}


def test_router_tokens_are_the_replicas_prompt(runs):
    prefix, _, sequences = runs
    assert len(prefix["requests"]) == P["sessions"] * P["turns"]
    for r in prefix["requests"]:
        toks = r["router_tokens"]
        assert len(toks) == r["prompt_tokens"], (r["session"], r["turn"])
        full = tuple(toks[:len(toks) // BLOCK * BLOCK])
        assert full and any(tuple(s[:len(full)]) == full for s in sequences[r["replica"]]), \
            f"session {r['session']} turn {r['turn']}: the router's blocks are not what replica {r['replica']} cached"


def test_later_turns_follow_their_prefix(runs):
    prefix, _, _ = runs
    turns = by_turn(prefix)
    for s in range(P["sessions"]):
        first, second = turns[(s, 1)], turns[(s, 2)]
        assert second["replica"] == first["replica"]
        held = first["prompt_tokens"] // BLOCK * BLOCK
        # The router saw turn 1's blocks there (events), and the replica reused them.
        n_blocks = second["prompt_tokens"] // BLOCK
        assert second["scores"][second["replica"]]["prefix"] >= (held // BLOCK) / n_blocks
        assert second["cached_tokens"] >= held
    assert prefix["event_gaps"] == [0, 0]


def test_prefix_aware_hits_more_than_round_robin(runs):
    prefix, rr, _ = runs
    rr_turns = by_turn(rr)
    for s in range(P["sessions"]):  # round-robin moved every session's turn 2 to the other replica
        assert rr_turns[(s, 2)]["replica"] != rr_turns[(s, 1)]["replica"]
    hits = lambda run: sum(r["cached_tokens"] for r in run["requests"])  # noqa: E731
    assert hits(prefix) > hits(rr)
    summary = routing_sim.summarize(prefix)
    assert summary["later_turns_same_replica"] == 1.0
    assert summary["hit_rate_usage"] == pytest.approx(summary["hit_rate_cache"])
