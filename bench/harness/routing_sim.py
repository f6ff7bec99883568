"""Scale-out simulation (issue 21): N `rapid-mlx serve` replicas on this machine (one compute thread
each) behind (a) a prefix-aware router fed by the replicas' KV-cache events and vLLM-named metrics
(prefix_router.py: a TEST DOUBLE of llm-d's endpoint picker) and (b) round-robin, under the
harness's agent loop (workloads.py / prompts.py: a ~2k-token coding-agent system prompt shared by
every session, then scripted tool calls and ~150-token tool results) run by many sessions at once.

Each policy gets fresh replicas (cold caches). Per request: the replica it went to, TTFT, prompt
and cached tokens (usage.prompt_tokens_details.cached_tokens); per replica the prefix cache's own
hit/query counters (/v1/cache). Sessions run concurrently, each waiting a seeded 0.2-1.0 s "tool
run" between turns (so arrivals do not march in lockstep, which would let round-robin land every
session on the same replica each turn by accident); `sequential` runs them one after another
instead (deterministic placement, for the test).

The assistant turns are sent back as text (the tool call as JSON in `content`, no `tool_calls`
field, no `tools`), as written before the replicas served vLLM's render endpoints; the router
now asks a replica's /v1/chat/completions/render for the tokens (tool rewriting included, see
docs/deploy.md), so real tool calls would route the same way.

usage (from bench/): ../.venv/bin/python -m harness.routing_sim [--bin ../build/rapid-mlx]
    [--replicas 2] [--sessions 8] [--turns 10] [--system-words 1500] [--gen-tokens 16]
    [--kv-cache-memory 512MiB] [--policies prefix-aware,round-robin] [--out DIR]"""
import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.request

import zmq

from . import client, prompts, workloads
from .prefix_router import PrefixAwareRouter, RenderTokenizer, ReplicaIndex, RoundRobinRouter
from .servers import Server, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models")),
                     "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
BLOCK = 16  # the replicas' --block size (default)
TASKS = ["The parser drops the last field of each record. Find the bug, fix it and run the tests.",
         "Add a --verbose flag to the CLI and document it in the README.",
         "The cache grows without bound. Add an LRU limit and a test for eviction.",
         "Rename the module utils to helpers everywhere and keep the tests passing.",
         "The server returns 500 on an empty body. Make it a 400 with a clear message.",
         "Port the config loader from INI to TOML and keep the old files working.",
         "Speed up the tokenizer's hot loop and show a benchmark before and after.",
         "Write tests for the date parsing helpers, including time zones."]


class Replica:
    """One `rapid-mlx serve` publishing KV events, and the router's view of them."""

    def __init__(self, rapid_bin, model, extra, log_dir, k, ctx):
        self.pub, self.replay = free_port(), free_port()
        args = ["--threads", "1", "--no-persist-cache", "--no-warm-turns",
                "--kv-events-endpoint", f"tcp://*:{self.pub}", "--kv-events-replay-endpoint", f"tcp://*:{self.replay}"]
        self.server = Server("rapid-mlx", model, rapid_bin=rapid_bin, log_dir=log_dir,
                             extra_args=args + list(extra), log_name=f"replica-{k}.log")
        self.server.start()
        self.index = ReplicaIndex(ctx, self.pub, self.replay)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.server.port}"

    def cache(self, sequences=False):
        with urllib.request.urlopen(self.base_url + "/v1/cache" + ("?sequences=1" if sequences else ""),
                                    timeout=60) as r:
            return json.loads(r.read())

    def close(self):
        self.index.close()
        self.server.stop()


def session_turns(P, s):
    """Session s's opening messages and its scripted (assistant, tool) pairs, one per turn."""
    first = [{"role": "system", "content": prompts.agent_system_prompt(P["system_words"])},
             {"role": "user", "content": TASKS[s % len(TASKS)] + f" (ticket {s + 1})"}]
    pairs = []
    for i, (name, args, result) in enumerate(prompts.agent_turns(P["turns"], seed=500 + 100 * s)):
        call = prompts.assistant_tool_message(i, name, args)
        pairs.append(({"role": "assistant", "content": call["content"]}, prompts.tool_message(i, result)))
    return first, pairs


def run_session(router, replicas, model_name, P, s, out, sequential):
    msgs, pairs = session_turns(P, s)
    rng = random.Random(1000 + s)
    for t in range(P["turns"]):
        t0 = time.perf_counter()
        k, seen = router.pick(msgs)
        decide = time.perf_counter() - t0
        r = client.chat(replicas[k].base_url + "/v1", model_name, msgs, P["gen_tokens"])
        out.append({"session": s, "turn": t + 1, "replica": k, "ttft_s": r["ttft"], "route_s": decide,
                    "prompt_tokens": r["prompt_tokens"], "cached_tokens": r["cached_tokens"],
                    "router_tokens": seen.get("tokens"), "scores": seen.get("scores")})
        msgs = msgs + list(pairs[t])
        if not sequential:
            time.sleep(rng.uniform(0.2, 1.0))  # the agent's tool runs


def run_policy(policy, P, rapid_bin=None, model=MODEL, log_dir="/tmp", sequential=False, keep=None):
    """Starts fresh replicas, runs every session under `policy`, returns the raw records. `keep`
    (a callable) sees the live replicas before they stop (the test reads their /v1/cache)."""
    rapid_bin = rapid_bin or os.path.join(ROOT, "build", "rapid-mlx")
    ctx = zmq.Context()
    replicas = []
    try:
        for k in range(P["replicas"]):
            replicas.append(Replica(rapid_bin, model, P["server_args"], log_dir, k, ctx))
        time.sleep(0.5)  # PUB/SUB: subscribed before the first event (a gap is replayed anyway)
        model_name = replicas[0].server.model_name
        if policy == "prefix-aware":
            router = PrefixAwareRouter(replicas, RenderTokenizer(replicas[0].base_url, model_name), BLOCK)
        else:
            router = RoundRobinRouter(replicas)
        records = []
        t0 = time.perf_counter()
        if sequential:
            for s in range(P["sessions"]):
                run_session(router, replicas, model_name, P, s, records, True)
        else:
            threads = [threading.Thread(target=run_session, args=(router, replicas, model_name, P, s, records, False))
                       for s in range(P["sessions"])]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        wall = time.perf_counter() - t0
        caches = [r.cache()["prefix_cache"] for r in replicas]
        if keep:
            keep(replicas, records)
        return {"policy": policy, "wall_s": wall, "requests": records, "prefix_cache": caches,
                "event_gaps": [r.index.gaps for r in replicas]}
    finally:
        for r in replicas:
            r.close()
        ctx.destroy(linger=0)


def summarize(run):
    reqs = run["requests"]
    later = [r for r in reqs if r["turn"] > 1]
    prev = {(r["session"], r["turn"]): r["replica"] for r in reqs}
    stay = [r for r in later if prev[(r["session"], r["turn"] - 1)] == r["replica"]]
    ttft, ttft_later = [r["ttft_s"] for r in reqs], [r["ttft_s"] for r in later]
    prompt, cached = sum(r["prompt_tokens"] for r in reqs), sum(r["cached_tokens"] for r in reqs)
    queried = sum(c["queried_tokens"] for c in run["prefix_cache"])
    hit = sum(c["hit_tokens"] for c in run["prefix_cache"])
    return {"policy": run["policy"], "requests": len(reqs), "prompt_tokens": prompt, "cached_tokens": cached,
            "hit_rate_usage": cached / prompt if prompt else 0.0,
            "hit_rate_cache": hit / queried if queried else 0.0,
            "ttft_p50_s": workloads.pct(ttft, 50), "ttft_p95_s": workloads.pct(ttft, 95),
            "ttft_later_p50_s": workloads.pct(ttft_later, 50), "ttft_later_p95_s": workloads.pct(ttft_later, 95),
            "later_turns_same_replica": len(stay) / len(later) if later else None,
            "per_replica": [sum(1 for r in reqs if r["replica"] == k) for k in range(len(run["prefix_cache"]))],
            "route_p50_ms": 1000 * statistics.median([r["route_s"] for r in reqs]),
            "evicted_blocks": sum(c["evicted_blocks"] for c in run["prefix_cache"]),
            "wall_s": run["wall_s"], "event_gaps": sum(run["event_gaps"])}


def table(rows, P):
    head = (f"{P['replicas']} replicas (`--threads 1` each), {P['sessions']} concurrent agent sessions x "
            f"{P['turns']} turns, system prompt {P['system_words']} words, {P['gen_tokens']} generated tokens "
            f"per turn, server args {' '.join(P['server_args']) or '-'}\n\n")
    lines = ["| policy | hit rate (usage) | hit rate (/v1/cache) | TTFT p50 | TTFT p95 | later turns p50 | "
             "later turns p95 | later turns on the previous replica | requests per replica | evicted blocks | "
             "routing p50 | wall |", "|" + "---|" * 12]
    for s in rows:
        lines.append(f"| {s['policy']} | {s['hit_rate_usage']:.1%} | {s['hit_rate_cache']:.1%} | "
                     f"{s['ttft_p50_s']:.2f} s | {s['ttft_p95_s']:.2f} s | {s['ttft_later_p50_s']:.2f} s | "
                     f"{s['ttft_later_p95_s']:.2f} s | {s['later_turns_same_replica']:.0%} | "
                     f"{'/'.join(map(str, s['per_replica']))} | {s['evicted_blocks']} | {s['route_p50_ms']:.0f} ms | "
                     f"{s['wall_s']:.0f} s |")
    return head + "\n".join(lines) + "\n"


def main():
    std = workloads.PRESETS["standard"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--turns", type=int, default=std["agent_turns"])
    ap.add_argument("--system-words", type=int, default=std["system_words"])
    ap.add_argument("--gen-tokens", type=int, default=std["agent_gen_tokens"])
    ap.add_argument("--kv-cache-memory", default="512MiB")
    ap.add_argument("--policies", default="prefix-aware,round-robin")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "routing-" + time.strftime("%Y%m%d-%H%M%S")))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    P = {"replicas": a.replicas, "sessions": a.sessions, "turns": a.turns, "system_words": a.system_words,
         "gen_tokens": a.gen_tokens, "server_args": ["--kv-cache-memory", a.kv_cache_memory]}
    runs, rows = [], []
    for policy in a.policies.split(","):
        print(f"{policy}: {a.replicas} replicas, {a.sessions} sessions x {a.turns} turns ...", file=sys.stderr)
        runs.append(run_policy(policy, P, a.bin, a.model, a.out))
        rows.append(summarize(runs[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    md = table(rows, P)
    with open(os.path.join(a.out, "routing.json"), "w") as f:
        json.dump({"params": P, "summary": rows, "runs": runs}, f, indent=1)
    with open(os.path.join(a.out, "routing.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
