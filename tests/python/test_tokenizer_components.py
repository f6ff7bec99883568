"""Pipeline components the fixture tokenizers do not use (WordPiece/BertNormalizer, Metaspace,
Whitespace, Digits, Punctuation, NFKC, Lowercase, Strip, RobertaProcessing, BPEDecoder, added
tokens with lstrip/rstrip/single_word/normalized, ...), checked against Hugging Face tokenizers:
small tokenizers are trained with tokenizers' own trainers on part of the corpus, saved as
tokenizer.json, then both implementations encode and decode the whole corpus.
"""
import os
import struct
import subprocess

import pytest

from test_tokenizer import binary, load_corpus, run_detokenize, run_tokenize, first_diff

tk = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402
from tokenizers import AddedToken, Tokenizer  # noqa: E402

SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "<s>", "</s>"]


def wordpiece():
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    t.normalizer = normalizers.BertNormalizer(lowercase=True)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece()
    return t, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=SPECIALS), \
        lambda t: setattr(t, "post_processor", processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")),
                                                                        ("[CLS]", t.token_to_id("[CLS]"))))


def metaspace(scheme):
    def make():
        t = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=True, byte_fallback=False))
        t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Strip(left=False, right=True)])
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
        t.decoder = decoders.Metaspace(prepend_scheme=scheme)
        return t, trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIALS), \
            lambda t: t.add_tokens([AddedToken("<sep>", lstrip=True, rstrip=True),
                                    AddedToken("word", single_word=True, normalized=True),
                                    AddedToken("Hello", normalized=False)])
    return make


def classic_bpe():
    t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.Punctuation()])
    t.decoder = decoders.BPEDecoder(suffix="</w>")
    return t, trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIALS, continuing_subword_prefix="##",
                                  end_of_word_suffix="</w>"), \
        lambda t: setattr(t, "post_processor", processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                                           ("<s>", t.token_to_id("<s>"))))


def byte_level_prefix():
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFKD()
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.ByteLevel(add_prefix_space=True)])
    t.decoder = decoders.ByteLevel()
    return t, trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()), \
        lambda t: (t.add_special_tokens([AddedToken("<|tool|>", lstrip=True)]),
                   t.add_tokens([AddedToken(" spaced ", normalized=True)]))


CONFIGS = {"wordpiece_bert": wordpiece, "metaspace_first": metaspace("first"),
           "metaspace_always": metaspace("always"), "metaspace_never": metaspace("never"),
           "classic_bpe": classic_bpe, "byte_level_prefix": byte_level_prefix}


@pytest.fixture(scope="module")
def corpus_texts():
    docs = load_corpus()
    return docs, [d.decode("utf-8", errors="replace") for _, d in docs]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_component_pipeline_matches_hf(config, corpus_texts, tmp_path):
    docs, texts = corpus_texts
    tok, trainer, finish = CONFIGS[config]()
    tok.train_from_iterator(texts[::8], trainer=trainer)
    finish(tok)
    tok_dir = tmp_path / config
    tok_dir.mkdir()
    tok.save(str(tok_dir / "tokenizer.json"))
    # Every 3rd document keeps this test fast; strings with the added tokens are appended.
    sample = texts[::3] + ["Hello <sep>  word words sword <sep>x", " <|tool|> spaced  spaced x", "  word  "]
    rec = tmp_path / "sample.rec"
    with open(rec, "wb") as f:
        for s in sample:
            b = s.encode()
            f.write(struct.pack("<I", len(b)) + b)
    want = [e.ids for e in tok.encode_batch(sample, add_special_tokens=True)]
    got = run_tokenize(str(tok_dir), str(rec))
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    if bad:
        i = bad[0]
        k = first_diff(got[i], want[i])
        pytest.fail(f"{config}: {len(bad)}/{len(want)} differ; text {sample[i][:80]!r} hf "
                    f"{[tok.id_to_token(t) for t in want[i][max(0, k-3):k+4]]} ours "
                    f"{[tok.id_to_token(t) for t in got[i][max(0, k-3):k+4]]}")
    for skip in (False, True):
        want_txt = tok.decode_batch(want, skip_special_tokens=skip)
        got_txt = run_detokenize(str(tok_dir), want, *(["--skip-special"] if skip else []))
        bad = [i for i in range(len(want_txt)) if got_txt[i] != want_txt[i]]
        assert not bad, (f"{config} skip={skip}: {len(bad)} decodes differ; hf {want_txt[bad[0]][:120]!r} "
                         f"ours {got_txt[bad[0]][:120]!r}")
