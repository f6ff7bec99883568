#!/usr/bin/env python3
"""GLM-4.7-Flash as a GGUF file of llama.cpp's `deepseek2` architecture, written with llama.cpp's
own gguf-py (scripts/qwen35_gguf.py explains why not with convert_hf_to_gguf.py: it needs
PyTorch). The transforms and keys are those of that converter's Glm4MoeLiteModel (conversion/glm.py,
a DeepseekV2Model in conversion/deepseek.py), as with --no-mtp (the tiny model's MTP layer is a
partial one a reader must ignore):
  kv_b_proj [heads * (nope + v), kv_lora] split per head into attn_k_b = its key rows transposed
  [heads, kv_lora, nope] and attn_v_b = its value rows [heads, v, kv_lora]; experts stacked into
  ffn_{gate,up,down}_exps; e_score_correction_bias as exp_probs_b.bias; shared experts as *_shexp;
  metadata: head_count_kv 1 and key_length kv_lora + rope / value_length kv_lora (MLA as MQA),
  key_length_mla / value_length_mla, rope.dimension_count = qk_rope_head_dim, q_lora_rank,
  kv_lora_rank, leading_dense_block_count = first_k_dense_replace, expert_count / used_count /
  feed_forward_length / shared_count, expert_weights_scale = routed_scaling_factor,
  expert_weights_norm = norm_topk_prob, expert_group_count / used_count = n_group / topk_group,
  expert_gating_func sigmoid (TextModel's scoring_func). Vocabulary: the tiny byte-level BPE as
  gpt2 with pre "glm4" (the converter's _set_vocab_glm), and the GLM-4.6 chat template of the
  fixtures (the nearest to GLM-4.7-Flash's, as tests/python/test_glm.py uses) as
  tokenizer.chat_template when the fixture is there.

From scripts/make_tiny_glm.py's set (OUT/glm/hf-f32, mlx-lm goldens) writes under TINY_ROOT/glm/:
  gguf-f32/model.gguf    every tensor f32
  gguf-q8_0/model.gguf   the 2-D and 3-D weights in Q8_0 (gguf-py's quantizer); the router, norms
                         and the bias f32
  gguf-q4_k/model.gguf   llama.cpp's own llama_model_quantize of the f32 file to MOSTLY_Q4_K_M (its
                         type choices for attn_k_b / attn_v_b and the experts; rows narrower than 256
                         fall back to Q5_0 / Q8_0 as here)
  hf-deq-{q8_0,q4_k}/    those files' weights dequantized by gguf-py, the converter's transforms
                         undone, as an HF f32 checkpoint with mlx-lm's goldens (the oracle of our
                         exact-path run of the quantized files)
  gguf-f32/greedy.json   llama-cpp-python's greedy output on the prompts of hf-f32/greedy.json
  gguf-f32-mtp/model.gguf  gguf-f32 with an MTP block as the converter appends it without --no-mtp
                         (block_count 4, nextn_predict_layers 1; blk.3 = layer 2's tensors plus
                         nextn.eh_proj / enorm / hnorm / shared_head_norm from the tiny model's MTP
                         tensors, complete unlike those), and its greedy.json (llama.cpp skips the
                         block: the same output)
  gguf-f32-kvb/model.gguf  gguf-f32 as the converter wrote it before MLA absorption: kv_b_proj whole
                         as attn_kv_b, no *_mla keys (key_length / value_length the heads' sizes), and
                         its greedy.json

usage: .venv/bin/python scripts/glm_gguf.py [TINY_ROOT]  (default $RAPID_MODEL_CACHE/glm-tiny)
Files already present are kept (delete one to regenerate it).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(os.environ.get("RAPID_FIXTURES_DIR", ROOT / ".." / "shared" / "fixtures"))
TEMPLATE = FIX / "chat-templates" / "GLM-4.6.jinja"
sys.path.insert(0, str(ROOT / "scripts"))
from moe_gguf import deq_goldens, stacked_experts  # noqa: E402
from qwen35_gguf import (import_gguf, llama_goldens, quantize, quantized_items, tokenizer_from_json,  # noqa: E402
                         write_file)


def hf_to_gguf_tensors(gguf, cfg, weights, legacy=False):
    """(gguf name, f32 array) per tensor; legacy: kv_b_proj kept whole as attn_kv_b (the converter
    before MLA absorption, whose files many published DeepSeek GGUFs still are)."""
    n = cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.DEEPSEEK2, n)
    nh, nope, vd = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    out = []
    for name, w in stacked_experts(weights, n, cfg["n_routed_experts"]).items():
        parts = name.split(".")
        if parts[:2] == ["model", "layers"] and int(parts[2]) >= n:
            continue  # the MTP layer (--no-mtp)
        w = np.asarray(w, dtype=np.float32)
        if name.endswith("e_score_correction_bias"):
            name = name.replace("e_score_correction_bias", "e_score_correction.bias")
        if name.endswith("kv_b_proj.weight") and not legacy:
            kv = w.reshape(nh, nope + vd, w.shape[-1])
            k_b, v_b = np.swapaxes(kv[:, :nope], 1, 2), kv[:, nope:]
            for sub, a in (("k_b_proj", k_b), ("v_b_proj", v_b)):
                out.append((names.get_name(name.replace("kv_b_proj", sub), try_suffixes=(".weight",)),
                            np.ascontiguousarray(a)))
            continue
        g = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if g is None:
            raise SystemExit(f"no GGUF name for {name}")
        out.append((g, np.ascontiguousarray(w)))
    return out


def read_dequantized(path):
    """Every tensor of a GGUF as f32 in numpy's (reversed-GGUF) shape, by gguf-py's dequantizer."""
    gguf = import_gguf()
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        out[t.name] = a.reshape(tuple(int(x) for x in reversed(t.shape)))
    return out


def dequantized_hf(gguf, cfg, weights, path):
    """The HF tensors of `weights` as the GGUF at `path` holds them (dequantized): the converter's
    transforms undone (attn_k_b transposed back and joined with attn_v_b into kv_b_proj per head,
    the experts unstacked); the MTP layer, which the file lacks, as it was."""
    n = cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.DEEPSEEK2, n)
    g = read_dequantized(path)
    out = {}
    for name, w in weights.items():
        parts = name.split(".")
        if parts[:2] == ["model", "layers"] and int(parts[2]) >= n:
            out[name] = np.asarray(w, dtype=np.float32)
            continue
        if ".mlp.experts." in name:  # model.layers.i.mlp.experts.e.part.weight
            e = int(parts[5])
            stacked = ".".join(parts[:5] + parts[6:])
            out[name] = g[names.get_name(stacked, try_suffixes=(".weight",))][e]
            continue
        if name.endswith("kv_b_proj.weight"):
            k_b = g[names.get_name(name.replace("kv_b_proj", "k_b_proj"), try_suffixes=(".weight",))]
            v_b = g[names.get_name(name.replace("kv_b_proj", "v_b_proj"), try_suffixes=(".weight",))]
            kv = np.concatenate([np.swapaxes(k_b, 1, 2), v_b], axis=1)
            out[name] = np.ascontiguousarray(kv.reshape(-1, kv.shape[-1]))
            continue
        gname = name.replace("e_score_correction_bias", "e_score_correction.bias")
        out[name] = np.ascontiguousarray(g[names.get_name(gname, try_suffixes=(".weight", ".bias"))])
        assert out[name].shape == tuple(w.shape), (name, out[name].shape, w.shape)
    return out


def quantized(name, a):
    """The weights llama.cpp's quantizer types: 2-D / 3-D, not the router (ffn_gate_inp)."""
    return a.ndim >= 2 and ".ffn_gate_inp." not in name


def mtp_block(cfg, tensors, weights):
    """The tensors of an appended MTP block at blk.<n> (see the module docstring)."""
    n = cfg["num_hidden_layers"]
    src, mtp = f"blk.{n - 1}.", f"model.layers.{n}."
    out = [(f"blk.{n}." + name[len(src):], a) for name, a in tensors if name.startswith(src)]
    for part in ("eh_proj", "enorm", "hnorm"):
        out.append((f"blk.{n}.nextn.{part}.weight", np.asarray(weights[mtp + part + ".weight"], dtype=np.float32)))
    out.append((f"blk.{n}.nextn.shared_head_norm.weight", np.ones(cfg["hidden_size"], np.float32)))
    return out


def write_gguf(path, cfg, tensors, tok, out_type="f32", n_mtp=0, legacy=False):
    """legacy: the metadata of those older files too (no *_mla keys; key_length / value_length
    the heads' own sizes, head_count_kv the head count)."""
    gguf = import_gguf()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path) + ".part", "deepseek2")
    kv, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    w.add_name("glm4-moe-lite-random")
    w.add_block_count(cfg["num_hidden_layers"] + n_mtp)
    if n_mtp:
        w.add_nextn_predict_layers(n_mtp)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_attention_heads"] if legacy else 1)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_group_count(cfg["n_group"])
    w.add_expert_group_used_count(cfg["topk_group"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    qt = {"f32": None, "q8_0": gguf.GGMLQuantizationType.Q8_0}[out_type]
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qt is None else gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_q_lora_rank(cfg["q_lora_rank"])
    w.add_kv_lora_rank(kv)
    if legacy:
        w.add_key_length(cfg["qk_nope_head_dim"] + rope)
        w.add_value_length(cfg["v_head_dim"])
    else:
        w.add_key_length(kv + rope)
        w.add_value_length(kv)
        w.add_key_length_mla(cfg["qk_nope_head_dim"] + rope)
        w.add_value_length_mla(cfg["v_head_dim"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_shared_count(cfg["n_shared_experts"])
    w.add_expert_weights_scale(cfg["routed_scaling_factor"])
    if cfg.get("norm_topk_prob"):
        w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(rope)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("glm4")
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_eos_token_id(tok["eos_token_id"])
    w.add_add_bos_token(False)
    if TEMPLATE.exists():
        w.add_chat_template(TEMPLATE.read_text())
    write_file(w, path, quantized_items(gguf, tensors, qt, quantized))
    print("wrote", path, flush=True)


def tiny(root):
    from safetensors.numpy import load_file
    d, hf = root / "glm", root / "glm" / "hf-f32"
    if not (hf / "greedy.json").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_glm.py"), str(root)], check=True)
    gguf = import_gguf()
    cfg = json.load(open(hf / "config.json"))
    weights = load_file(str(hf / "model.safetensors"))
    tensors = hf_to_gguf_tensors(gguf, cfg, weights)
    tok = tokenizer_from_json(hf / "tokenizer.json")
    for q in ("f32", "q8_0"):
        f = d / f"gguf-{q}" / "model.gguf"
        if not f.exists():
            write_gguf(f, cfg, tensors, tok, q)
    q4 = d / "gguf-q4_k" / "model.gguf"
    if not q4.exists():
        try:
            import llama_cpp  # noqa: F401
            q4.parent.mkdir(parents=True, exist_ok=True)
            quantize(d / "gguf-f32" / "model.gguf", q4, "MOSTLY_Q4_K_M")
            print("wrote", q4, flush=True)
        except ImportError:
            print("llama-cpp-python not installed: no", q4, flush=True)
    f = d / "gguf-f32-mtp" / "model.gguf"
    if not f.exists():
        write_gguf(f, cfg, tensors + mtp_block(cfg, tensors, weights), tok, n_mtp=1)
    f = d / "gguf-f32-kvb" / "model.gguf"
    if not f.exists():
        write_gguf(f, cfg, hf_to_gguf_tensors(gguf, cfg, weights, legacy=True), tok, legacy=True)
    for q, seed in (("q8_0", 5001), ("q4_k", 5002)):
        if (d / f"gguf-{q}" / "model.gguf").exists():
            deq_goldens(d / f"hf-deq-{q}", hf, dequantized_hf(gguf, cfg, weights, d / f"gguf-{q}" / "model.gguf"), seed)
    llama_goldens(d / "gguf-f32", hf / "greedy.json")
    llama_goldens(d / "gguf-f32-mtp", hf / "greedy.json")
    llama_goldens(d / "gguf-f32-kvb", hf / "greedy.json")  # last: tests take it as the set's marker


if __name__ == "__main__":
    cache = os.environ.get("RAPID_MODEL_CACHE", os.path.expanduser("~/.cache/rapid-mlx/models"))
    tiny(Path(sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "glm-tiny")))
