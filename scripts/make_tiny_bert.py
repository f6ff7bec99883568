#!/usr/bin/env python3
"""Writes random-weight BERT sentence-transformers models (what sentence-transformers saves for
e.g. sentence-transformers/all-MiniLM-L6-v2) and a golden of their hidden states.

Each model directory holds a BertModel's config.json and model.safetensors (HF names, no "bert."
prefix, pooler included), a WordPiece tokenizer.json built with Hugging Face `tokenizers`
(BertNormalizer + BertPreTokenizer + "[CLS] $A [SEP]" TemplateProcessing), modules.json,
1_Pooling/config.json (cls or mean), 2_Normalize and sentence_bert_config.json (max_seq_length).

  .venv/bin/python scripts/make_tiny_bert.py OUT_ROOT

writes OUT_ROOT/{mean-f32,cls-bf16,roberta-mean-f16}/ and OUT_ROOT/golden.json: for a few texts,
the token ids (`tokenizers`) and the last hidden state of mlx-embeddings' BERT / XLM-RoBERTa
(weights cast to f32). The RoBERTa model has a byte-level BPE tokenizer (RobertaProcessing).
"""
import json
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_embedding_model  # noqa: E402

VOCAB_CORPUS = [
    "the quick brown fox jumps over the lazy dog", "hello world", "def add(a, b): return a + b",
    "embeddings index a codebase", "café naïve résumé über straße", "数据 模型 向量", "unicode ✓ — ok",
    "sentence transformers pool the token states", "mean pooling and cls pooling", "0123456789",
]
TEXTS = ["hello world", "The Quick brown FOX, jumps!", "Café naïve — résumé", "数据✓ zzqx", "x"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def make_tokenizer():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=220, special_tokens=SPECIALS, min_frequency=1)
    tok.train_from_iterator(VOCAB_CORPUS, trainer=trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece()
    return tok


def make_bpe_tokenizer():
    """RoBERTa's kind: byte-level BPE, <s> $A </s> (RobertaProcessing), <pad> = 1."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=340, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(VOCAB_CORPUS, trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tok


def random_weights(cfg, rng, dtype):
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    w = {}

    def lin(name, out, inp):
        w[name + ".weight"] = rng.normal(0, 0.15, (out, inp))
        w[name + ".bias"] = rng.normal(0, 0.05, (out,))

    def ln(name):
        w[name + ".weight"] = 1.0 + rng.normal(0, 0.1, (h,))
        w[name + ".bias"] = rng.normal(0, 0.1, (h,))

    w["embeddings.word_embeddings.weight"] = rng.normal(0, 0.5, (v, h))
    w["embeddings.position_embeddings.weight"] = rng.normal(0, 0.5, (cfg["max_position_embeddings"], h))
    w["embeddings.token_type_embeddings.weight"] = rng.normal(0, 0.5, (cfg["type_vocab_size"], h))
    ln("embeddings.LayerNorm")
    for L in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{L}."
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, h, h)
        lin(p + "attention.output.dense", h, h)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", i, h)
        lin(p + "output.dense", h, i)
        ln(p + "output.LayerNorm")
    lin("pooler.dense", h, h)
    return {k: a.astype(np.float32) for k, a in w.items()}


def save_weights(weights, path, dtype):
    import mlx.core as mx
    mx.save_safetensors(path, {k: mx.array(a).astype(getattr(mx, dtype)) for k, a in weights.items()},
                        metadata={"format": "pt"})


def make(out, pooling="mean", dtype="float32", normalize=True, seed=0, max_seq_length=48, arch="bert"):
    """arch "bert" (WordPiece) or "roberta" (byte-level BPE; 128 positions after the pad offset)."""
    os.makedirs(out, exist_ok=True)
    roberta = arch == "roberta"
    tok = make_bpe_tokenizer() if roberta else make_tokenizer()
    tok.save(os.path.join(out, "tokenizer.json"))
    cfg = {"architectures": ["RobertaModel" if roberta else "BertModel"], "model_type": arch,
           "vocab_size": tok.get_vocab_size(), "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 128, "hidden_act": "gelu", "max_position_embeddings": 130 if roberta else 128,
           "type_vocab_size": 1 if roberta else 2, "layer_norm_eps": 1e-5 if roberta else 1e-12,
           "pad_token_id": 1 if roberta else 0, "position_embedding_type": "absolute", "torch_dtype": dtype}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    save_weights(random_weights(cfg, np.random.default_rng(seed), dtype), os.path.join(out, "model.safetensors"), dtype)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": 512, "tokenizer_class": "RobertaTokenizer"} if roberta else
                  {"do_lower_case": True, "model_max_length": 512, "cls_token": "[CLS]", "sep_token": "[SEP]",
                   "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]",
                   "tokenizer_class": "BertTokenizer"}, f, indent=1)
    make_tiny_embedding_model.write_pipeline(out, pooling, normalize, cfg["hidden_size"])
    with open(os.path.join(out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": max_seq_length, "do_lower_case": False}, f, indent=2)
    return out


def load_oracle_model(path):
    """mlx-embeddings' BERT over the directory's weights, cast to f32. Its package __init__ imports
    mlx-vlm (not installed: it would pull opencv, datasets, ...), so only the models subpackage is
    loaded, under a bare package entry."""
    import importlib.util
    import mlx.core as mx
    if "mlx_embeddings" not in sys.modules:
        spec = importlib.util.find_spec("mlx_embeddings")
        pkg = types.ModuleType("mlx_embeddings")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["mlx_embeddings"] = pkg
    from mlx_embeddings.models import bert, xlm_roberta
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    arch = xlm_roberta if cfg["model_type"] in ("roberta", "xlm-roberta") else bert
    model = arch.Model(arch.ModelArgs.from_dict(cfg))
    weights = {k: v.astype(mx.float32) for k, v in mx.load(os.path.join(path, "model.safetensors")).items()}
    model.load_weights(list(model.sanitize(weights).items()))
    model.eval()  # mlx modules start in training mode: dropout on
    return model


def hidden_states(model, ids):
    import mlx.core as mx
    return np.array(model(mx.array([ids])).last_hidden_state.astype(mx.float32))[0]


MODELS = (("mean-f32", "mean", "float32", "bert"), ("cls-bf16", "cls", "bfloat16", "bert"),
          ("roberta-mean-f16", "mean", "float16", "roberta"))


def make_set(root):
    """Both models under `root` and golden.json (written last: its presence marks a complete set)."""
    from tokenizers import Tokenizer
    golden = {"texts": TEXTS, "models": {}}
    for seed, (name, pooling, dtype, arch) in enumerate(MODELS):
        path = make(os.path.join(root, name), pooling=pooling, dtype=dtype, seed=seed, arch=arch)
        tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        model = load_oracle_model(path)
        # And one input with the pad id inside (RoBERTa numbers positions around it).
        ids = [tok.encode(t).ids for t in TEXTS] + [[0, 44, 1, 45, 2] if arch == "roberta" else [2, 44, 0, 45, 3]]
        golden["models"][name] = {"ids": ids, "hidden": [hidden_states(model, i).ravel().tolist() for i in ids]}
    tmp = os.path.join(root, "golden.json.tmp")
    with open(tmp, "w") as f:
        json.dump(golden, f, ensure_ascii=False)
    os.replace(tmp, os.path.join(root, "golden.json"))
    return root


def main():
    make_set(sys.argv[1])


if __name__ == "__main__":
    main()
