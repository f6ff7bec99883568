#!/usr/bin/env python3
"""Devstral Small 2 / Ministral 3 as GGUF files of llama.cpp's `mistral3` architecture, written with
llama.cpp's own gguf-py (scripts/qwen35_gguf.py explains why not with convert_hf_to_gguf.py: it
needs PyTorch). The transforms and keys are those of that converter's Mistral3Model /
Ministral3Model (conversion/mistral3.py, a LlamaModel): the language model of a mistral3 wrapper
(model.language_model.*; the vision tower and projector left out, as for a text-only file), Q and
K rows permuted per head into RoPE pair order (LlamaModel.permute; k with the KV head count),
TextModel's YaRN keys (rope.scaling.type yarn, factor, original_context_length, yarn_beta_fast /
slow), vocab_size and rope.dimension_count (LlamaModel), then mistral3's own:
rope.scaling.yarn_log_multiplier = mscale_all_dim and attention.temperature_scale =
llama_4_scaling_beta. The vocabulary is the tiny model's byte-level BPE (tokenizer.json) as the
converter writes a tokenizer.json beside tekken.json: tokenizer.ggml.model gpt2, pre "tekken",
<s> / </s> as bos / eos (add_bos_token true, as llama.cpp defaults for tekken), the control tokens
typed 3; devstral also carries Devstral's chat template (tokenizer.chat_template) when the fixture
is there.

From scripts/make_tiny_mistral3.py's set (devstral: the mistral3 wrapper, own lm_head, mscale_all_dim
1, beta 0.1; ministral3: text only, tied, mscale_all_dim 0.5, beta 0.2) writes under
TINY_ROOT/<config>/:
  gguf-f32/model.gguf    every tensor f32
  gguf-q8_0/model.gguf   the 2-D weights in Q8_0 by gguf-py's quantizer (norms f32)
  gguf-q4_k/model.gguf   llama.cpp's own llama_model_quantize of the f32 file to MOSTLY_Q4_K_M (it
                         falls back to other types for rows not a multiple of 256, as here)
  hf-deq-{q8_0,q4_k}/    those files' weights dequantized by gguf-py, Q/K rows back in HF order, as
                         an HF checkpoint with mlx-lm's goldens (the oracle of our exact-path run of
                         the quantized files)
  gguf-f32/greedy.json   llama-cpp-python's greedy output on the prompts of hf-f32/greedy.json

usage: .venv/bin/python scripts/mistral3_gguf.py [TINY_ROOT]  (default $RAPID_MODEL_CACHE/mistral3-tiny)
Files already present are kept (delete one to regenerate it).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from qwen35_gguf import import_gguf, llama_goldens, quantize, quantized_items, start_gguf, write_file  # noqa: E402

CONFIGS = ["devstral", "ministral3"]
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))
TEMPLATE = FIX / "chat-templates" / "unsloth-mistral-Devstral-Small-2507.jinja"


def permute(w, n_head):
    """HF rows of each head [x0..x(d/2-1), y0..] -> pairs [x0, y0, x1, y1, ..] (LlamaModel.permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_to_gguf_tensors(gguf, tc, weights):
    """(gguf name, f32 array) for each language-model tensor of the HF checkpoint."""
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MISTRAL3, tc["num_hidden_layers"])
    out = []
    for name, w in weights.items():
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        if name.startswith("model.vision_tower.") or name.startswith("model.multi_modal_projector."):
            continue
        w = np.asarray(w, dtype=np.float32)
        if name.endswith("self_attn.q_proj.weight"):
            w = permute(w, tc["num_attention_heads"])
        elif name.endswith("self_attn.k_proj.weight"):
            w = permute(w, tc["num_key_value_heads"])
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        out.append((g, np.ascontiguousarray(w)))
    return out


def dequantized_hf(gguf, tc, weights, path):
    """The HF tensors of `weights` as the GGUF at `path` holds them (gguf-py's dequantizer), Q/K
    rows put back in HF order (a permutation of whole rows: the blocks are unchanged); the vision
    tower and projector, which the file lacks, as they were."""
    from glm_gguf import read_dequantized
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MISTRAL3, tc["num_hidden_layers"])
    g = read_dequantized(path)
    out = {}
    for name, w in weights.items():
        lm = "model." + name[len("model.language_model."):] if name.startswith("model.language_model.") else name
        gname = names.get_name(lm, try_suffixes=(".weight", ".bias"))
        if gname is None or gname not in g:
            out[name] = np.asarray(w, dtype=np.float32)
            continue
        a = g[gname]
        for suffix, heads in (("q_proj.weight", tc["num_attention_heads"]), ("k_proj.weight", tc["num_key_value_heads"])):
            if name.endswith("self_attn." + suffix):  # inverse of permute: pairs back to halves
                a = a.reshape(heads, a.shape[0] // heads // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        assert a.shape == tuple(w.shape), (name, a.shape, w.shape)
        out[name] = np.ascontiguousarray(a)
    return out


def deq_goldens(deq, hf, weights, seed):
    """deq: the checkpoint hf (config, tokenizer files) with `weights` instead, and mlx-lm's goldens
    of it (make_tiny_qwen35's format); kept if complete."""
    import shutil
    from safetensors.numpy import save_file
    from make_tiny_qwen35 import goldens
    if (deq / "greedy.json").exists():
        return
    tmp = deq.with_name(deq.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(hf / f, tmp / f)
    goldens(tmp, seed)
    shutil.rmtree(deq, ignore_errors=True)
    tmp.rename(deq)
    print("wrote", deq, flush=True)


def tokenizer_from_json(p):
    """The tiny model's byte-level BPE in GGUF form; added (control) tokens typed 3."""
    t = json.load(open(p))
    vocab = dict(t["model"]["vocab"])
    for a in t.get("added_tokens", []):
        vocab[a["content"]] = a["id"]
    tokens = [None] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        tokens[i] = s
    special = {a["id"] for a in t.get("added_tokens", []) if a.get("special")}
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    return {"tokens": tokens, "types": [3 if i in special else 1 for i in range(len(tokens))], "merges": merges}


def write_gguf(path, tc, tensors, tok, out_type="f32", template=None, extra=None):
    """extra(writer): more metadata (tests write malformed files with it)."""
    gguf = import_gguf()
    rp = tc["rope_parameters"]
    w = start_gguf(gguf, path, "mistral3", "mistral3-random", tc, rp["rope_theta"])
    if extra:
        extra(w)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rp["factor"])
    w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rp["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rp["beta_slow"])
    w.add_vocab_size(tc["vocab_size"])
    w.add_rope_dimension_count(tc.get("head_dim") or tc["hidden_size"] // tc["num_attention_heads"])
    w.add_rope_scaling_yarn_log_mul(rp["mscale_all_dim"])
    w.add_attn_temperature_scale(rp["llama_4_scaling_beta"])
    qt = {"f32": None, "q8_0": gguf.GGMLQuantizationType.Q8_0}[out_type]
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qt is None else gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("tekken")
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_bos_token_id(tc["bos_token_id"])
    w.add_eos_token_id(tc["eos_token_id"])
    w.add_pad_token_id(tc["pad_token_id"])
    w.add_add_bos_token(True)
    if template:
        w.add_chat_template(template)
    write_file(w, path, quantized_items(gguf, tensors, qt, lambda n, a: a.ndim >= 2))
    print("wrote", path, flush=True)


def tiny(root):
    from safetensors.numpy import load_file
    if not all((root / c / "hf-f32" / "greedy.json").exists() for c in CONFIGS):
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_mistral3.py"), str(root)], check=True)
    gguf = import_gguf()
    for c in CONFIGS:
        d, hf = root / c, root / c / "hf-f32"
        cfg = json.load(open(hf / "config.json"))
        tc = cfg.get("text_config", cfg)
        tensors = hf_to_gguf_tensors(gguf, tc, load_file(str(hf / "model.safetensors")))
        tok = tokenizer_from_json(hf / "tokenizer.json")
        template = TEMPLATE.read_text() if c == "devstral" and TEMPLATE.exists() else None
        for q in ("f32", "q8_0"):
            f = d / f"gguf-{q}" / "model.gguf"
            if not f.exists():
                write_gguf(f, tc, tensors, tok, q, template)
        q4 = d / "gguf-q4_k" / "model.gguf"
        if not q4.exists():
            try:
                import llama_cpp  # noqa: F401
                q4.parent.mkdir(parents=True, exist_ok=True)
                quantize(d / "gguf-f32" / "model.gguf", q4, "MOSTLY_Q4_K_M")
                print("wrote", q4, flush=True)
            except ImportError:
                print("llama-cpp-python not installed: no", q4, flush=True)
        weights = load_file(str(hf / "model.safetensors"))
        for q, seed in (("q8_0", 6001), ("q4_k", 6002)):
            if (d / f"gguf-{q}" / "model.gguf").exists():
                deq_goldens(d / f"hf-deq-{q}", hf, dequantized_hf(gguf, tc, weights, d / f"gguf-{q}" / "model.gguf"),
                            seed + 10 * CONFIGS.index(c))
        llama_goldens(d / "gguf-f32", hf / "greedy.json")


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    tiny(Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "mistral3-tiny")))
