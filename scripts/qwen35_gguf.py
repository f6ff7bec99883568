#!/usr/bin/env python3
"""Qwen3.5 (Gated DeltaNet hybrid) GGUF files of llama.cpp's `qwen35` architecture, written with
llama.cpp's own gguf-py (from the pinned llama-cpp-python sdist, tests/python/llamacpp_sdist.py).

llama.cpp's convert_hf_to_gguf.py needs PyTorch, which this environment cannot install (PyPI only
has the CUDA build, gigabytes of nvidia-* wheels; the CPU wheels live on PyTorch's own index). So
this script applies the transforms that converter's Qwen3_5TextModel (conversion/qwen.py) applies
to the Hugging Face tensors, on numpy arrays, and takes every tensor name and metadata key from
gguf-py (TensorNameMap, GGUFWriter): A_log -> A = -exp(A_log), dt_bias -> ssm_dt.bias, conv1d
squeezed to [C, K], (1 + w) RMSNorm offsets folded (all but the gated DeltaNet norm), value heads
reordered from grouped-by-key-head to tiled when linear_num_value_heads > linear_num_key_heads,
1-D tensors, norms and conv1d kept f32. llama.cpp running the file (tests/python/test_qwen35_gguf.py
checks it against mlx-lm on the same weights) is what confirms the layout.

usage: .venv/bin/python scripts/qwen35_gguf.py [TINY_ROOT]
       .venv/bin/python scripts/qwen35_gguf.py --bench|--bench-mtp [OUT_DIR]
  --bench: a Qwen3.5-0.8B-shaped model with random weights (QWEN35_08B, the released text config)
  and the real Qwen3.5 vocabulary (llama.cpp's ggml-vocab-qwen35.gguf test file) as OUT_DIR/q8_0.gguf
  and q4_0.gguf (gguf-py's quantizer, every 2-D weight in that type), and with llama-cpp-python
  q5_k_m.gguf and iq4_xs.gguf (llama.cpp's quantizer, from q8_0.gguf); default
  $RAPID_MODEL_CACHE/bench/qwen3.5-0.8b-shape. --bench-mtp: also q4_0-mtp.gguf, the same trunk
  with a random MTP head of the released shape (for bench/qwen35_spec_bench.cpp).
  Without --bench: for each tiny model (scripts/make_tiny_qwen35.py) writes
  TINY_ROOT/<config>/gguf-f32/model.gguf and, with llama-cpp-python installed, gguf-q8_0/model.gguf
  (llama.cpp's own llama_model_quantize of the f32 file) and in each a greedy.json of
  llama-cpp-python's greedy output on the prompts of hf-f32/greedy.json (the format of
  make_tiny_qwen35.py's goldens, read by tests/model_qwen35_gguf_test.cpp), and
  gguf-q8_0/teacher_forced.json: llama.cpp's Q8_0 logits (full rows) teacher-forced on those
  prompts + the f32 greedy tokens, with llama.cpp's own Q8_0-vs-f32 gap on them
  (llama_teacher_forced). Files already present are kept (delete one to regenerate it).
"""
import json
import os
import sys
import tarfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from llamacpp_sdist import VENDOR, sdist_dir, sdist_path  # noqa: E402

STEPS = 64
TOPN = 8


def import_gguf():
    """gguf-py of the pinned llama.cpp, extracted once next to the sdist."""
    dst = Path(sdist_dir()) / "gguf-py-0.3.36"
    if not (dst / "gguf" / "__init__.py").exists():
        prefix = VENDOR + "gguf-py/"
        tmp = dst.with_name(dst.name + ".part")
        with tarfile.open(sdist_path()) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            for m in members:
                out = tmp / m.name[len(prefix):]
                out.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(m) as src, open(out, "wb") as f:
                    f.write(src.read())
        tmp.rename(dst)
    sys.path.insert(0, str(dst))
    import gguf
    return gguf


def tiled(x, axis, k_heads, per_k, head_dim):
    """Value heads grouped by key head [K0v0 K0v1 .. K1v0 ..] -> tiled [K0v0 K1v0 .. K0v1 ..]."""
    shape = list(x.shape)
    x = x.reshape(shape[:axis] + [k_heads, per_k, head_dim] + shape[axis + 1:])
    return np.swapaxes(x, axis, axis + 1).reshape(shape)


def mtp_layer_count(weights):
    """How many mtp.layers.N the weights hold (the released Qwen3.5 checkpoints: one)."""
    return len({k.split(".")[2] for k in weights if k.startswith("mtp.layers.")})


# The converter's renaming of the MTP head (its _QwenMtpMixin): the head's own tensors become layer
# n (the first block after the trunk) under llama.cpp's nextn names.
MTP_RENAMES = {"mtp.fc.": "eh_proj.", "mtp.pre_fc_norm_embedding.": "enorm.", "mtp.pre_fc_norm_hidden.": "hnorm.",
               "mtp.norm.": "shared_head.norm."}


def mtp_to_layer_name(name, n):
    """mtp.layers.i.X -> model.layers.<n+i>.X; mtp.fc / the head's norms -> model.layers.<n>.<nextn part>."""
    if name.startswith("mtp.layers."):
        _, _, i, rest = name.split(".", 3)
        return f"model.layers.{n + int(i)}.{rest}"
    for hf, nextn in MTP_RENAMES.items():
        if name.startswith(hf):
            return f"model.layers.{n}.{nextn}{name[len(hf):]}"
    raise SystemExit(f"no GGUF name for {name}")


def hf_to_gguf_tensors(gguf, tc, weights, arch=None, tile=True, mtp=False):
    """(gguf name, f32 array) for each HF tensor, as llama.cpp's converter writes them (arch:
    gguf.MODEL_ARCH.QWEN35 by default; scripts/moe_gguf.py passes QWEN35MOE with the experts
    already stacked per layer as mlp.experts.{gate,up,down}_proj.weight, scripts/qwen3next_gguf.py
    QWEN3NEXT with tile False: qwen3next keeps the value heads grouped by key head). mtp: the `mtp.*` head as
    well, as the converter writes it without --no-mtp (blocks after the trunk, nextn names; the
    file then needs write_gguf's n_mtp)."""
    n = tc["num_hidden_layers"]
    n_mtp = mtp_layer_count(weights) if mtp else 0
    names = gguf.get_tensor_name_map(arch if arch is not None else gguf.MODEL_ARCH.QWEN35, n + n_mtp)
    hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv = tc["linear_key_head_dim"], tc["linear_value_head_dim"]
    per_k = hv // hk
    out = []
    for name, w in weights.items():
        w = np.asarray(w, dtype=np.float32)
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        if name.startswith("model.visual.") or (name.startswith("mtp.") and not mtp):
            continue
        if name.startswith("mtp."):
            name = mtp_to_layer_name(name, n)
        if name.endswith(".A_log"):
            w = -np.exp(w)
        elif name.endswith(".dt_bias"):
            name = name[: -len(".dt_bias")] + ".dt_proj.bias"
        elif "conv1d" in name:
            w = w.squeeze()
        elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            w = w + 1.0
        if tile and per_k > 1 and "linear_attn." in name:
            if ".in_proj_qkv." in name:
                w = np.concatenate([w[: 2 * hk * dk], tiled(w[2 * hk * dk:], 0, hk, per_k, dv)])
            elif ".in_proj_z." in name:
                w = tiled(w, 0, hk, per_k, dv)
            elif ".in_proj_a." in name or ".in_proj_b." in name or ".A_log" in name or ".dt_proj" in name:
                w = tiled(w, 0, hk, per_k, 1)
            elif ".conv1d" in name:
                w = np.concatenate([w[: 2 * hk * dk], tiled(w[2 * hk * dk:], 0, hk, per_k, dv)])
            elif ".out_proj." in name:
                w = tiled(w, 1, hk, per_k, dv)
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        out.append((g, np.ascontiguousarray(w)))
    return out


def write_gguf(path, tc, tensors, tokenizer, out_type="f32", arch="qwen35", pre="qwen35", n_mtp=0):
    """tc: the text_config dict; tensors from hf_to_gguf_tensors; tokenizer: dict with tokens,
    merges, eos_token_id. out_type f32, f16, q8_0 or q4_0 for the 2-D weights (gguf-py's own
    quantizer, every 2-D weight including token_embd); the rest f32 as the converter does.
    arch "qwen35moe" adds the MoE keys of tc (num_experts, ...). n_mtp: MTP blocks among the
    tensors (hf_to_gguf_tensors(mtp=True)), counted in block_count as the converter does."""
    gguf = import_gguf()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path) + ".part", arch)
    if arch == "qwen35moe":
        w.add_expert_count(tc["num_experts"])
        w.add_expert_used_count(tc["num_experts_per_tok"])
        w.add_expert_feed_forward_length(tc["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(tc["shared_expert_intermediate_size"])
    n = tc["num_hidden_layers"]
    head_dim = tc.get("head_dim") or tc["hidden_size"] // tc["num_attention_heads"]
    rp = tc.get("rope_parameters", {})
    w.add_name("qwen35-random")
    w.add_block_count(n + n_mtp)
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)
    w.add_context_length(tc.get("max_position_embeddings", 4096))
    w.add_embedding_length(tc["hidden_size"])
    w.add_feed_forward_length(tc["intermediate_size"])
    w.add_head_count(tc["num_attention_heads"])
    w.add_head_count_kv(tc["num_key_value_heads"])
    w.add_rope_dimension_sections(list(rp.get("mrope_section", [11, 11, 10])) + [0])
    w.add_rope_freq_base(rp.get("rope_theta", 10000000.0))
    w.add_layer_norm_rms_eps(tc["rms_norm_eps"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[out_type]
    w.add_file_type(ftype)
    w.add_ssm_conv_kernel(tc["linear_conv_kernel_dim"])
    w.add_ssm_state_size(tc["linear_key_head_dim"])
    w.add_ssm_group_count(tc["linear_num_key_heads"])
    w.add_ssm_time_step_rank(tc["linear_num_value_heads"])
    w.add_ssm_inner_size(tc["linear_value_head_dim"] * tc["linear_num_value_heads"])
    every = tc.get("full_attention_interval", 4)
    types = tc.get("layer_types") or ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    w.add_recurrent_layers([t == "linear_attention" for t in types] + [False] * n_mtp)
    w.add_full_attention_interval(every)
    w.add_rope_dimension_count(int(head_dim * rp.get("partial_rotary_factor", 0.25)))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    # llama.cpp takes the vocabulary size from the token list and refuses an embedding with more
    # rows: like its converter, pad the list to vocab_size with unused [PAD<id>] tokens.
    tokens, types = list(tokenizer["tokens"]), list(tokenizer["types"])
    for i in range(len(tokens), tc["vocab_size"]):
        tokens.append(f"[PAD{i}]")
        types.append(int(gguf.TokenType.UNUSED))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(tokenizer["merges"])
    w.add_eos_token_id(tokenizer["eos_token_id"])
    w.add_add_bos_token(False)
    for name, a in tensors:
        keep_f32 = a.ndim <= 1 or name.endswith("_norm.weight") or ".ssm_conv1d." in name or not name.endswith(".weight")
        if out_type == "f16" and not keep_f32:
            w.add_tensor(name, a.astype(np.float16))
        elif out_type in ("q8_0", "q4_0") and not keep_f32:
            qt = getattr(gguf.GGMLQuantizationType, out_type.upper())
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, a.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(str(path) + ".part", path)


def tokenizer_from_json(p):
    """The byte-level BPE vocabulary of a tokenizer.json in GGUF form."""
    t = json.load(open(p))
    vocab = t["model"]["vocab"]
    for a in t.get("added_tokens", []):
        vocab[a["content"]] = a["id"]
    tokens = [None] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        tokens[i] = s
    special = {a["id"] for a in t.get("added_tokens", []) if a.get("special")}
    types = [3 if i in special else 1 for i in range(len(tokens))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    eos = next(a["id"] for a in t.get("added_tokens", []) if a["content"] == "<|endoftext|>")
    return {"tokens": tokens, "types": types, "merges": merges, "eos_token_id": eos}


def llama(path, n_ctx=512, n_threads=2):
    """llama-cpp-python on a GGUF: all logits kept (scores), f32 KV cache, no extra buffer types
    (llama-cpp-python 0.3.36 crashes on Intel AMX machines with them; Llama() has no argument for
    it, so the model defaults it reads are patched)."""
    import llama_cpp.llama_cpp as lcpp
    from llama_cpp import Llama
    defaults = lcpp.llama_model_default_params
    if not getattr(defaults, "no_extra_bufts", False):
        def no_extra_bufts():
            p = defaults()
            p.use_extra_bufts = False
            return p
        no_extra_bufts.no_extra_bufts = True
        lcpp.llama_model_default_params = no_extra_bufts
    return Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, verbose=False,
                 logits_all=True, seed=0, type_k=lcpp.GGML_TYPE_F32, type_v=lcpp.GGML_TYPE_F32)


def llama_greedy(model_path, golden_ref, out_path):
    """llama-cpp-python's greedy output on golden_ref's prompts (prompt in one eval, then one token
    per eval), in make_tiny_qwen35.py's greedy.json format."""
    import llama_cpp
    ref = json.load(open(golden_ref))
    probe = ref["probe_ids"]
    lm = llama(model_path)
    cases = []
    for c in ref["cases"]:
        lm.reset()
        lm.eval(c["prompt_ids"])
        steps = []
        for _ in range(len(c["steps"])):
            logits = np.array(lm.scores[lm.n_tokens - 1], dtype=np.float64)
            nxt = int(np.argmax(logits))
            top = np.argsort(-logits, kind="stable")[:TOPN]
            steps.append({"token": nxt, "max_abs_logit": float(np.max(np.abs(logits))),
                          "top_ids": [int(i) for i in top], "top_logits": [float(logits[i]) for i in top],
                          "probe_logits": [float(logits[i]) for i in probe]})
            lm.eval([nxt])
        cases.append({"prompt": c["prompt"], "prompt_ids": c["prompt_ids"], "steps": steps})
    g = {"model": str(model_path), "generator": "llama-cpp-python " + llama_cpp.__version__, "probe_ids": probe,
         "cases": cases}
    with open(str(out_path) + ".part", "w") as f:
        json.dump(g, f, separators=(",", ":"))
    os.replace(str(out_path) + ".part", out_path)


def llama_goldens(model_dir, golden_ref):
    """model_dir/greedy.json: llama_greedy on model_dir/model.gguf over golden_ref's prompts, unless
    already there or llama-cpp-python is not installed."""
    out = Path(model_dir) / "greedy.json"
    if out.exists():
        return
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python not installed: no", out, flush=True)
        return
    llama_greedy(Path(model_dir) / "model.gguf", golden_ref, out)
    print("wrote", out, flush=True)


def start_gguf(gguf, path, arch, name, cfg, rope_theta, n_mtp=0):
    """A GGUFWriter of `arch` at path.part (finish_gguf renames it) with the keys every tiny model
    has, from the HF config dict cfg: sizes, heads, head_dim as key/value lengths, RoPE base, RMS eps;
    n_mtp MTP blocks after the trunk counted in block_count, as the converter does."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path) + ".part", arch)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    w.add_name(name)
    w.add_block_count(cfg["num_hidden_layers"] + n_mtp)
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    return w


def quantized_items(gguf, tensors, qt, quantized):
    """(name, data, raw GGML type or None) of (name, f32 array) tensors: those quantized(name, a)
    selects in the GGML type qt by gguf-py's quantizer (none when qt is None), the rest f32."""
    for name, a in tensors:
        if qt is not None and quantized(name, a):
            yield name, gguf.quants.quantize(a, qt), qt
        else:
            yield name, a.astype(np.float32), None


def finish_gguf(w, path, tok, pre, items):
    """The end of a tiny model's GGUF after its architecture keys: the byte-level BPE vocabulary
    `tok` (tokenizer_from_json) with pre-tokenizer `pre`, the (name, data, raw type) items, then the
    file at `path` (written as path.part, renamed when complete)."""
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_eos_token_id(tok["eos_token_id"])
    w.add_add_bos_token(False)
    write_file(w, path, items)


def write_file(w, path, items):
    """The (name, data, raw type) items, then the file at `path` (written as path.part, renamed when
    complete)."""
    for name, a, raw in items:
        w.add_tensor(name, a, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    os.replace(str(path) + ".part", path)


def llama_rows(lm, ids):
    """llama.cpp's logits at every position of `ids`, evaluated in one batch (logits_all)."""
    lm.reset()
    lm.eval(ids)
    return np.array(lm.scores[: len(ids)], dtype=np.float64)


def row_gap(a, b):
    """Per row: max |a - b| / max |b| (b the reference), and whether the argmaxes agree."""
    rel = np.max(np.abs(a - b), axis=1) / np.max(np.abs(b), axis=1)
    return rel, np.argmax(a, axis=1) == np.argmax(b, axis=1)


def llama_teacher_forced(q8_path, f32_path, golden_ref, out_path):
    """llama.cpp's Q8_0 logits teacher-forced on each prompt + the f32 greedy continuation of
    golden_ref (mlx-lm's tokens, which llama.cpp's f32 run reproduces): one eval of the whole
    sequence, the full row (small vocabulary) at each of the continuation's positions. Free-running
    Q8_0 output is no criterion (its tokens leave the f32 ones after a few steps on this random
    model); the same forced tokens make both engines' Q8_0 logits comparable at every step. Also
    records how far llama.cpp's own Q8_0 rows are from its f32 rows on the same tokens: the scale
    of Q8_0's error that a comparison of two Q8_0 implementations must stay well inside."""
    import llama_cpp
    ref = json.load(open(golden_ref))
    q8, f32 = llama(q8_path), llama(f32_path)
    cases, rel_all, same_all = [], [], []
    for c in ref["cases"]:
        forced = [s["token"] for s in c["steps"]]
        ids = c["prompt_ids"] + forced[:-1]
        first = len(c["prompt_ids"]) - 1  # the row that predicts forced[0]
        rq, rf = llama_rows(q8, ids)[first:], llama_rows(f32, ids)[first:]
        rel, same = row_gap(rq, rf)
        rel_all.append(rel)
        same_all.append(same)
        cases.append({"prompt_ids": c["prompt_ids"], "tokens": forced, "argmax": [int(i) for i in np.argmax(rq, axis=1)],
                      "rows": [[float(f"{x:.7g}") for x in r] for r in rq]})
    rel, same = np.concatenate(rel_all), np.concatenate(same_all)
    g = {"model": str(q8_path), "generator": "llama-cpp-python " + llama_cpp.__version__,
         "forced_from": str(golden_ref), "vocab_size": int(rq.shape[1]),
         "llama_q8_0_vs_f32": {"worst_rel": float(rel.max()), "median_rel": float(np.median(rel)),
                               "argmax_agree": int(same.sum()), "total": int(same.size)},
         "cases": cases}
    with open(str(out_path) + ".part", "w") as f:
        json.dump(g, f, separators=(",", ":"))
    os.replace(str(out_path) + ".part", out_path)
    s = g["llama_q8_0_vs_f32"]
    print(f"{out_path}: llama.cpp Q8_0 vs its f32, teacher-forced: worst {s['worst_rel']:.3g}, median "
          f"{s['median_rel']:.3g} of max|logit|, argmax {s['argmax_agree']}/{s['total']}", flush=True)


def quantize(src, dst, ftype_name, requantize=False):
    """llama.cpp's own quantizer (llama_model_quantize), e.g. ftype_name MOSTLY_Q8_0 / MOSTLY_Q4_0;
    requantize: src may be quantized itself."""
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, "LLAMA_FTYPE_" + ftype_name)
    p.nthread = 2
    p.allow_requantize = requantize
    tmp = str(dst) + ".part"
    rc = llama_cpp.llama_model_quantize(str(src).encode(), tmp.encode(), p)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {ftype_name} failed ({rc})")
    os.replace(tmp, dst)


# Qwen/Qwen3.5-0.8B's text_config (24 layers, 3 of 4 Gated DeltaNet, tied embeddings).
QWEN35_08B = {
    "vocab_size": 248320, "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 24,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 262144, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
    "full_attention_interval": 4, "tie_word_embeddings": True,
    "rope_parameters": {"rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10]},
}


def random_hf_weights(tc, seed=0):
    """HF-named random tensors of a Qwen3.5 text config (scaled so activations stay finite)."""
    rng = np.random.default_rng(seed)
    H, I, V = tc["hidden_size"], tc["intermediate_size"], tc["vocab_size"]
    hd, nh, nkv = tc["head_dim"], tc["num_attention_heads"], tc["num_key_value_heads"]
    hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv, K = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
    C = 2 * hk * dk + hv * dv
    every = tc["full_attention_interval"]

    def mat(r, c):
        return (rng.standard_normal((r, c), dtype=np.float32) * (1.0 / np.sqrt(c))).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(V, H), "model.norm.weight": np.zeros(H, np.float32)}
    for i in range(tc["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = np.zeros(H, np.float32)
        w[p + "post_attention_layernorm.weight"] = np.zeros(H, np.float32)
        w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"], w[p + "mlp.down_proj.weight"] = mat(I, H), mat(I, H), mat(H, I)
        if (i + 1) % every:
            a = p + "linear_attn."
            w[a + "in_proj_qkv.weight"], w[a + "in_proj_z.weight"] = mat(C, H), mat(hv * dv, H)
            w[a + "in_proj_b.weight"], w[a + "in_proj_a.weight"] = mat(hv, H), mat(hv, H)
            w[a + "out_proj.weight"] = mat(H, hv * dv)
            w[a + "conv1d.weight"] = rng.standard_normal((C, 1, K), dtype=np.float32) * 0.5
            w[a + "A_log"] = np.log(rng.uniform(1, 16, hv)).astype(np.float32)
            w[a + "dt_bias"] = np.ones(hv, np.float32)
            w[a + "norm.weight"] = np.ones(dv, np.float32)
        else:
            a = p + "self_attn."
            w[a + "q_proj.weight"], w[a + "k_proj.weight"] = mat(2 * nh * hd, H), mat(nkv * hd, H)
            w[a + "v_proj.weight"], w[a + "o_proj.weight"] = mat(nkv * hd, H), mat(H, nh * hd)
            w[a + "q_norm.weight"], w[a + "k_norm.weight"] = np.zeros(hd, np.float32), np.zeros(hd, np.float32)
    return w


def tokenizer_from_gguf(gguf, path):
    """tokens / types / merges / eos of a llama.cpp vocab GGUF."""
    r = gguf.GGUFReader(str(path))
    f = r.fields
    return {"tokens": f["tokenizer.ggml.tokens"].contents(), "types": f["tokenizer.ggml.token_type"].contents(),
            "merges": f["tokenizer.ggml.merges"].contents(),
            "eos_token_id": int(f["tokenizer.ggml.eos_token_id"].contents())}


BENCH_LAYOUT = "2"


def bench(out, mtp=False):
    gguf = import_gguf()
    vocab = Path(sdist_dir()) / "vocab" / "ggml-vocab-qwen35.gguf"
    if not vocab.exists():  # where tests/python/test_tokenizer_llamacpp_vocab.py extracts it too
        vocab.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist_path()) as tar, tar.extractfile(VENDOR + "models/" + vocab.name) as src:
            Path(str(vocab) + ".part").write_bytes(src.read())
        os.replace(str(vocab) + ".part", vocab)
    tc = QWEN35_08B
    # Files of an older layout are rewritten (1: the token list shorter than the embedding, which
    # llama.cpp refuses; 2: padded to vocab_size).
    stamp = out / "layout"
    fresh = stamp.exists() and stamp.read_text().strip() == BENCH_LAYOUT
    names = ("q8_0", "q4_0", "q4_0-mtp") if mtp else ("q8_0", "q4_0")
    todo = [q for q in names if not fresh or not (out / f"{q}.gguf").exists()]
    if todo:
        weights = random_hf_weights(tc)
        tok = tokenizer_from_gguf(gguf, vocab)
    for q in todo:
        if q.endswith("-mtp"):
            # The released checkpoints' head (one gated-attention layer + fc), random: its cost on the
            # real shapes is what the MTP benchmark measures (bench/qwen35_spec_bench.cpp).
            from make_qwen35_mtp import mtp_weights
            head = mtp_weights(tc, np.random.default_rng(1))
            tensors = hf_to_gguf_tensors(gguf, tc, {**weights, **head}, mtp=True)
            write_gguf(out / f"{q}.gguf", tc, tensors, tok, out_type=q[:-4], n_mtp=mtp_layer_count(head))
        else:
            write_gguf(out / f"{q}.gguf", tc, hf_to_gguf_tensors(gguf, tc, weights), tok, out_type=q)
        print("wrote", out / f"{q}.gguf", flush=True)
    stamp.write_text(BENCH_LAYOUT + "\n")
    # Mixes as users download them (Q5_K_M: Q5_K with Q6_K where llama.cpp's recipe puts it; IQ4_XS
    # with Q5_K and a Q6_K head), made by llama.cpp's own quantizer from the Q8_0 file: random
    # weights, so only their speed matters.
    for name, ftype in (("q5_k_m", "MOSTLY_Q5_K_M"), ("iq4_xs", "MOSTLY_IQ4_XS")):
        dst = out / f"{name}.gguf"
        if dst.exists():
            continue
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            print(f"llama-cpp-python not installed: no {dst.name}", flush=True)
            return
        quantize(out / "q8_0.gguf", dst, ftype, requantize=True)
        print("wrote", dst, flush=True)


def llama_cpp_reads(tc):
    """llama-cpp-python 0.3.36's qwen35 loader sizes attn_qkv with the value head as wide as the key
    head, as in every release; it refuses a file whose DeltaNet value heads are wider."""
    return tc["linear_key_head_dim"] == tc["linear_value_head_dim"]


def tiny(root):
    """The f32 GGUF of each tiny model (kept if present); then, with llama-cpp-python installed,
    its Q8_0 copy and llama.cpp's goldens of both."""
    from safetensors.numpy import load_file
    gguf = import_gguf()
    for cfg in ("dense-tied", "vheads-untied"):
        hf = root / cfg / "hf-f32"
        f32 = root / cfg / "gguf-f32" / "model.gguf"
        if not f32.exists():
            tc = json.load(open(hf / "config.json"))["text_config"]
            tensors = hf_to_gguf_tensors(gguf, tc, load_file(str(hf / "model.safetensors")))
            write_gguf(f32, tc, tensors, tokenizer_from_json(hf / "tokenizer.json"))
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python not installed: no Q8_0 copies, no llama.cpp goldens", flush=True)
        return
    for cfg in ("dense-tied", "vheads-untied"):
        hf, f32 = root / cfg / "hf-f32", root / cfg / "gguf-f32" / "model.gguf"
        if not llama_cpp_reads(json.load(open(hf / "config.json"))["text_config"]):
            print(f"{cfg}: llama.cpp cannot load it (value heads wider than key heads): no llama.cpp copies",
                  flush=True)
            continue
        q8 = root / cfg / "gguf-q8_0" / "model.gguf"
        q8.parent.mkdir(parents=True, exist_ok=True)
        if not q8.exists():
            quantize(f32, q8, "MOSTLY_Q8_0")
        for d in (f32.parent, q8.parent):
            if not (d / "greedy.json").exists():
                llama_greedy(d / "model.gguf", hf / "greedy.json", d / "greedy.json")
                print("wrote", d / "greedy.json", flush=True)
        if not (q8.parent / "teacher_forced.json").exists():
            llama_teacher_forced(q8, f32, hf / "greedy.json", q8.parent / "teacher_forced.json")


def mtp_copy(model_dir):
    """<model_dir>/gguf-f32/model.gguf: a Qwen3.5 checkpoint with its MTP head (HF layout, e.g.
    scripts/make_qwen35_mtp.py's) as the converter writes it, head included."""
    from safetensors.numpy import load_file
    gguf = import_gguf()
    model_dir = Path(model_dir)
    tc = json.load(open(model_dir / "config.json"))["text_config"]
    weights = load_file(str(model_dir / "model.safetensors"))
    tensors = hf_to_gguf_tensors(gguf, tc, weights, mtp=True)
    out = model_dir / "gguf-f32" / "model.gguf"
    # "gpt-2": the tiny tokenizer.json's own pre-tokenizer, so text prompts get mlx-lm's ids.
    write_gguf(out, tc, tensors, tokenizer_from_json(model_dir / "tokenizer.json"), pre="gpt-2",
               n_mtp=mtp_layer_count(weights))
    return out


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    args = sys.argv[1:]
    if args[:1] in (["--bench"], ["--bench-mtp"]):
        bench(Path(args[1] if len(args) > 1 else os.path.join(cache, "bench", "qwen3.5-0.8b-shape")),
              mtp=args[0] == "--bench-mtp")
    else:
        tiny(Path(args[0] if args else os.path.join(cache, "qwen35-tiny")))
