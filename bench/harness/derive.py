"""Derives every model copy the benchmark needs from the one real file we can fetch, with no torch:

  SmolLM2-135M-Instruct.Q4_1.gguf  --(numpy dequantise)-->  hf/  (safetensors f16 + tokenizer.json)
  hf/  --(mlx_lm.convert -q, the peer's own tool)-->  mlx-4bit/
  Q4_1.gguf  --(llama.cpp's own quantiser, requantise)-->  Q8_0.gguf

and a Qwen2.5-0.5B-shaped model with seeded random weights (the real weights are not reachable
here; speed depends on shapes, not values) as HF safetensors, MLX 4-bit, and GGUF Q4_1 / Q8_0.
Each step is skipped when its output exists, so the first run pays once.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

# GGUF (llama.cpp) tensor names -> Hugging Face names, per block.
_BLOCK_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def log(msg):
    print(f"[derive] {msg}", file=sys.stderr, flush=True)


def _hf_name(gguf_name):
    base, _, suffix = gguf_name.rpartition(".")  # suffix: weight / bias
    if base.startswith("blk."):
        _, idx, part = base.split(".", 2)
        return f"model.layers.{idx}.{_BLOCK_NAMES[part]}.{suffix}"
    return f"{_TOP_NAMES[base]}.{suffix}"


def _unpermute(w, n_head):
    # llama.cpp's converter stores Q/K rows as reshape(n_head, 2, d/2).swapaxes(1, 2) of the HF
    # rows (rotary halves interleaved); this is its inverse.
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def _write_tokenizer(reader, out_dir):
    """tokenizer.json (byte-level BPE, SmolLM pre-tokenizer) + tokenizer_config.json from GGUF."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, AddedToken
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = _field(reader, "tokenizer.ggml.merges")
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    # llama.cpp's "smollm" pre-tokenizer: single digits, then the GPT-2 byte-level split.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    bos = tokens[_field(reader, "tokenizer.ggml.bos_token_id")]
    eos = tokens[_field(reader, "tokenizer.ggml.eos_token_id")]
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos,
           "pad_token": eos, "add_bos_token": False, "model_max_length": 8192,
           "chat_template": _field(reader, "tokenizer.chat_template")}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def gguf_to_hf(gguf_path, out_dir):
    """Dequantises a llama-architecture GGUF into an HF safetensors (f16) checkpoint."""
    if os.path.exists(os.path.join(out_dir, "model.safetensors")):
        return out_dir
    import gguf
    from gguf.quants import dequantize
    from safetensors.numpy import save_file
    log(f"GGUF -> HF safetensors: {gguf_path}")
    r = gguf.GGUFReader(gguf_path)
    arch = _field(r, "general.architecture")
    if arch != "llama":
        raise SystemExit(f"derive: only llama-architecture GGUF is supported, got {arch}")
    n_head = int(_field(r, "llama.attention.head_count"))
    n_kv = int(_field(r, "llama.attention.head_count_kv", n_head))
    tensors = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)])  # GGUF dims are innermost-first
        if t.name.endswith("attn_q.weight"):
            w = _unpermute(w, n_head)
        elif t.name.endswith("attn_k.weight"):
            w = _unpermute(w, n_kv)
        tensors[_hf_name(t.name)] = np.ascontiguousarray(w.astype(np.float16))
    tmp = out_dir + ".part"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    hidden = int(_field(r, "llama.embedding_length"))
    bos, eos = int(_field(r, "tokenizer.ggml.bos_token_id")), int(_field(r, "tokenizer.ggml.eos_token_id"))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": int(_field(r, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(r, "llama.block_count")),
        "num_attention_heads": n_head, "num_key_value_heads": n_kv, "head_dim": hidden // n_head,
        "rms_norm_eps": float(_field(r, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(_field(r, "llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(_field(r, "llama.context_length")),
        "vocab_size": len(_field(r, "tokenizer.ggml.tokens")),
        "tie_word_embeddings": "lm_head.weight" not in tensors,
        "bos_token_id": bos, "eos_token_id": eos, "hidden_act": "silu", "torch_dtype": "float16",
    }
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f)
    _write_tokenizer(r, tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.rename(tmp, out_dir)
    return out_dir


def hf_to_mlx4(python, hf_dir, out_dir, dtype="float16"):
    """MLX 4-bit (group 64) with mlx-lm's own converter, so the peer reads its native format.
    dtype is that of the unquantised parts (scales, norms): float16 is the usual MLX file, but
    MLX's CPU backend emulates f16 arithmetic (~30x slower here), so mlx-lm gets float32."""
    if os.path.exists(os.path.join(out_dir, "config.json")):
        return out_dir
    log(f"HF -> MLX 4-bit: {hf_dir}")
    shutil.rmtree(out_dir, ignore_errors=True)
    subprocess.run([python, "-m", "mlx_lm", "convert", "--hf-path", hf_dir, "--mlx-path", out_dir,
                    "-q", "--q-bits", "4", "--q-group-size", "64", "--dtype", dtype], check=True,
                   stdout=subprocess.DEVNULL)
    return out_dir


def gguf_quantize(python, src, dst, qtype):
    """GGUF -> GGUF of another type with llama.cpp's own quantiser (via llama-cpp-python)."""
    if os.path.exists(dst):
        return dst
    log(f"GGUF quantise -> {qtype}: {dst}")
    code = (
        "import sys, llama_cpp as L\n"
        "p = L.llama_model_quantize_default_params()\n"
        f"p.ftype = L.LLAMA_FTYPE_MOSTLY_{qtype}\n"
        "p.allow_requantize = True\n"
        "rc = L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p)\n"
        "sys.exit(rc)\n")
    subprocess.run([python, "-c", code, src, dst + ".part"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.rename(dst + ".part", dst)
    return dst


# Qwen2.5-0.5B shapes (its config.json); weights are seeded noise.
QWEN05B = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
           "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768}


def _qwen_tensors(cfg, seed=0):
    """Yields (hf_name, gguf_name, array) for a random Qwen2 model, one tensor at a time."""
    rng = np.random.default_rng(seed)
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    kv = hd * cfg["num_key_value_heads"]
    rnd = lambda *s: (rng.standard_normal(s, dtype=np.float32) * 0.02).astype(np.float16)
    yield "model.embed_tokens.weight", "token_embd.weight", rnd(v, h)
    yield "model.norm.weight", "output_norm.weight", np.ones(h, np.float32)
    for i in range(cfg["num_hidden_layers"]):
        p, g = f"model.layers.{i}.", f"blk.{i}."
        yield p + "input_layernorm.weight", g + "attn_norm.weight", np.ones(h, np.float32)
        yield p + "post_attention_layernorm.weight", g + "ffn_norm.weight", np.ones(h, np.float32)
        for hf, gg, rows in (("q_proj", "attn_q", h), ("k_proj", "attn_k", kv), ("v_proj", "attn_v", kv)):
            yield p + f"self_attn.{hf}.weight", g + f"{gg}.weight", rnd(rows, h)
            yield p + f"self_attn.{hf}.bias", g + f"{gg}.bias", rnd(rows).astype(np.float32)
        yield p + "self_attn.o_proj.weight", g + "attn_output.weight", rnd(h, h)
        yield p + "mlp.gate_proj.weight", g + "ffn_gate.weight", rnd(f, h)
        yield p + "mlp.up_proj.weight", g + "ffn_up.weight", rnd(f, h)
        yield p + "mlp.down_proj.weight", g + "ffn_down.weight", rnd(h, f)


def random_qwen05b(hf_dir, gguf_f16, tokenizer_dir, vocab_gguf):
    """HF safetensors dir + GGUF F16 of a Qwen2.5-0.5B-shaped model with random weights, with
    the real Qwen2.5 tokenizer (HF files for the HF copy, llama.cpp's vocab GGUF for the GGUF)."""
    if os.path.exists(os.path.join(hf_dir, "model.safetensors")) and os.path.exists(gguf_f16):
        return
    import gguf
    from safetensors.numpy import save_file
    log("random Qwen2.5-0.5B-shaped weights -> HF safetensors + GGUF F16")
    cfg = dict(QWEN05B)
    hf, gg = {}, {}
    for hn, gn, arr in _qwen_tensors(cfg):
        hf[hn] = arr.astype(np.float16)
        gg[gn] = arr
    tmp = hf_dir + ".part"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    save_file(hf, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    eos = 151645  # <|im_end|>, as in Qwen2.5-Instruct's generation config
    config = dict(cfg, architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_act="silu",
                  tie_word_embeddings=True, torch_dtype="float16", bos_token_id=151643,
                  eos_token_id=eos, use_sliding_window=False)
    with open(os.path.join(tmp, "config.json"), "w") as fh:
        json.dump(config, fh, indent=1)
    with open(os.path.join(tmp, "generation_config.json"), "w") as fh:
        json.dump({"bos_token_id": 151643, "eos_token_id": [eos, 151643]}, fh)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), tmp)
    shutil.rmtree(hf_dir, ignore_errors=True)
    os.rename(tmp, hf_dir)

    w = gguf.GGUFWriter(gguf_f16 + ".part", "qwen2")
    w.add_name("qwen2.5-0.5b-shape-random")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(1)  # mostly F16
    vr = gguf.GGUFReader(vocab_gguf)
    for key, field in vr.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    for name, arr in gg.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.rename(gguf_f16 + ".part", gguf_f16)


def main(argv):
    """python -m harness.derive STEP ARGS... (lets the harness run a step with the interpreter
    that has gguf / mlx-lm / llama-cpp-python, whichever one the harness itself runs in)."""
    step, args = argv[0], argv[1:]
    if step == "gguf_to_hf":
        gguf_to_hf(*args)
    elif step == "hf_to_mlx4":
        hf_to_mlx4(sys.executable, *args[:2], *(args[2:] or []))
    elif step == "gguf_quantize":
        gguf_quantize(sys.executable, *args)
    elif step == "random_qwen05b":
        random_qwen05b(*args)
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    main(sys.argv[1:])
