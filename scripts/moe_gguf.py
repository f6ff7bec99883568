#!/usr/bin/env python3
"""Mixture-of-experts GGUF files of llama.cpp's `qwen3moe` architecture (Qwen3-30B-A3B,
Qwen3-Coder-30B-A3B), written with llama.cpp's own gguf-py (scripts/qwen35_gguf.py explains why not
with convert_hf_to_gguf.py: it needs PyTorch). The transforms are those of that converter's
Qwen2MoeModel / Qwen3MoeModel (conversion/qwen.py): the per-expert HF tensors
mlp.experts.N.{gate,up,down}_proj stacked into one 3-D tensor each ([E, I, H] / [E, H, I], GGUF's
ffn_{gate,up,down}_exps), the router mlp.gate as ffn_gate_inp, MoE sizes as expert_count /
expert_used_count / expert_feed_forward_length; names and keys from gguf-py.

llama.cpp's qwen3moe routes in every layer and always renormalises the top-k weights, so the tiny
model here is scripts/make_tiny_moe.py's qwen3_moe config with norm_topk_prob true and no dense
layer (as the Qwen3-30B-A3B releases are), written by make_tiny_moe's write_set (mlx-f32, hf-f32,
mlx-q4, mlx-lm goldens), under TINY_ROOT/qwen3-moe/, plus:
  gguf-f32/model.gguf    every tensor f32
  gguf-q8_0/model.gguf   the 2-D and 3-D weights in Q8_0 (gguf-py's quantizer), router and norms f32
  hf-deq-q8_0/           gguf-q8_0's weights dequantized by gguf-py as an HF f32 checkpoint, with
                         mlx-lm's goldens (the oracle of our Q8_0 expert slices)
Also make_tiny_moe.py's qwen3_5_moe (hybrid + MoE with a gated shared expert; llama.cpp's qwen35moe
computes it as transformers does) under TINY_ROOT/qwen35-moe/ with gguf-f32/model.gguf of llama.cpp's
`qwen35moe` architecture (scripts/qwen35_gguf.py's transforms; fused gate_up_proj split into
ffn_gate_exps / ffn_up_exps; shared expert as ffn_*_shexp, its gate as ffn_gate_inp_shexp).
With llama-cpp-python installed, llama.cpp's greedy output on each gguf-f32 (gguf-f32/greedy.json,
make_tiny_qwen35.py's format).

usage: .venv/bin/python scripts/moe_gguf.py [TINY_ROOT]     (default $RAPID_MODEL_CACHE/moe-gguf-tiny)
       .venv/bin/python scripts/moe_gguf.py --bench [OUT_DIR] [LAYERS]
  --bench: a Qwen3-30B-A3B-shaped model (its released config, LAYERS layers, default 6) with
  random weights and the real Qwen2/3 vocabulary (llama.cpp's ggml-vocab-qwen2.gguf test file), as
  OUT_DIR/q4_0.gguf (gguf-py's Q4_0 for every 2-D/3-D weight but the router) and, with
  llama-cpp-python installed, OUT_DIR/q4_k_m.gguf (llama.cpp's Q4_K_M of it); default
  $RAPID_MODEL_CACHE/bench/qwen3-30b-a3b-shape.
"""
import copy
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import qwen35_gguf  # noqa: E402
from qwen35_gguf import import_gguf, llama_goldens, tokenizer_from_json  # noqa: E402

CONFIG = "qwen3-moe"


def tiny_config():
    from make_tiny_moe import QWEN3_MOE
    c = copy.deepcopy(QWEN3_MOE)
    c.update(norm_topk_prob=True, mlp_only_layers=[])
    return c


def stacked_experts(weights, n_layers, n_experts):
    """The per-expert HF tensors mlp.experts.N.{gate,up,down}_proj.weight of each layer (and of an
    MTP head's layers) stacked as
    mlp.experts.{gate,up,down}_proj.weight [E, ., .] (the converter's merge); other tensors as they are."""
    out = {k: v for k, v in weights.items() if ".mlp.experts." not in k}
    # The trunk's layers and an MTP head's (mtp.layers.N, Qwen3-Next's head has routed experts).
    prefixes = [f"model.layers.{i}." for i in range(n_layers)] + sorted(
        {".".join(k.split(".")[:3]) + "." for k in weights if k.startswith("mtp.layers.")})
    for prefix in prefixes:
        for part in ("gate_proj", "up_proj", "down_proj"):
            key = f"{prefix}mlp.experts.{{}}.{part}.weight"
            if key.format(0) in weights:
                out[f"{prefix}mlp.experts.{part}.weight"] = np.stack(
                    [np.asarray(weights[key.format(e)], dtype=np.float32) for e in range(n_experts)])
    return out


def hf_to_gguf_tensors(gguf, cfg, weights):
    """(gguf name, f32 array) for each HF qwen3_moe tensor, experts stacked per layer."""
    n = cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3MOE, n)
    out = []
    for name, w in stacked_experts(weights, n, cfg["num_experts"]).items():
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        out.append((g, np.ascontiguousarray(np.asarray(w, dtype=np.float32))))
    return out


# The tiny sets' tokenizer.json splits text with GPT-2's byte-level regex (digit runs stay whole):
# their GGUFs say so, so a text prompt gets the same ids from mlx-lm (tokenizer.json), llama.cpp and
# rapid-mlx. ("qwen2" / "qwen35" split digits one by one: generated text holding "64" was a
# different prompt to mlx-lm than to the GGUF's readers.)
TINY_PRE = "gpt-2"


def keep_f32(name, a):
    """What llama.cpp's converter and quantizer leave in f32: 1-D tensors, norms, the router."""
    return a.ndim <= 1 or name.endswith("_norm.weight") or ".ffn_gate_inp." in name


def write_qwen3moe(gguf, path, cfg, tok, name, file_type, tensors, pre="qwen2"):
    """A llama.cpp qwen3moe GGUF: the metadata from the HF config dict and the tokenizer, then
    tensors as (name, array, raw GGML type or None for a plain numpy dtype)."""
    w = qwen35_gguf.start_gguf(gguf, path, "qwen3moe", name, cfg, cfg["rope_theta"])
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_file_type(file_type)
    qwen35_gguf.finish_gguf(w, path, tok, pre, tensors)


def write_gguf(path, cfg, tensors, tokenizer, out_type="f32", pre="qwen2"):
    """cfg: the HF config dict; out_type f32, q8_0, q4_0 for the 2-D/3-D weights (gguf-py's own
    quantizer; keep_f32's tensors stay f32)."""
    gguf = import_gguf()
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[out_type]
    qt = None if out_type == "f32" else getattr(gguf.GGMLQuantizationType, out_type.upper())
    items = qwen35_gguf.quantized_items(gguf, tensors, qt, lambda name, a: not keep_f32(name, a))
    write_qwen3moe(gguf, path, cfg, tokenizer, "qwen3moe-random", ftype, items, pre)


def dequantized_hf(gguf, cfg, weights, out_type):
    """The HF tensors as a GGUF of out_type holds them: each weight quantized and dequantized by
    gguf-py (per expert row, as stacked), the rest unchanged."""
    qt = getattr(gguf.GGMLQuantizationType, out_type.upper())
    out = {}
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        gname = "blk.x.ffn_gate_inp." if name.endswith("mlp.gate.weight") else name
        if w.ndim >= 2 and not keep_f32(gname, w):
            w = gguf.quants.dequantize(gguf.quants.quantize(w, qt), qt).reshape(w.shape).astype(np.float32)
        out[name] = w
    return out


def ensure_set(root, configs, seed_index, **kw):
    """make_tiny_moe's write_set of `configs` (name -> (config(), make, to_hf)) into root, unless
    every config's hf-f32/greedy.json is there (write_set replaces the whole root)."""
    from make_tiny_moe import moe_spread, write_set
    if all((root / c / "hf-f32" / "greedy.json").exists() for c in configs):
        return
    argv = sys.argv
    sys.argv = [argv[0], str(root)]
    write_set(root.name, configs, seed_index, moe_spread, **kw)
    sys.argv = argv


def gguf_copies(d, write, types=("f32", "q8_0")):
    """d/gguf-<type>/model.gguf by write(path, type) for each of `types`, each unless present."""
    for q in types:
        f = d / f"gguf-{q}" / "model.gguf"
        if not f.exists():
            write(f, q)
            print("wrote", f, flush=True)


def deq_goldens(deq, hf, weights, seed):
    """deq: the checkpoint hf (config, tokenizer) with `weights` instead (e.g. dequantized), and
    mlx-lm's goldens of it; kept if complete."""
    from safetensors.numpy import save_file
    from make_tiny_qwen35 import goldens, write_tokenizer
    if (deq / "greedy.json").exists():
        return
    tmp = deq.with_name(deq.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(hf / "config.json", tmp / "config.json")
    write_tokenizer(tmp, json.load(open(hf / "config.json"))["vocab_size"])
    goldens(tmp, seed)
    shutil.rmtree(deq, ignore_errors=True)
    tmp.rename(deq)


def qwen35_moe_tensors(gguf, tc, weights):
    """The tiny qwen3_5_moe's HF tensors (transformers 5's fused experts.gate_up_proj [E, 2I, H] and
    experts.down_proj [E, H, I]) as llama.cpp's qwen35moe GGUF tensors: gate/up split (the
    converter's Qwen2MoeModel.modify_tensors), then scripts/qwen35_gguf.py's Qwen3.5 transforms."""
    split = {}
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        if name.endswith(".mlp.experts.gate_up_proj"):
            i = w.shape[1] // 2
            split[name[: -len("gate_up_proj")] + "gate_proj.weight"] = w[:, :i]
            split[name[: -len("gate_up_proj")] + "up_proj.weight"] = w[:, i:]
        elif name.endswith(".mlp.experts.down_proj"):
            split[name + ".weight"] = w
        else:
            split[name] = w
    return qwen35_gguf.hf_to_gguf_tensors(gguf, tc, split, arch=gguf.MODEL_ARCH.QWEN35MOE)


def tiny(root):
    from safetensors.numpy import load_file
    from make_tiny_moe import CONFIGS, SEED_INDEX
    d = root / CONFIG
    _, make, to_hf = CONFIGS[CONFIG]
    # qwen35-moe: make_tiny_moe.py's own config (same seeds, so the same weights as moe-tiny's).
    ensure_set(root, {CONFIG: (tiny_config, make, to_hf), "qwen35-moe": CONFIGS["qwen35-moe"]}, SEED_INDEX)
    gguf = import_gguf()
    hf = d / "hf-f32"
    cfg = json.load(open(hf / "config.json"))
    weights = load_file(str(hf / "model.safetensors"))
    tok = tokenizer_from_json(hf / "tokenizer.json")
    tensors = hf_to_gguf_tensors(gguf, cfg, weights)
    gguf_copies(d, lambda f, q: write_gguf(f, cfg, tensors, tok, out_type=q, pre=TINY_PRE))
    if not (d / "hf-deq-q8_0" / "greedy.json").exists():
        deq_goldens(d / "hf-deq-q8_0", hf, dequantized_hf(gguf, cfg, weights, "q8_0"), 4000 + SEED_INDEX[CONFIG])
    q35 = root / "qwen35-moe"
    f = q35 / "gguf-f32" / "model.gguf"
    if not f.exists():
        hf35 = q35 / "hf-f32"
        tc = json.load(open(hf35 / "config.json"))["text_config"]
        tensors = qwen35_moe_tensors(gguf, tc, load_file(str(hf35 / "model.safetensors")))
        qwen35_gguf.write_gguf(f, tc, tensors, tokenizer_from_json(hf35 / "tokenizer.json"), arch="qwen35moe",
                               pre=TINY_PRE)
        print("wrote", f, flush=True)
    for c in (CONFIG, "qwen35-moe"):
        llama_goldens(root / c / "gguf-f32", root / c / "hf-f32" / "greedy.json")


# Qwen/Qwen3-30B-A3B's config.json (Qwen3-Coder-30B-A3B-Instruct has the same shapes), 48 layers.
QWEN3_30B_A3B = {
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48,
    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "max_position_embeddings": 40960, "num_experts": 128, "num_experts_per_tok": 8,
    "moe_intermediate_size": 768, "norm_topk_prob": True, "tie_word_embeddings": False,
}


def vocab_tokenizer(gguf, size=None):
    """The Qwen2/3 byte-level BPE vocabulary of llama.cpp's ggml-vocab-qwen2.gguf test file (from the
    pinned sdist), padded to the model's 151936 rows (or `size`) as the Qwen3 GGUF releases are."""
    dst = Path(qwen35_gguf.sdist_dir()) / "vocab" / "ggml-vocab-qwen2.gguf"
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(qwen35_gguf.sdist_path()) as tar:
            m = tar.getmember(qwen35_gguf.VENDOR + "models/ggml-vocab-qwen2.gguf")
            with tar.extractfile(m) as src, open(str(dst) + ".part", "wb") as f:
                f.write(src.read())
        os.replace(str(dst) + ".part", dst)
    tok = qwen35_gguf.tokenizer_from_gguf(gguf, dst)
    tok["tokens"] = list(tok["tokens"])
    tok["types"] = list(tok["types"])
    for i in range(len(tok["tokens"]), size or QWEN3_30B_A3B["vocab_size"]):
        tok["tokens"].append(f"[PAD{i}]")
        tok["types"].append(4)  # user-defined, as llama.cpp's converter pads
    return tok


def bench_tensors(cfg, seed=0):
    """Random HF-layout-equivalent GGUF tensors of cfg, generated one at a time (f32 arrays of the
    stacked experts are 0.8 GB each), scaled so activations stay finite."""
    rng = np.random.default_rng(seed)
    H, V, E, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_experts"], cfg["moe_intermediate_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]

    def mat(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[-1]))

    yield "token_embd.weight", lambda: mat(V, H)
    yield "output_norm.weight", lambda: np.ones(H, np.float32)
    yield "output.weight", lambda: mat(V, H)
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", lambda: np.ones(H, np.float32)
        yield b + "ffn_norm.weight", lambda: np.ones(H, np.float32)
        yield b + "attn_q.weight", lambda: mat(nh * hd, H)
        yield b + "attn_k.weight", lambda: mat(nkv * hd, H)
        yield b + "attn_v.weight", lambda: mat(nkv * hd, H)
        yield b + "attn_output.weight", lambda: mat(H, nh * hd)
        yield b + "attn_q_norm.weight", lambda: np.ones(hd, np.float32)
        yield b + "attn_k_norm.weight", lambda: np.ones(hd, np.float32)
        yield b + "ffn_gate_inp.weight", lambda: mat(E, H) * np.float32(4.0)  # decisive routing
        yield b + "ffn_gate_exps.weight", lambda: mat(E, I, H)
        yield b + "ffn_up_exps.weight", lambda: mat(E, I, H)
        yield b + "ffn_down_exps.weight", lambda: mat(E, H, I)


def bench(out, layers):
    bench_q4_0(out / "q4_0.gguf", layers)
    # Q4_K_M, the type of the released Qwen3-30B-A3B GGUFs, by llama.cpp's own quantizer (its mix:
    # Q4_K with Q6_K for some ffn_down / attn_v / output), requantized from the Q4_0 file.
    f = out / "q4_k_m.gguf"
    if f.exists():
        print("exists", f)
        return
    try:
        import llama_cpp
    except ImportError:
        print("llama-cpp-python not installed: no", f, flush=True)
        return
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    p.allow_requantize = True
    p.nthread = 2
    tmp = str(f) + ".part"
    if llama_cpp.llama_model_quantize(str(out / "q4_0.gguf").encode(), tmp.encode(), p) != 0:
        raise SystemExit(f"llama_model_quantize -> {f} failed")
    os.replace(tmp, f)
    print("wrote", f, flush=True)


def bench_q4_0(f, layers):
    gguf = import_gguf()
    cfg = dict(QWEN3_30B_A3B, num_hidden_layers=layers)
    if f.exists():
        print("exists", f)
        return
    tok = vocab_tokenizer(gguf)
    # gguf-py's writer keeps every added tensor until written: quantize each as it is made (Q4_0
    # is 0.56 bytes a weight) so only one f32 tensor is alive at a time.
    tensors = []
    for name, make in bench_tensors(cfg):
        a = make()
        if keep_f32(name, a):
            tensors.append((name, a))
        else:
            tensors.append((name, (gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q4_0), a.shape)))
        print("made", name, flush=True)
    write_bench(f, cfg, tensors, tok, gguf)
    print("wrote", f, flush=True)


def write_bench(path, cfg, tensors, tok, gguf):
    """tensors: (name, array) kept as is, or (name, (Q4_0 bytes,)) already quantized."""
    items = ((n, a[0], gguf.GGMLQuantizationType.Q4_0) if isinstance(a, tuple) else (n, a, None) for n, a in tensors)
    write_qwen3moe(gguf, path, cfg, tok, "qwen3-30b-a3b-shape-random", gguf.LlamaFileType.MOSTLY_Q4_0, items)


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    args = sys.argv[1:]
    if args[:1] == ["--bench"]:
        bench(Path(args[1] if len(args) > 1 else os.path.join(cache, "bench", "qwen3-30b-a3b-shape")),
              int(args[2]) if len(args) > 2 else 6)
    else:
        tiny(Path(args[0] if args else os.path.join(cache, "moe-gguf-tiny")))
