"""The five workloads. Each takes a started Server and a size preset and returns plain figures
(seconds, tokens/s) plus the raw per-request timings, so the JSON keeps everything measured."""
import statistics
import threading
import time

from . import client, prompts


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def decode_rate(r):
    """Tokens after the first over the time after the first token."""
    span = (r["token_times"][-1] - r["token_times"][0]) if len(r["token_times"]) > 1 else 0
    n = r["completion_tokens"] - 1
    return n / span if span > 0 and n > 0 else None


def warmup(srv):
    client.chat(srv.base_url, srv.model_name, [{"role": "user", "content": "Hello"}], 4)


def single_stream(srv, P, progress):
    """Prefill tok/s (prompt tokens / TTFT, unique prompt so no prefix cache helps), decode tok/s,
    TTFT; median of P['repeats'] runs."""
    runs = []
    for i in range(P["repeats"]):
        msgs = [{"role": "user", "content": f"Request {i}-{time.time_ns()}. " +
                 prompts.filler(P["prompt_words"], seed=10 + i) +
                 "\n\nWrite a long, detailed story about the text above."}]
        r = client.chat(srv.base_url, srv.model_name, msgs, P["gen_tokens"])
        if r["prompt_tokens"] is None:
            r["prompt_tokens"] = client.prompt_tokens(srv.base_url, srv.model_name, msgs)
        runs.append({"ttft_s": r["ttft"], "prompt_tokens": r["prompt_tokens"],
                     "completion_tokens": r["completion_tokens"], "total_s": r["total"],
                     "prefill_tok_s": r["prompt_tokens"] / r["ttft"] if r["prompt_tokens"] else None,
                     "decode_tok_s": decode_rate(r)})
        progress()
    med = lambda k: statistics.median([x[k] for x in runs if x[k] is not None] or [0]) or None
    return {"prefill_tok_s": med("prefill_tok_s"), "decode_tok_s": med("decode_tok_s"),
            "ttft_s": med("ttft_s"), "prompt_tokens": med("prompt_tokens"), "runs": runs}


def concurrency(srv, P, progress):
    out = {}
    for n in P["levels"]:
        results, errors = [None] * n, []
        barrier = threading.Barrier(n + 1)

        def worker(i):
            msgs = [{"role": "user", "content": f"Stream {n}-{i}-{time.time_ns()}. " +
                     prompts.filler(P["conc_prompt_words"], seed=100 + i) +
                     "\n\nContinue this text for a long time."}]
            barrier.wait()
            try:
                results[i] = client.chat(srv.base_url, srv.model_name, msgs, P["conc_gen_tokens"])
            except Exception as e:  # recorded, reported, never silently dropped
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        ok = [r for r in results if r]
        toks = sum(r["completion_tokens"] for r in ok)
        ttfts = [r["ttft"] for r in ok]
        itl = [g for r in ok for g in gaps(r["token_times"])]
        out[str(n)] = {"aggregate_tok_s": toks / wall if wall > 0 and ok else None, "wall_s": wall,
                       "completion_tokens": toks, "ttft_p50_s": pct(ttfts, 50),
                       "ttft_p99_s": pct(ttfts, 99), "itl_p50_s": pct(itl, 50),
                       "itl_p99_s": pct(itl, 99), "errors": errors}
        progress()
    return out


def agent_loop(srv, P, progress):
    """A tool-calling conversation: ~2k-token system prompt, scripted tool calls and results so
    the history grows identically on every engine; TTFT and time per turn."""
    system = prompts.agent_system_prompt(P["system_words"])
    msgs = [{"role": "system", "content": system},
            {"role": "user", "content": "The parser drops the last field of each record. "
                                        "Find the bug, fix it and run the tests."}]
    turns = []
    t_all = time.perf_counter()
    for i, (name, args, result) in enumerate(prompts.agent_turns(P["agent_turns"])):
        r = client.chat(srv.base_url, srv.model_name, msgs, P["agent_gen_tokens"], tools=prompts.TOOLS)
        turns.append({"turn": i + 1, "ttft_s": r["ttft"], "total_s": r["total"],
                      "completion_tokens": r["completion_tokens"], "prompt_tokens": r["prompt_tokens"]})
        msgs = msgs + [prompts.assistant_tool_message(i, name, args), prompts.tool_message(i, result)]
        progress()
    total = time.perf_counter() - t_all
    return {"total_s": total, "ttft_first_s": turns[0]["ttft_s"],
            "ttft_mean_later_s": statistics.mean([t["ttft_s"] for t in turns[1:]]) if len(turns) > 1 else None,
            "turns": turns}


def code_edit(srv, P, progress):
    """Rewrite a file with one small change: output mostly repeats the prompt, which is where
    prompt-lookup / speculative decoding pays."""
    msgs, src = prompts.code_edit_messages(P["code_lines"])
    r = client.chat(srv.base_url, srv.model_name, msgs, P["code_gen_tokens"])
    progress()
    return {"total_s": r["total"], "ttft_s": r["ttft"], "completion_tokens": r["completion_tokens"],
            "decode_tok_s": decode_rate(r), "finish_reason": r["finish_reason"],
            "output_matches_file_lines": _common_lines(r["text"], src)}


def _common_lines(text, src):
    src_lines = set(l for l in src.splitlines() if l.strip())
    return sum(1 for l in text.splitlines() if l in src_lines)


def restart(srv, P, progress):
    """TTFT on a long prefix while warm, then after stop + start (a persistent prefix cache
    would make the second one fast)."""
    msgs = [{"role": "system", "content": prompts.agent_system_prompt(P["system_words"])},
            {"role": "user", "content": "List the files you would read first."}]
    client.chat(srv.base_url, srv.model_name, msgs, 1)  # make sure the prefix is cached
    warm = client.chat(srv.base_url, srv.model_name, msgs, 1)["ttft"]
    srv.stop()
    startup = srv.start()
    after = client.chat(srv.base_url, srv.model_name, msgs, 1)["ttft"]
    progress()
    return {"startup_s": startup, "ttft_warm_s": warm, "ttft_after_restart_s": after}


WORKLOADS = {"single": single_stream, "concurrency": concurrency, "agent": agent_loop,
             "code_edit": code_edit, "restart": restart}


def steps(P, names):
    """Progress-bar ticks each workload makes."""
    n = {"single": P["repeats"], "concurrency": len(P["levels"]), "agent": P["agent_turns"],
         "code_edit": 1, "restart": 1}
    return sum(n[w] for w in names)


PRESETS = {
    "quick": {"repeats": 1, "prompt_words": 96, "gen_tokens": 24, "levels": [1, 4],
              "conc_prompt_words": 24, "conc_gen_tokens": 12, "system_words": 300,
              "agent_turns": 3, "agent_gen_tokens": 8, "code_lines": 30, "code_gen_tokens": 48},
    # The full workload shapes at smaller counts, for slow machines / many configs.
    "standard": {"repeats": 2, "prompt_words": 150, "gen_tokens": 48, "levels": [1, 4, 8, 16],
                 "conc_prompt_words": 32, "conc_gen_tokens": 16, "system_words": 1500,
                 "agent_turns": 10, "agent_gen_tokens": 16, "code_lines": 150, "code_gen_tokens": 300},
    "full": {"repeats": 3, "prompt_words": 400, "gen_tokens": 128, "levels": [1, 4, 8, 16],
             "conc_prompt_words": 48, "conc_gen_tokens": 48, "system_words": 1500,
             "agent_turns": 10, "agent_gen_tokens": 32, "code_lines": 150, "code_gen_tokens": 1200},
}
