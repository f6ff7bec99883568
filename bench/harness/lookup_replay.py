"""The code edit's ceiling for prompt lookup (issue 18): the off run's greedy answer replayed through
lookup policies offline, counting decode steps and charging each drafted row a fraction of a
one-token step. Policies: the latest earlier occurrence of the longest suffix n-gram (n 8..2) at
full depth; the same cut where that n-gram's two latest occurrences' continuations disagree (what
NgramProposer does); the latest occurrence drafting exactly what will be accepted (perfect depth);
and, with hindsight, the best of all earlier occurrences of any suffix length (any lookup's ceiling).

    python -m harness.lookup_replay [--bin build/rapid-mlx] [--row-cost 0.24]   (from bench/)

The answer's ids are its text through `rapid-mlx tokenize` (600 ids for SmolLM2's 600 tokens)."""
import argparse
import json
import subprocess
import sys
import urllib.request

from . import prompts
from .servers import Server, add_model_and_bin_args


def answer(a):
    srv = Server("rapid-mlx", a.model, rapid_bin=a.bin, log_dir="/tmp", log_name="lookup-replay.log",
                 extra_args=["--speculative", "off"])
    srv.start()
    try:
        msgs, _ = prompts.code_edit_messages(150, prefill=True)
        body = {"model": srv.model_name, "messages": msgs, "max_tokens": 600, "temperature": 0.0, **prompts.CODE_EDIT_EXTRA}

        def post(path):
            req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/v1{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=900).read())

        prompt = post("/chat/completions/render")["token_ids"]
        text = post("/chat/completions")["choices"][0]["message"]["content"]
    finally:
        srv.stop()
    ids = subprocess.run([a.bin, "tokenize", "--tokenizer", a.model, "--no-add-special", "--no-parse-special", text],
                         capture_output=True, text=True, check=True).stdout.split()
    return prompt, [int(x) for x in ids]


def replay(P, O, cap, policy, c):
    S = P + O

    def ends(L, n):  # ends e < L of earlier occurrences of the suffix n-gram, latest first
        return [e for e in range(L - 1, n - 1, -1) if S[e - n:e] == S[L - n:L]]

    def run(e, L, k):  # how many of S[e:e+k] (known tokens only) the answer continues with
        a = 0
        while a < k and e + a < L and L + a < len(S) and S[e + a] == S[L + a]:
            a += 1
        return a

    L, steps, cost = len(P), 0, 0.0
    while L < len(S):
        k = a = 0
        if policy == "oracle":
            for n in range(1, min(64, L - 1) + 1):
                es = ends(L, n)
                if not es:
                    break
                a = max([a] + [run(e, L, cap) for e in es])
            k = a
        else:
            for n in range(min(8, L - 1), 1, -1):
                es = ends(L, n)
                if not es:
                    continue
                e = es[0]
                k = min(cap, L - e)
                if policy == "agree" and len(es) > 1:
                    g = 0
                    while g < k and S[es[1] + g] == S[e + g]:
                        g += 1
                    k = g
                a = run(e, L, k)
                if policy == "perfect":
                    k = a
                break
        steps += 1
        cost += 1 + c * k
        L += a + 1
    return steps, len(O) / cost


def main():
    ap = argparse.ArgumentParser()
    add_model_and_bin_args(ap)
    ap.add_argument("--row-cost", type=float, default=0.24, help="a drafted row's cost over a one-token step")
    a = ap.parse_args()
    P, O = answer(a)
    print(f"prompt {len(P)} tokens, answer {len(O)}; a drafted row costs {a.row_cost} of a one-token step")
    print("| policy | depth cap 8 | 16 | 32 |\n|---|---:|---:|---:|")
    for policy in ("latest", "agree", "perfect", "oracle"):
        cells = [replay(P, O, cap, policy, a.row_cost) for cap in (8, 16, 32)]
        print(f"| {policy} | " + " | ".join(f"{s} steps, {x:.2f}x" for s, x in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
