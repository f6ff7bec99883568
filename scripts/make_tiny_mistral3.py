#!/usr/bin/env python3
"""Tiny random-weight Mistral 3 text models (Devstral Small 2 / Ministral 3: model_type ministral3),
written by mlx-lm itself, with greedy goldens from mlx-lm (mlx on CPU, float32) for
tests/model_tiny_test.cpp and tests/python/test_mistral3.py.

What sets ministral3 apart from llama, and each config exercises: YaRN RoPE (factor 16 over an
original context of 16 positions, so the prompts and generations run far past it) and the
llama-4 style query scaling q *= 1 + beta * log(1 + floor(pos / original_max_position_embeddings))
from rope_parameters, with a head_dim (32) that is not hidden_size / heads (16) and GQA.
  devstral    model_type mistral3 (the multimodal wrapper Devstral Small 2 ships: the LM in
              text_config), own lm_head, YaRN mscale = mscale_all_dim = 1 (attention factor 1) and
              llama_4_scaling_beta 0.1 as the release; the Hugging Face copy carries
              model.language_model.* names and vision tower / projector tensors a reader must ignore
  ministral3  model_type ministral3 (text only), tied embeddings, mscale 1 over mscale_all_dim 0.5
              (attention factor (1 + 0.1 ln 16) / (1 + 0.05 ln 16)) and beta 0.2
Each as, under OUT/<config>/: mlx-f32 (mlx_lm.utils.save_model), hf-f32 (the Hugging Face layout of
the same weights, which mlx-lm's sanitize turns back), mlx-q4 (mlx_lm.utils.quantize_model, affine,
4 bits, group 64), each with greedy.json (5 prompts of random ids, 64 greedy steps, computed by
mlx_lm.utils.load_model of that very directory) and a byte-level tokenizer.json whose first ids are
Mistral's control tokens as Tekken numbers them (<unk> 0, <s> 1, </s> 2, [INST] 3, ... [TOOL_CALLS]
9, [SYSTEM_PROMPT] 17, ...), with tokenizer_config.json naming <s> / </s> as bos / eos, so that the
Mistral chat templates render and tokenize as with the real files.

transformers' own forward (the other oracle) needs torch, which the test venv does not carry; its
formulas (modeling_ministral3.py, modeling_rope_utils.py yarn) are the ones mlx-lm implements.

usage: .venv/bin/python scripts/make_tiny_mistral3.py [OUT]   (default $RAPID_MODEL_CACHE/mistral3-tiny)
"""
import copy
import json
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm.models import ministral3, mistral3
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny_moe import write_set  # noqa: E402

# Tekken's first control tokens, in its order (ids 0..19), then the v11+/reasoning markers.
SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
            "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[ARGS]", "[CALL_ID]", "[THINK]",
            "[/THINK]"]


def rope(mscale_all_dim, beta):
    return {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16,
            "max_position_embeddings": 256, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
            "mscale_all_dim": mscale_all_dim, "llama_4_scaling_beta": beta}


TEXT = dict(model_type="ministral3", vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu", rms_norm_eps=1e-5,
            max_position_embeddings=256, sliding_window=None, tie_word_embeddings=False, bos_token_id=1,
            eos_token_id=2, pad_token_id=11, rope_parameters=rope(1.0, 0.1))


def devstral_config():
    return {"model_type": "mistral3", "architectures": ["Mistral3ForConditionalGeneration"],
            "image_token_index": 10, "spatial_merge_size": 2, "multimodal_projector_bias": False,
            "projector_hidden_act": "gelu", "vision_feature_layer": -1,
            "vision_config": {"model_type": "pixtral", "hidden_size": 16, "num_hidden_layers": 1,
                              "num_attention_heads": 2, "intermediate_size": 32, "head_dim": 8, "patch_size": 4,
                              "image_size": 16},
            "text_config": copy.deepcopy(TEXT)}


def ministral3_config():
    c = copy.deepcopy(TEXT)
    c.update(architectures=["Ministral3ForCausalLM"], tie_word_embeddings=True, rope_parameters=rope(0.5, 0.2))
    return c


def hf_devstral(w, cfg):
    """model.language_model.* names (lm_head.weight at the top), plus the tensors of the vision
    tower and projector that a text reader must skip."""
    out = {}
    for k, v in w.items():
        if k.startswith("language_model.model."):
            out["model.language_model." + k[len("language_model.model."):]] = v
        else:
            out[k[len("language_model."):]] = v  # language_model.lm_head.weight
    out["model.vision_tower.transformer.layers.0.attention.q_proj.weight"] = mx.random.normal((16, 16))
    out["model.vision_tower.patch_conv.weight"] = mx.random.normal((16, 3, 4, 4))
    out["model.multi_modal_projector.linear_1.weight"] = mx.random.normal((cfg["hidden_size"], 16))
    out["model.multi_modal_projector.patch_merger.merging_layer.weight"] = mx.random.normal((16, 64))
    return out


def write_mistral_tokenizer(model_dir, vocab_size):
    """A byte-level BPE of the model's vocabulary size, Mistral's control tokens first, trained on
    this file's own text; bos / eos named as the real tokenizer_config.json does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(open(__file__).read().splitlines(), trainer)
    assert [tok.token_to_id(s) for s in SPECIALS] == list(range(len(SPECIALS)))
    tok.save(str(model_dir / "tokenizer.json"))
    with open(model_dir / "tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)


CONFIGS = {
    "devstral": (devstral_config, lambda c: mistral3.Model(mistral3.ModelArgs.from_dict(c)), hf_devstral),
    "ministral3": (ministral3_config, lambda c: ministral3.Model(ministral3.ModelArgs.from_dict(c)),
                   lambda w, c: dict(w)),
}
SEED_INDEX = {"devstral": 0, "ministral3": 1}  # fixed per config: adding one leaves the others as they were


def main():
    write_set("mistral3-tiny", CONFIGS, SEED_INDEX, lambda k, v: None, seeds=(7000, 7100, 8000),
              tokenizer=write_mistral_tokenizer)


if __name__ == "__main__":
    main()
