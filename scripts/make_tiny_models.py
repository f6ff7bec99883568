#!/usr/bin/env python3
"""Generates tiny random checkpoints and reference outputs for the model tests (run with .venv-oracle).

  .venv-oracle/bin/python scripts/make_tiny_models.py [--only llama]

Writes tests/golden/tiny/<arch>/ (HF safetensors + config.json + generation_config.json +
logits.json = transformers' logits for a fixed token sequence), and GGUF variants
tests/golden/tiny/<arch>-<qtype>.gguf (written like llama.cpp's converter: GGUF names, Q/K rows
permuted for llama) with <arch>-<qtype>.logits.json computed by transformers from the GGUF itself
(or, where transformers cannot load the file, by mlx-lm on its weights dequantized by gguf-py;
--gguf-goldens-only rewrites just these from the committed files, in .venv without torch).
Everything is seeded, so re-running reproduces the same files.
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tiny")
VOCAB = 256
TOKENS = [1, 17, 42, 99, 3, 250, 128, 7, 64, 5, 200, 31]


def common_kwargs():
    return dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)


def build(arch):
    import torch
    import transformers as tf
    torch.manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3, "gemma3": 4}[arch])
    kw = common_kwargs()
    if arch == "llama":
        cfg = tf.LlamaConfig(**kw, head_dim=16, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
        model = tf.LlamaForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**kw, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        model = tf.Qwen2ForCausalLM(cfg)
    elif arch == "qwen3":
        cfg = tf.Qwen3Config(**kw, head_dim=32, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        model = tf.Qwen3ForCausalLM(cfg)
    elif arch == "gemma3":
        kw.update(bos_token_id=2, eos_token_id=[1, 106], pad_token_id=0)
        cfg = tf.Gemma3TextConfig(**kw, head_dim=32, query_pre_attn_scalar=32, sliding_window=4,
                                  layer_types=["sliding_attention", "full_attention"],
                                  rope_parameters={
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                      "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                                  tie_word_embeddings=True)
        model = tf.Gemma3ForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown arch {arch}")
    # Random init gives tiny weights (std 0.02) that make every logit ~0; widen them so the tests
    # see real differences, and give norms non-trivial weights so a skipped norm is detected.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn_like(p) * 0.1 + (0.0 if arch == "gemma3" else 1.0))
            else:
                p.copy_(torch.randn_like(p) * (1.0 / p.shape[-1] ** 0.5))
    model.eval()
    return model


def logits_of(model):
    import torch
    with torch.no_grad():
        out = model(torch.tensor([TOKENS])).logits[0].float().numpy()
    return out


def save_logits(path, logits, note):
    with open(path, "w") as f:
        json.dump({"note": note, "tokens": TOKENS,
                   "logits": [[float(f"{v:.7g}") for v in row] for row in logits]}, f)


def make_hf(arch):
    import torch
    model = build(arch)
    d = os.path.join(OUT, arch)
    os.makedirs(d, exist_ok=True)
    if arch != "llama":
        # bf16 on disk keeps the goldens small and exercises BF16 loading; logits come from the
        # f32 model holding exactly the bf16-rounded weights.
        model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
        model.float()
    else:
        model.save_pretrained(d, safe_serialization=True)
    os.chmod(os.path.join(d, "model.safetensors"), 0o644)
    for junk in ("model.safetensors.index.json",):
        if os.path.exists(os.path.join(d, junk)):
            os.remove(os.path.join(d, junk))
    save_logits(os.path.join(d, "logits.json"), logits_of(model),
                f"transformers {__import__('transformers').__version__} float32 logits, all positions")
    print("wrote", d)
    return model


# ---- GGUF (as llama.cpp's convert_hf_to_gguf.py lays it out) ----

def gguf_name(hf):
    import re
    m = re.match(r"model\.layers\.(\d+)\.(.*)", hf)
    table = {
        "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm", "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm", "pre_feedforward_layernorm": "ffn_norm",
        "post_feedforward_layernorm": "post_ffw_norm",
    }
    if m:
        rest = m.group(2)
        base, suffix = rest.rsplit(".", 1)
        return f"blk.{m.group(1)}.{table[base]}.{suffix}"
    return {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"}[hf]


def gemma3_post_attn_name(arch, hf):
    # gemma3: post_attention_layernorm is a real post-attention norm (GGUF post_attention_norm).
    if arch == "gemma3" and hf.endswith("post_attention_layernorm.weight"):
        return hf.replace("model.layers.", "blk.").replace("post_attention_layernorm", "post_attention_norm")
    return None


def llama_permute(w, n_head):
    # Same row reordering as llama.cpp's LlamaModel.permute (interleaved RoPE pairs).
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def make_gguf(arch, model, qtype_name):
    import gguf
    from gguf import GGMLQuantizationType as T
    qtype = T[qtype_name]
    cfg = model.config
    path = os.path.join(OUT, f"{arch}-{qtype_name.lower()}.gguf")
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny-{arch}")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    rp = cfg.rope_parameters
    w.add_rope_freq_base((rp.get("full_attention", rp))["rope_theta"])
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_key_length(hd)
    w.add_value_length(hd)
    if arch == "gemma3":
        w.add_sliding_window(cfg.sliding_window)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q8_0 if qtype == T.Q8_0 else gguf.LlamaFileType.MOSTLY_Q4_0))
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(VOCAB)])
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([1] * VOCAB)
    w.add_bos_token_id(cfg.bos_token_id)
    eos = cfg.eos_token_id
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    for hf, t in model.state_dict().items():
        if hf == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        a = t.float().numpy()
        if arch == "llama" and hf.endswith("q_proj.weight"):
            a = llama_permute(a, cfg.num_attention_heads)
        if arch == "llama" and hf.endswith("k_proj.weight"):
            a = llama_permute(a, cfg.num_key_value_heads)
        if arch == "gemma3" and hf.endswith("norm.weight"):
            a = a + 1.0  # llama.cpp's Gemma converters store RMSNorm weights as 1 + w
        name = gemma3_post_attn_name(arch, hf) or gguf_name(hf)
        if a.ndim == 2 and a.shape[1] % 32 == 0:
            q = gguf.quants.quantize(a, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
        else:
            w.add_tensor(name, a.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", path)
    return path


def gguf_logits(path, arch):
    import torch
    import transformers as tf
    m = tf.AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                dtype=torch.float32)
    m.eval()
    return logits_of(m)


def file_weight_logits(path, arch):
    """mlx-lm's float32 logits of `arch` holding the GGUF's own weights, dequantized by llama.cpp's
    gguf-py (where transformers' GGUF loader cannot read the file; needs no torch: .venv has both)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import load_model
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from qwen35_gguf import import_gguf
    gguf = import_gguf()
    from pathlib import Path
    model, _ = load_model(Path(OUT) / arch)
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    weights = []
    for name, p in tree_flatten(model.parameters()):
        t = tensors[gemma3_post_attn_name(arch, name) or gguf_name(name)]
        a = gguf.quants.dequantize(t.data, t.tensor_type).reshape(p.shape)
        weights.append((name, mx.array(np.ascontiguousarray(a, dtype=np.float32))))
    model.load_weights(weights, strict=True)
    return np.array(model(mx.array([TOKENS]))[0].astype(mx.float32))


def write_gguf_golden(path, arch):
    out = path[:-len(".gguf")] + ".logits.json"
    try:
        save_logits(out, gguf_logits(path, arch), "transformers logits of the model loaded from this GGUF (gguf_file=)")
    except Exception as e:  # transformers 5's GGUF loader ignores qwen3.attention.key_length
        print(f"transformers cannot load {path} ({e}); mlx-lm on its weights instead", file=sys.stderr)
        save_logits(out, file_weight_logits(path, arch),
                    "mlx-lm float32 logits of the model holding this GGUF's weights, dequantized by gguf-py")
    print("wrote", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=["llama", "qwen2", "qwen3", "gemma3"])
    ap.add_argument("--no-gguf", action="store_true")
    ap.add_argument("--gguf-goldens-only", action="store_true",
                    help="only the GGUF files' logits goldens, from the committed files")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.gguf_goldens_only:
        for arch, qt in (("llama", "q8_0"), ("qwen3", "q4_0")):
            if arch in args.only:
                write_gguf_golden(os.path.join(OUT, f"{arch}-{qt}.gguf"), arch)
        return
    for arch in args.only:
        model = make_hf(arch)
        if args.no_gguf or arch not in ("llama", "qwen3"):
            continue
        qt = {"llama": "Q8_0", "qwen3": "Q4_0"}[arch]
        write_gguf_golden(make_gguf(arch, model, qt), arch)


if __name__ == "__main__":
    main()
