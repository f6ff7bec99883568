#!/usr/bin/env python3
"""Tiny Qwen3 with random MTP heads (Qwen3-Next / Qwen3.5 `mtp.*` naming) and a numpy reference of
the head's output, for tests/model_test.cpp (MTP loader + forward) and tests/engine_mtp_test.cpp.

  .venv/bin/python scripts/make_mtp_model.py

Reads tests/golden/tiny/qwen3 (the tiny random Qwen3 of make_tiny_models.py), adds seeded random
MTP weights (fc [H, 2H], pre_fc_norm_embedding, pre_fc_norm_hidden, one decoder layer, norm) and
writes tests/golden/tiny/qwen3-mtp/{config.json, model.safetensors, mtp_logits.json}.
The reference is an independent numpy Qwen3: it first reproduces transformers' logits of the base
model (tests/golden/tiny/qwen3/logits.json) to 1e-4, then runs the MTP head as vLLM's
Qwen3NextMultiTokenPredictor does: x = fc(cat[norm_e(embed(t_{i+1})), norm_h(h_i)]), the MTP
decoder layer at position i (causal over the head's own positions), mtp.norm, the tied lm_head.
h_i is the target's final-normed hidden state.
"""
import json
import os
import shutil
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests", "golden", "tiny", "qwen3")
OUT = os.path.join(ROOT, "tests", "golden", "tiny", "qwen3-mtp")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out, raw = {}, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = data[a:b]
        raw[name] = (info["dtype"], info["shape"], buf)
        if info["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            out[name] = u.view(np.float32).reshape(info["shape"])
        elif info["dtype"] == "F32":
            out[name] = np.frombuffer(buf, dtype=np.float32).reshape(info["shape"])
        else:
            raise ValueError(info["dtype"])
    return out, raw


def write_safetensors(path, raw):
    header, blobs, off = {}, [], 0
    for name, (dt, shape, buf) in raw.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(buf)]}
        blobs.append(buf)
        off += len(buf)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Qwen3:
    def __init__(self, W, cfg):
        self.W, self.c = W, cfg
        self.H, self.nh, self.nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd, self.eps = cfg["head_dim"], cfg["rms_norm_eps"]
        self.theta = cfg["rope_parameters"]["rope_theta"]
        self.bf16_inv_freq = False  # transformers' bf16 model rounded its inv_freq buffer too

    def rms(self, x, w):
        x = x.astype(np.float64)
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x [T, heads, hd], rotate-half
        half = self.hd // 2
        inv = 1.0 / (self.theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        if self.bf16_inv_freq:
            u = inv.astype(np.float32).view(np.uint32)
            inv = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32).astype(np.float64)
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def layer(self, x, p, pos):
        W, T = self.W, x.shape[0]
        h = self.rms(x, W[p + "input_layernorm.weight"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, self.nh, self.hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, self.nkv, self.hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, self.nkv, self.hd)
        q = self.rope(self.rms(q, W[p + "self_attn.q_norm.weight"]), pos)
        k = self.rope(self.rms(k, W[p + "self_attn.k_norm.weight"]), pos)
        g = self.nh // self.nkv
        out = np.zeros((T, self.nh, self.hd))
        for hh in range(self.nh):
            s = q[:, hh, :] @ k[:, hh // g, :].T / np.sqrt(self.hd)
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            out[:, hh, :] = s @ v[:, hh // g, :]
        x = x + out.reshape(T, -1) @ W[p + "self_attn.o_proj.weight"].T
        h = self.rms(x, W[p + "post_attention_layernorm.weight"])
        a = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        return x + ((a / (1 + np.exp(-a))) * u) @ W[p + "mlp.down_proj.weight"].T

    def hidden(self, tokens):
        x = self.W["model.embed_tokens.weight"][tokens].astype(np.float64)
        pos = np.arange(len(tokens))
        for i in range(self.c["num_hidden_layers"]):
            x = self.layer(x, f"model.layers.{i}.", pos)
        return self.rms(x, self.W["model.norm.weight"])

    def logits(self, h):
        return h @ self.W["model.embed_tokens.weight"].T.astype(np.float64)

    def mtp(self, next_tokens, hidden):
        W = self.W
        e = self.rms(W["model.embed_tokens.weight"][next_tokens].astype(np.float64), W["mtp.pre_fc_norm_embedding.weight"])
        h = self.rms(hidden, W["mtp.pre_fc_norm_hidden.weight"])
        x = np.concatenate([e, h], axis=-1) @ W["mtp.fc.weight"].T
        x = self.layer(x, "mtp.layers.0.", np.arange(len(next_tokens)))
        return self.rms(x, W["mtp.norm.weight"])


def main():
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    W, raw = read_safetensors(os.path.join(SRC, "model.safetensors"))
    m = Qwen3(W, cfg)
    gold = json.load(open(os.path.join(SRC, "logits.json")))
    tokens = gold["tokens"]
    m.bf16_inv_freq = True
    got = m.logits(m.hidden(tokens))
    m.bf16_inv_freq = False
    err = np.abs(got - np.array(gold["logits"])).max() / np.abs(np.array(gold["logits"])).max()
    assert err < 1e-5, f"numpy Qwen3 disagrees with transformers: {err}"
    print(f"numpy Qwen3 vs transformers logits: max relative error {err:.2e}")

    rng = np.random.default_rng(20261129)
    H, I, nh, nkv, hd = m.H, cfg["intermediate_size"], m.nh, m.nkv, m.hd
    shapes = {"mtp.fc.weight": (H, 2 * H), "mtp.pre_fc_norm_embedding.weight": (H,),
              "mtp.pre_fc_norm_hidden.weight": (H,), "mtp.norm.weight": (H,),
              "mtp.layers.0.input_layernorm.weight": (H,), "mtp.layers.0.post_attention_layernorm.weight": (H,),
              "mtp.layers.0.self_attn.q_proj.weight": (nh * hd, H), "mtp.layers.0.self_attn.k_proj.weight": (nkv * hd, H),
              "mtp.layers.0.self_attn.v_proj.weight": (nkv * hd, H), "mtp.layers.0.self_attn.o_proj.weight": (H, nh * hd),
              "mtp.layers.0.self_attn.q_norm.weight": (hd,), "mtp.layers.0.self_attn.k_norm.weight": (hd,),
              "mtp.layers.0.mlp.gate_proj.weight": (I, H), "mtp.layers.0.mlp.up_proj.weight": (I, H),
              "mtp.layers.0.mlp.down_proj.weight": (H, I)}
    for name, shp in shapes.items():
        a = (1.0 + 0.1 * rng.standard_normal(shp)) if len(shp) == 1 else 0.08 * rng.standard_normal(shp)
        a = a.astype(np.float32)
        W[name] = a
        raw[name] = ("F32", list(shp), a.tobytes())

    os.makedirs(OUT, exist_ok=True)
    shutil.copy(os.path.join(SRC, "config.json"), os.path.join(OUT, "config.json"))
    write_safetensors(os.path.join(OUT, "model.safetensors"), raw)
    hid = m.hidden(tokens)
    # Row i: the head at position i, fed (h_i, t_{i+1}): predicts t_{i+2}.
    mh = m.mtp(tokens[1:], hid[:-1])
    json.dump({"tokens": tokens, "hidden": hid.astype(np.float32).tolist(),
               "mtp_logits": m.logits(mh).astype(np.float32).tolist()},
              open(os.path.join(OUT, "mtp_logits.json"), "w"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
