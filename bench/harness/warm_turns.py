"""Agent turns on a thinking-template model (issue 14): the agent sends back the model's own answers
(forced `write_file` tool calls of `--answer` tokens, then a tool result), and the Qwen3 template
re-renders each answer without the `<think></think>` block its generation prompt opened (non-thinking
mode), so without warming the prefix cache misses every previous answer.

For turns 2..N: TTFT with turn warming, TTFT with `--no-warm-turns`, and TTFT of the same prompt cold
(prefix cache purged), plus the cached-token counts. Between turns the client waits until the server
has finished warming (or, with warming off, a fixed pause), as an agent does while its tool runs.

The model: a random-weight Qwen3 of the given shape with the real Qwen3 tokenizer and template
(scripts/make_tiny_chat_model.py; random weights of real-ish dimensions, written once to the cache).

usage (from bench/): python -m harness.warm_turns [--bin build/rapid-mlx] [--turns 10] [--answer 160]
                     [--hidden 512 --layers 8 --inter 1536] [--out DIR]"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

from . import client, prompts
from .servers import Server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_tiny_chat_model  # noqa: E402

NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
FORCE = {"tool_choice": {"type": "function", "function": {"name": "write_file"}}}


def cache_call(srv, method="GET"):
    req = urllib.request.Request(srv.base_url + "/cache", method=method)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def wait_warm(srv, n, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and cache_call(srv)["warm_turns"]["requests"] < n:
        time.sleep(0.02)


def loop(srv, P, warming):
    """The agent loop; returns per turn (messages sent, TTFT, prompt and cached tokens)."""
    msgs = [{"role": "system", "content": prompts.agent_system_prompt(P["system_words"])},
            {"role": "user", "content": "Rewrite src/parser.py so that it keeps the last field of each record."}]
    cache_call(srv, "DELETE")
    turns = []
    for i in range(P["turns"]):
        t0 = time.perf_counter()
        done = cache_call(srv)["warm_turns"]["requests"]
        r = client.chat(srv.base_url, srv.model_name, msgs, P["answer"], tools=prompts.TOOLS,
                        extra={**NO_THINK, **FORCE})
        turns.append({"turn": i + 1, "messages": msgs, "prompt_tokens": r["prompt_tokens"], "ttft_s": r["ttft"],
                      "cached_tokens": r["cached_tokens"]})
        calls = r["tool_calls"]
        msgs = msgs + [{"role": "assistant", "content": r["text"], "tool_calls": calls},
                       {"role": "tool", "tool_call_id": calls[0]["id"], "content": prompts.filler(80, seed=700 + i)}]
        if warming:
            wait_warm(srv, done + 1)  # the agent's tool runs meanwhile
        else:
            time.sleep(max(0.0, 0.2 - (time.perf_counter() - t0)))
    return turns


def cold_ttfts(srv, turns):
    """TTFT of each turn's prompt with the prefix cache purged (on a server without warming, so
    nothing prepared in the background can hit)."""
    out = []
    for t in turns:
        cache_call(srv, "DELETE")
        out.append(client.chat(srv.base_url, srv.model_name, t["messages"], 1, tools=prompts.TOOLS,
                               extra={**NO_THINK, **FORCE})["ttft"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "rapid-mlx"))
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--answer", type=int, default=160, help="tokens per forced tool-call answer")
    ap.add_argument("--system-words", type=int, default=1500)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--inter", type=int, default=1536)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    model = os.path.join(cache, f"bench-qwen3-chat-h{a.hidden}-l{a.layers}-i{a.inter}")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        make_tiny_chat_model.make(model, hidden=a.hidden, layers=a.layers, inter=a.inter, heads=8, kv_heads=4,
                                  head_dim=64, ctx=32768)
    out_dir = a.out or os.path.join(ROOT, "bench", "results", time.strftime("warm-turns-%Y%m%d-%H%M%S"))
    os.makedirs(out_dir, exist_ok=True)
    P = {"turns": a.turns, "answer": a.answer, "system_words": a.system_words}
    res = {"model": model, "params": P}
    for name, extra in (("warming", []), ("no_warming", ["--no-warm-turns"])):
        srv = Server("rapid-mlx", model, rapid_bin=a.bin, log_dir=out_dir, log_name=f"server-{name}.log",
                     extra_args=["--speculative", "off", "--ctx", "16384", "--no-persist-cache"] + extra)
        srv.start()
        try:
            res[name] = {"turns": loop(srv, P, warming=not extra)}
            if extra:
                res["cold_ttft_s"] = cold_ttfts(srv, res[name]["turns"])
        finally:
            srv.stop()
    for name in ("warming", "no_warming"):
        turns = res[name]["turns"]
        for t, cold in zip(turns[1:], res["cold_ttft_s"][1:]):
            t["ttft_cold_s"], t["ratio"] = cold, t["ttft_s"] / cold
            del t["messages"]
        del turns[0]["messages"]
        ratios = [t["ratio"] for t in turns[1:]]
        res[name]["mean_ratio"], res[name]["max_ratio"] = statistics.mean(ratios), max(ratios)
    with open(os.path.join(out_dir, "warm_turns.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = [f"model {os.path.basename(model)} (random weights, Qwen3 tokenizer + template, non-thinking mode), "
             f"{a.turns} turns, {a.answer}-token tool-call answers", "",
             "| turn | prompt tokens | cached (warming / off) | TTFT warming / off / cold (ms) | ratio warming / off |",
             "|---|---|---|---|---|"]
    for w, o in zip(res["warming"]["turns"][1:], res["no_warming"]["turns"][1:]):
        lines.append(f"| {w['turn']} | {w['prompt_tokens']} | {w['cached_tokens']} / {o['cached_tokens']} | "
                     f"{w['ttft_s']*1e3:.0f} / {o['ttft_s']*1e3:.0f} / {w['ttft_cold_s']*1e3:.0f} | "
                     f"{w['ratio']:.3f} / {o['ratio']:.3f} |")
    lines += ["", f"mean warm/cold TTFT ratio, turns 2-{a.turns}: warming {res['warming']['mean_ratio']:.3f} "
                  f"(max {res['warming']['max_ratio']:.3f}), off {res['no_warming']['mean_ratio']:.3f} "
                  f"(max {res['no_warming']['max_ratio']:.3f})"]
    text = "\n".join(lines)
    with open(os.path.join(out_dir, "warm_turns.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
