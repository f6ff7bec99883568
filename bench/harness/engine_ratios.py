"""The engine's own ratios (issues 6 and 7), all measured in one run on one machine with rapid-mlx:

  batching     aggregate decode tok/s of 8 concurrent streams / 1 stream (speculation off, so
               only batching is measured; also with the default `auto`), medians of 5
               alternating 1-stream / 8-stream rounds
  agent        10-turn coding-agent loop (~2k-token system prompt + growing history): TTFT of
               turns 2-10 with the prefix cache / TTFT of the same prompt cold (cache purged)
  restart      TTFT on a persisted prefix right after a restart / cold TTFT of that prompt
  code_edit    decode tok/s of a 150-line file rewrite, --speculative auto / off (+ acceptance),
               fresh, and after a restart with the prompt restored from the disk snapshot; the
               answer is started with "```python" (continue_final_message) so the model rewrites
               the file on every ISA instead of sometimes describing it (prompts.CODE_EDIT_EXTRA)
  chat         decode tok/s of open-ended chat, auto / off (issue 18: >= 0.97); with --only chat,
               several chat prompts on both servers at once, runs alternated

usage (from bench/): python -m harness.engine_ratios [--model GGUF|DIR] [--bin build/rapid-mlx]
                     [--out DIR] [--quick] [--only code_edit|agent|batching|chat] [--repeats N] [--server-arg FLAG]
--only batching: the 8 / 1 stream rows only. --only agent: the agent loop and restart rows only (e.g. on a Qwen3.5 hybrid, whose prefix cache
resumes from recurrent-state checkpoints and which runs without speculation).
Writes DIR/engine_ratios.json and prints a Markdown table."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

from . import client, prompts
from .servers import Server, add_model_and_bin_args
from .workloads import decode_rate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cache_call(srv, method="GET"):
    req = urllib.request.Request(srv.base_url + "/cache", method=method)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def ask(srv, msgs, max_tokens, tools=None, extra=None):
    return client.chat(srv.base_url, srv.model_name, msgs, max_tokens, tools=tools, extra=extra)


def streams(srv, n, gen_tokens, words, fixed=True):
    """Aggregate decode tok/s of n streams started together. fixed: every stream decodes exactly
    gen_tokens (ignore_eos), so n sequences really run concurrently for the whole measured span;
    otherwise streams stop where the model ends them and the batch thins out."""
    results = [None] * n
    barrier = threading.Barrier(n + 1)

    def worker(i):
        msgs = [{"role": "user", "content": f"Stream {n}-{i}-{time.time_ns()}. " +
                 prompts.filler(words, seed=300 + i) + "\n\nContinue this text for a long time."}]
        barrier.wait()
        results[i] = ask(srv, msgs, gen_tokens, extra={"ignore_eos": True} if fixed else None)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    for t in threads:
        t.join()
    # Decode throughput: tokens after each stream's first, over the span from the last first-token
    # (all streams decoding) to the last token — prefill is not counted.
    first = max(r["token_times"][0] for r in results)
    last = max(r["token_times"][-1] for r in results)
    # token_times are chunk arrivals: a step that verified drafts sends its tokens in one chunk, so
    # each stream's chunks count for its tokens per chunk (1 without speculation). Counting chunks
    # as tokens made --speculative auto look 0.87x of off at one stream where its steps ran 1.22x.
    toks = sum(sum(1 for t in r["token_times"] if t > first) * r["completion_tokens"] / r["n_chunks"]
               for r in results)
    # Inter-token gaps each client saw while all streams were decoding (issue 18: p99 of 8 streams
    # within 2x one stream's).
    gaps = [b - a for r in results for a, b in zip(r["token_times"], r["token_times"][1:]) if a >= first]
    # The same up to the first stream's end: with speculation the streams end at different steps
    # (a stream whose text repeats finishes in a third of the steps), and the span above then ends
    # in a thin batch the others never ran; this one is the rate while all n really share each step.
    end = min(r["token_times"][-1] for r in results)
    both = sum(sum(1 for t in r["token_times"] if first < t <= end) * r["completion_tokens"] / r["n_chunks"]
               for r in results)
    return (toks / (last - first) if last > first else None), gaps, (both / (end - first) if end > first else None)


def paired(srv, P, rounds, fixed=True):
    """Medians of 1-stream and 8-stream rates measured in alternation (1, 8, 1, 8, ...), so the
    machine's drift over the run (+-20 % within minutes on the dev VM) weighs on both alike."""
    ones, eights, gaps1, gaps8, together = [], [], [], [], []
    for _ in range(rounds):
        r, g, _ = streams(srv, 1, P["gen"], 32, fixed=fixed)
        ones.append(r)
        gaps1 += g
        r, g, t = streams(srv, 8, P["gen"], 32, fixed=fixed)
        eights.append(r)
        gaps8 += g
        together.append(t)
    together = [t for t in together if t]
    return (statistics.median(ones), statistics.median(eights), p99(gaps1), p99(gaps8),
            statistics.median(together) if together else float("nan"))


def p99(xs):
    return statistics.quantiles(xs, n=100)[98] if len(xs) >= 2 else float("nan")


def batching(srv, P):
    one, eight, itl1, itl8, together = paired(srv, P, P["rounds"])
    # The same with natural ends (streams that stop early thin the batch): reported, not the target.
    one_n, eight_n, _, _, _ = paired(srv, P, 2, fixed=False)
    return {"one_stream_tok_s": one, "eight_streams_tok_s": eight, "ratio": eight / one,
            "eight_streams_together_tok_s": together,
            "itl_p99_one_s": itl1, "itl_p99_eight_s": itl8, "itl_p99_ratio": itl8 / itl1,
            "natural_end": {"one_stream_tok_s": one_n, "eight_streams_tok_s": eight_n, "ratio": eight_n / one_n}}


def agent(srv, P):
    system = prompts.agent_system_prompt(P["system_words"])
    msgs = [{"role": "system", "content": system},
            {"role": "user", "content": "The parser drops the last field of each record. "
                                        "Find the bug, fix it and run the tests."}]
    cache_call(srv, "DELETE")
    turns = []
    for i, (name, args, result) in enumerate(prompts.agent_turns(P["turns"])):
        # TTFT is the first token the engine computes, warm as cold (max_tokens 1: the reply ends
        # with it, so its time is the response's). The first *streamed* text can come much later: a
        # reply that opens like a tool call ("[", "{", "<tool_call>") is held by the tool parser,
        # which put 15 decode steps into some warm turns on the random-weight Qwen3.5 (its padded
        # vocabulary's "[PAD…]" tokens). Then the turn itself, whose reply the server caches.
        warm = ask(srv, msgs, 1, tools=prompts.TOOLS)
        ask(srv, msgs, P["agent_gen"], tools=prompts.TOOLS)
        if i > 0:
            # The same prompt cold: purge memory and disk, resend, then continue warm.
            cache_call(srv, "DELETE")
            cold = ask(srv, msgs, 1, tools=prompts.TOOLS)
            # new_share: the part of the prompt the warm turn had to compute. Prefill time grows at
            # least linearly with the tokens computed, so it is about the lowest warm / cold can be.
            new = warm["prompt_tokens"] - (warm["cached_tokens"] or 0)
            turns.append({"turn": i + 1, "prompt_tokens": warm["prompt_tokens"], "new_tokens": new,
                          "new_share": new / warm["prompt_tokens"], "ttft_warm_s": warm["ttft"],
                          "ttft_cold_s": cold["ttft"], "ratio": warm["ttft"] / cold["ttft"]})
        msgs = msgs + [prompts.assistant_tool_message(i, name, args), prompts.tool_message(i, result)]
    return {"turns": turns, "mean_ratio": statistics.mean(t["ratio"] for t in turns),
            "max_ratio": max(t["ratio"] for t in turns),
            "mean_new_share": statistics.mean(t["new_share"] for t in turns)}


def restart(srv, P):
    msgs = [{"role": "system", "content": prompts.agent_system_prompt(P["system_words"])},
            {"role": "user", "content": "List the files you would read first."}]
    cache_call(srv, "DELETE")
    cold = ask(srv, msgs, 1)["ttft"]
    deadline = time.time() + 120
    while time.time() < deadline and cache_call(srv)["disk"]["pending_writes"]:
        time.sleep(0.1)
    srv.stop()
    startup = srv.start()
    after = ask(srv, msgs, 1)
    info = cache_call(srv)
    return {"ttft_cold_s": cold, "startup_s": startup, "ttft_after_restart_s": after["ttft"],
            "cached_tokens": info["prefix_cache"]["hit_tokens"], "ratio": after["ttft"] / cold}


def decode_runs(srv, msgs, gen, repeats, extra=None):
    rates = []
    for _ in range(repeats):
        cache_call(srv, "DELETE")  # the same cold start for every run and every mode
        r = ask(srv, msgs, gen, extra=extra)
        rates.append(decode_rate(r))
    return statistics.median(rates), r


def wait_persisted(srv):
    deadline = time.time() + 120
    while time.time() < deadline and cache_call(srv)["disk"]["pending_writes"]:
        time.sleep(0.1)


def after_restart_runs(srv, msgs, gen, repeats, extra=None):
    """The edit on a prompt restored from the disk snapshot (issue 22): the prompt is persisted,
    the server restarts on the same --cache-dir, answers a short request, then the edit. Each run
    is its own restart; returns every run's decode tok/s and what its speculation did."""
    runs = []
    for _ in range(repeats):
        cache_call(srv, "DELETE")
        ask(srv, msgs, 1, extra=extra)  # prefill and persist the prompt
        wait_persisted(srv)
        srv.stop()
        srv.start()
        ask(srv, [{"role": "user", "content": "Hello"}], 4)
        r = ask(srv, msgs, gen, extra=extra)
        runs.append({"decode_tok_s": decode_rate(r), "cached_tokens": r["cached_tokens"],
                     "prompt_tokens": r["prompt_tokens"], "speculative": cache_call(srv)["speculative"]})
    return runs


def spec_compare(make_server, P, chat=True):
    code_msgs, src = prompts.code_edit_messages(P["code_lines"], prefill=True)
    chat_msgs = [{"role": "user", "content": "Write a long story about a lighthouse keeper and a storm."}]
    out = {}
    for mode in ("off", "auto"):
        srv = make_server(mode)
        try:
            code, code_r = decode_runs(srv, code_msgs, P["code_gen"], P["repeats"], prompts.CODE_EDIT_EXTRA)
            spec = cache_call(srv)["speculative"]
            o = {"code_edit_decode_tok_s": code, "code_edit_tokens": code_r["completion_tokens"], "speculative": spec}
            if chat:
                o["chat_decode_tok_s"], _ = decode_runs(srv, chat_msgs, P["chat_gen"], P["repeats"])
                o["speculative_after_chat"] = cache_call(srv)["speculative"]
            o["after_restart"] = after_restart_runs(srv, code_msgs, P["code_gen"], P["repeats"], prompts.CODE_EDIT_EXTRA)
            o["after_restart_decode_tok_s"] = statistics.median(r["decode_tok_s"] for r in o["after_restart"])
            out[mode] = o
        finally:
            srv.stop()
    out["code_edit_ratio"] = out["auto"]["code_edit_decode_tok_s"] / out["off"]["code_edit_decode_tok_s"]
    # Every restart run of auto against the median of off's: the target holds for each run.
    off_after = out["off"]["after_restart_decode_tok_s"]
    out["after_restart_ratios"] = [r["decode_tok_s"] / off_after for r in out["auto"]["after_restart"]]
    out["after_restart_min_ratio"] = min(out["after_restart_ratios"])
    if chat:
        out["chat_ratio"] = out["auto"]["chat_decode_tok_s"] / out["off"]["chat_decode_tok_s"]
    return out


CHAT_PROMPTS = ["Write a long story about a lighthouse keeper and a storm.",
                "Explain how a bicycle gear system works, in detail, for a curious teenager.",
                "Describe a day in the life of a medieval baker.",
                "What should a first-time visitor know about hiking in the mountains? Be thorough."]


def chat_compare(make_server, P):
    """Open chat, auto / off: each prompt decoded by both servers in turn (both stay up, only one
    decodes at a time), so the machine's drift weighs on both modes alike; medians over prompts x
    repeats. Different prompts, so auto meets texts it has not learned."""
    srvs = {}
    rates = {"off": [], "auto": []}
    try:
        for m in ("off", "auto"):
            srvs[m] = make_server(m)
        for _ in range(P["repeats"]):
            for text in CHAT_PROMPTS:
                for m in ("off", "auto"):
                    r, _ = decode_runs(srvs[m], [{"role": "user", "content": text}], P["chat_gen"], 1)
                    rates[m].append(r)
        spec = cache_call(srvs["auto"])["speculative"]
    finally:
        for srv in srvs.values():
            srv.stop()
    off, auto = statistics.median(rates["off"]), statistics.median(rates["auto"])
    return {"off_tok_s": off, "auto_tok_s": auto, "ratio": auto / off, "runs": rates, "speculative": spec}


def code_edit_rows(sp):
    a, o = sp["auto"], sp["off"]
    runs = ", ".join(f"{r['decode_tok_s']:.0f}" for r in a["after_restart"])
    return [
        ("code edit decode, auto / off", f"{a['code_edit_decode_tok_s']:.0f} / {o['code_edit_decode_tok_s']:.0f} tok/s",
         sp["code_edit_ratio"], ">= 2"),
        ("code edit decode after restart, auto / off (worst run)",
         f"runs {runs} / {o['after_restart_decode_tok_s']:.0f} tok/s", sp["after_restart_min_ratio"], ">= 2"),
    ]


def spec_lines(sp):
    acc = sp["auto"]["speculative"]
    lines = [f"code edit (auto): {acc['drafted_tokens']} drafted, {acc['accepted_tokens']} accepted "
             f"(acceptance {acc['acceptance_rate']:.2f}, mean accepted per drafted step "
             f"{acc['accepted_tokens'] / max(1, acc['steps']):.2f})"]
    for i, r in enumerate(sp["auto"]["after_restart"]):
        s = r["speculative"]
        lines.append(f"after restart run {i + 1} (auto, {r['cached_tokens']}/{r['prompt_tokens']} prompt tokens "
                     f"restored): {r['decode_tok_s']:.0f} tok/s, {s['drafted_tokens']} drafted, "
                     f"{s['accepted_tokens']} accepted in {s['steps']} drafted steps")
    if "speculative_after_chat" in sp["auto"]:
        ca = sp["auto"]["speculative_after_chat"]
        lines.append(f"after chat (auto, cumulative): {ca['drafted_tokens']} drafted, {ca['accepted_tokens']} accepted")
    return lines


def main():
    ap = argparse.ArgumentParser()
    add_model_and_bin_args(ap)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness, asserts nothing")
    ap.add_argument("--only", choices=("all", "code_edit", "agent", "batching", "chat"), default="all",
                    help="code_edit: only the code-edit rows (fresh and after a restart), auto vs off; "
                         "agent: only the agent-loop and restart rows; batching: only the 8 / 1 stream rows; "
                         "chat: only open chat, auto / off, over several prompts")
    ap.add_argument("--repeats", type=int, default=None, help="runs per code-edit row (default 3)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra rapid-mlx serve flag (repeatable)")
    a = ap.parse_args()
    P = ({"gen": 16, "rounds": 1, "system_words": 200, "turns": 3, "agent_gen": 4, "code_lines": 20, "code_gen": 64,
          "chat_gen": 32, "repeats": 1} if a.quick else
         {"gen": 96, "rounds": 5, "system_words": 1500, "turns": 10, "agent_gen": 16, "code_lines": 150, "code_gen": 600,
          "chat_gen": 256, "repeats": 3})
    if a.repeats:
        P["repeats"] = a.repeats
    out_dir = a.out or os.path.join(ROOT, "bench", "results", time.strftime("engine-%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    cache_dir = tempfile.mkdtemp(prefix="rapid-bench-kv-")

    def make_server(spec, name=None):
        s = Server("rapid-mlx", a.model, rapid_bin=a.bin, log_dir=out_dir, log_name=f"server-{name or spec}.log",
                   extra_args=["--speculative", spec, "--cache-dir", cache_dir] + a.server_arg)
        s.start()
        client.chat(s.base_url, s.model_name, [{"role": "user", "content": "Hello"}], 4)  # warm-up
        return s

    res = {"model": a.model, "load_avg_start": os.getloadavg()}
    if a.only in ("all", "agent", "batching"):
        srv = make_server("off", "batching-off")
        try:
            if a.only in ("all", "batching"):
                res["batching_spec_off"] = batching(srv, P)
            if a.only != "batching":
                res["agent"] = agent(srv, P)
                res["restart"] = restart(srv, P)
        finally:
            srv.stop()
    if a.only in ("all", "batching"):
        srv = make_server("auto", "batching-auto")
        try:
            res["batching_spec_auto"] = batching(srv, P)
        finally:
            srv.stop()
    if a.only in ("all", "code_edit"):
        res["speculative"] = sp = spec_compare(make_server, P, chat=a.only == "all")
    if a.only == "chat":
        res["chat"] = chat_compare(make_server, P)
    res["load_avg_end"] = os.getloadavg()
    with open(os.path.join(out_dir, "engine_ratios.json"), "w") as f:
        json.dump(res, f, indent=1)

    rows = []
    if a.only in ("all", "batching"):
        b, bo = res["batching_spec_off"], res["batching_spec_auto"]
        rows += [
            ("8 streams / 1 stream, aggregate decode (spec off)", f"{b['eight_streams_tok_s']:.0f} / {b['one_stream_tok_s']:.0f} tok/s", b["ratio"], ">= 4"),
            ("inter-token p99, 8 streams / 1 stream (spec off)", f"{b['itl_p99_eight_s']*1000:.1f} / {b['itl_p99_one_s']*1000:.1f} ms", b["itl_p99_ratio"], "<= 2"),
            ("8 streams / 1 stream, streams ending where the model stops (spec off)", f"{b['natural_end']['eight_streams_tok_s']:.0f} / {b['natural_end']['one_stream_tok_s']:.0f} tok/s", b["natural_end"]["ratio"], ""),
            ("8 streams / 1 stream (spec auto)", f"{bo['eight_streams_tok_s']:.0f} / {bo['one_stream_tok_s']:.0f} tok/s", bo["ratio"], ""),
            ("8 streams, auto / off", f"{bo['eight_streams_tok_s']:.0f} / {b['eight_streams_tok_s']:.0f} tok/s",
             bo["eight_streams_tok_s"] / b["eight_streams_tok_s"], ">= 0.97"),
            ("8 streams while all 8 decode (until the first ends), auto / off",
             f"{bo['eight_streams_together_tok_s']:.0f} / {b['eight_streams_together_tok_s']:.0f} tok/s",
             bo["eight_streams_together_tok_s"] / b["eight_streams_together_tok_s"], ""),
        ]
    if a.only in ("all", "agent"):
        ag, rs = res["agent"], res["restart"]
        rows += [
            ("agent loop TTFT turns 2-10, warm / cold (mean)", f"max {ag['max_ratio']:.3f}", ag["mean_ratio"], "<= 0.10"),
            ("agent loop, new tokens / prompt tokens of a warm turn (mean)",
             f"{statistics.mean(t['new_tokens'] for t in ag['turns']):.0f} / "
             f"{statistics.mean(t['prompt_tokens'] for t in ag['turns']):.0f}", ag["mean_new_share"], ""),
            ("TTFT after restart / cold", f"{rs['ttft_after_restart_s']*1000:.0f} / {rs['ttft_cold_s']*1000:.0f} ms", rs["ratio"], "<= 0.15"),
        ]
    if a.only in ("agent", "batching", "chat"):
        sp = None
    else:
        rows += code_edit_rows(sp)
    if a.only == "all":
        rows.append(("open chat decode, auto / off", f"{sp['auto']['chat_decode_tok_s']:.0f} / {sp['off']['chat_decode_tok_s']:.0f} tok/s", sp["chat_ratio"], ">= 0.97"))
    if a.only == "chat":
        c = res["chat"]
        rows.append(("open chat decode, auto / off (median over prompts)", f"{c['auto_tok_s']:.0f} / {c['off_tok_s']:.0f} tok/s",
                     c["ratio"], ">= 0.97"))
    lines = [f"model `{os.path.basename(a.model)}`, {os.cpu_count()} cores, load {res['load_avg_start'][0]:.2f} -> {res['load_avg_end'][0]:.2f}",
             "", "| measure | figures | ratio | target |", "|---|---|---|---|"]
    lines += [f"| {n} | {f} | {r:.3f} | {t} |" for n, f, r, t in rows]
    if sp:
        lines += [""] + spec_lines(sp)
    text = "\n".join(lines)
    with open(os.path.join(out_dir, "engine_ratios.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
