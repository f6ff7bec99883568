"""A float64 NumPy forward pass of a llama-architecture GGUF (SmolLM2's shape: RMSNorm, grouped-query
attention with llama.cpp's interleaved RoPE on GGUF's permuted q / k rows, SiLU-gated MLP, tied or
separate output head), its weights dequantized by gguf-py. The exact next-token distribution of the
file's weights, for checks where two engines' activation quantizations differ (llama.cpp quantizes
activations to Q8_K blocks of 256 for the K and IQ types, we to blocks of 32)."""
import math

import numpy as np


def weights(path):
    from qwen35_gguf import import_gguf
    gguf = import_gguf()
    r = gguf.GGUFReader(path)
    meta = {k: r.fields[k].contents() for k in r.fields if k.startswith("llama.")}
    w = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # rows first
        w[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float64)
    return meta, w


def next_token_logprobs(path, prompts_ids):
    """[log-probabilities of the token after each prompt] (token id lists)."""
    meta, w = weights(path)
    layers, heads, kv = (int(meta[f"llama.{k}"]) for k in ("block_count", "attention.head_count",
                                                         "attention.head_count_kv"))
    eps, base = float(meta["llama.attention.layer_norm_rms_epsilon"]), float(meta["llama.rope.freq_base"])
    head = w.get("output.weight", w["token_embd.weight"])

    def norm(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g

    out = []
    for ids in prompts_ids:
        x = w["token_embd.weight"][ids]
        n, d = x.shape
        hd = d // heads
        ang = np.arange(n)[:, None] * base ** (-np.arange(0, hd, 2) / hd)[None, :]
        cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]

        def rope(q):  # pairs (2i, 2i + 1)
            a, b = q[..., 0::2], q[..., 1::2]
            r = np.empty_like(q)
            r[..., 0::2], r[..., 1::2] = a * cos - b * sin, a * sin + b * cos
            return r

        mask = np.triu(np.full((n, n), -np.inf), 1)[None]
        for i in range(layers):
            p = f"blk.{i}."
            h = norm(x, w[p + "attn_norm.weight"])
            q = rope((h @ w[p + "attn_q.weight"].T).reshape(n, heads, hd))
            k = np.repeat(rope((h @ w[p + "attn_k.weight"].T).reshape(n, kv, hd)), heads // kv, axis=1)
            v = np.repeat((h @ w[p + "attn_v.weight"].T).reshape(n, kv, hd), heads // kv, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", s, v).reshape(n, d) @ w[p + "attn_output.weight"].T
            h = norm(x, w[p + "ffn_norm.weight"])
            g, u = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
        lg = norm(x[-1], w["output_norm.weight"]) @ head.T
        out.append(lg - lg.max() - math.log(np.exp(lg - lg.max()).sum()))
    return out
