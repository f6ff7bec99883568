// Tokenizer behaviour beyond HF id parity (that is tests/python/test_tokenizer.py and
// tokenizer_gguf_vocab_test.cpp): streaming detokenization, token bytes, thread safety, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_corpus.h"

namespace {
using rapid::tok::Tokenizer;
const std::string kTok = std::string(RAPID_FIXTURES_DIR) + "/tokenizers/";
const std::string kGguf = std::string(RAPID_FIXTURES_DIR) + "/vocab-gguf/";

const std::vector<rapid::test::CorpusDoc>& corpus() {
  static auto docs = rapid::test::load_tokenizer_corpus();
  return docs;
}

// Property: pushing ids one at a time emits only valid UTF-8 and, with flush, exactly
// decode(all ids). Checked over the whole corpus, with and without skipping special tokens.
class Streaming : public ::testing::TestWithParam<std::string> {};

TEST_P(Streaming, ConcatenationEqualsDecode) {
  auto tok = rapid::tok::load_tokenizer(GetParam());
  size_t docs = 0, tokens = 0;
  for (size_t d = 0; d < corpus().size(); ++d) {
    const auto& doc = corpus()[d];
    auto ids = tok->encode(doc.text, true, true);
    for (bool skip : {true, false}) {
      rapid::tok::StreamingDetokenizer sd(*tok, skip);
      std::string all;
      for (int32_t id : ids) {
        std::string piece = sd.push(id);
        ASSERT_TRUE(rapid::tok::uni::is_valid_utf8(piece)) << GetParam() << " doc " << d;
        all += piece;
      }
      all += sd.flush();
      ASSERT_EQ(all, tok->decode(ids, skip)) << GetParam() << " doc " << d << " (" << doc.kind << ") skip=" << skip;
    }
    ++docs;
    tokens += ids.size();
  }
  // Random id sequences too: byte tokens that never complete a character, specials, ...
  std::mt19937 rng(1);
  for (int k = 0; k < 300; ++k) {
    std::vector<int32_t> ids(1 + rng() % 50);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % tok->vocab_size());
    rapid::tok::StreamingDetokenizer sd(*tok, false);
    std::string all;
    for (int32_t id : ids) all += sd.push(id);
    all += sd.flush();
    ASSERT_EQ(all, tok->decode(ids, false)) << GetParam() << " random case " << k;
  }
  std::printf("[ stream ] %s: %zu docs, %zu tokens\n", GetParam().c_str(), docs, tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, Streaming,
    ::testing::Values(kTok + "gpt2", kTok + "llama2", kTok + "llama3_1", kTok + "qwen3", kTok + "gemma3",
                      kTok + "mistral_nemo", kGguf + "ggml-vocab-llama-spm.gguf",
                      kGguf + "ggml-vocab-bert-bge.gguf"),
    [](const auto& info) {
      std::string n = std::filesystem::path(info.param).filename().string();
      for (auto& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

// The input text is the reference: for byte-level BPE, the bytes of the tokens of a valid
// UTF-8 text concatenate back to it; for SentencePiece (llama2) to it with the "▁" prefix.
TEST(TokenBytes, ConcatenateBackToTheText) {
  for (std::string name : {"gpt2", "llama3_1", "llama2"}) {
    auto tok = rapid::tok::load_tokenizer(kTok + name);
    size_t checked = 0;
    for (auto& doc : corpus()) {
      if (!rapid::tok::uni::is_valid_utf8(doc.text) || doc.kind == "special") continue;
      // A literal "▁" in the text is a space once decoded by SentencePiece.
      if (name == "llama2" && doc.text.find("\u2581") != std::string::npos) continue;
      std::string cat;
      for (int32_t id : tok->encode(doc.text, false, false)) cat += tok->token_bytes(id);
      std::string want = doc.text;
      if (name == "llama2" && !want.empty()) want = " " + want;
      ASSERT_EQ(cat, want) << name << " " << doc.kind;
      ++checked;
    }
    EXPECT_GT(checked, 1000u);
  }
}

TEST(Tokenizer, ConcurrentEncodeMatchesSequential) {
  auto tok = rapid::tok::load_tokenizer(kTok + "qwen3");
  std::vector<std::vector<int32_t>> want;
  for (size_t i = 0; i < corpus().size(); i += 3) want.push_back(tok->encode(corpus()[i].text));
  std::vector<std::vector<int32_t>> got[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < corpus().size(); i += 3) got[t].push_back(tok->encode(corpus()[i].text));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], want);
}

TEST(Tokenizer, SpecialTokenMetadata) {
  // Values as in the fixtures' tokenizer_config.json / GGUF metadata.
  auto qwen = rapid::tok::load_tokenizer(kTok + "qwen3");
  EXPECT_EQ(qwen->eos_token(), "<|im_end|>");
  ASSERT_EQ(qwen->eos_ids().size(), 1u);
  EXPECT_EQ(qwen->id_to_piece(qwen->eos_ids()[0]), "<|im_end|>");
  EXPECT_TRUE(qwen->is_special(qwen->eos_ids()[0]));
  EXPECT_FALSE(qwen->bos_id().has_value());
  EXPECT_NE(qwen->chat_template().find("im_start"), std::string::npos);
  auto llama = rapid::tok::load_tokenizer(kTok + "llama2");
  ASSERT_TRUE(llama->bos_id().has_value());
  EXPECT_EQ(llama->id_to_piece(*llama->bos_id()), "<s>");
  auto spm = rapid::tok::load_tokenizer(kGguf + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(spm->bos_id().has_value());
  EXPECT_EQ(spm->bos_token(), "<s>");
  EXPECT_EQ(spm->encode("hi", true).front(), *spm->bos_id());
}

TEST(Tokenizer, ParseSpecialToggle) {
  auto tok = rapid::tok::load_tokenizer(kTok + "qwen3");
  auto with = tok->encode("<|im_start|>", false, true);
  ASSERT_EQ(with.size(), 1u);
  EXPECT_EQ(tok->id_to_piece(with[0]), "<|im_start|>");
  auto without = tok->encode("<|im_start|>", false, false);
  EXPECT_GT(without.size(), 1u);
  EXPECT_EQ(tok->decode(without), "<|im_start|>");
}

TEST(Tokenizer, LoadErrorsNameThePath) {
  EXPECT_THROW(rapid::tok::load_tokenizer("/nonexistent/dir"), rapid::FileError);
  auto dir = std::filesystem::temp_directory_path() / "rapid_tok_err";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}";
  }
  try {
    rapid::tok::load_tokenizer(dir.string());
    FAIL() << "expected FileError";
  } catch (const rapid::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("merge"), std::string::npos);
  }
  {
    std::ofstream(dir / "x.gguf") << "GGUF";
  }
  EXPECT_THROW(rapid::tok::load_tokenizer((dir / "x.gguf").string()), rapid::FileError);
  std::filesystem::remove_all(dir);
}

}  // namespace
