// Model ids and file choice against real hub names: ids as huggingface_hub accepts them
// (validate_repo_id: no "--" or "..", no leading/trailing '-' or '.'), and the file lists of
// real GGUF / MLX / safetensors repos (names as published on the hub).
#include <gtest/gtest.h>

#include "common/error.h"
#include "hub/model_files.h"
#include "hub/model_ref.h"

using rapid::hub::gguf_quant_of;
using rapid::hub::parse_model_ref;
using rapid::hub::select_model_files;

TEST(ModelRef, ParsesIdRevisionAndQuant) {
  auto r = parse_model_ref("mlx-community/Qwen3.5-9B-Instruct-4bit");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "mlx-community/Qwen3.5-9B-Instruct-4bit");
  EXPECT_EQ(r->revision, "main");
  EXPECT_EQ(r->quant, "");
  r = parse_model_ref("unsloth/Qwen3.5-35B-A3B-GGUF@refs/pr/3:Q4_K_M");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo, "unsloth/Qwen3.5-35B-A3B-GGUF");
  EXPECT_EQ(r->revision, "refs/pr/3");
  EXPECT_EQ(r->quant, "Q4_K_M");
  EXPECT_EQ(r->str(), "unsloth/Qwen3.5-35B-A3B-GGUF@refs/pr/3:Q4_K_M");
}

TEST(ModelRef, RefusesWhatIsNotAnId) {
  for (const char* s : {"model.gguf", "./models/x", "/abs/path", "a/b/c", "org--x/name", "org/na..me", "-org/name",
                        "org/name-", "org/", "/name", "org/name:", "org/name@", "org/na me", "org/name@../x"})
    EXPECT_FALSE(parse_model_ref(s)) << s;
}

TEST(ModelFiles, QuantFromFileNames) {
  EXPECT_EQ(gguf_quant_of("Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf"), "Q4_K_M");
  EXPECT_EQ(gguf_quant_of("Q4_K_M/Qwen3.5-35B-A3B-Q4_K_M-00001-of-00002.gguf"), "Q4_K_M");
  EXPECT_EQ(gguf_quant_of("gpt-oss-20b-MXFP4.gguf"), "MXFP4");
  EXPECT_EQ(gguf_quant_of("SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_1");
  EXPECT_EQ(gguf_quant_of("gemma-3-270m-it-IQ4_XS.gguf"), "IQ4_XS");
  EXPECT_EQ(gguf_quant_of("Llama-3.2-1B-Instruct-bf16.gguf"), "BF16");
  EXPECT_EQ(gguf_quant_of("model.gguf"), "");
}

const std::vector<std::string> kGgufRepo = {
    ".gitattributes", "README.md", "Qwen3.5-4B-IQ2_XS.gguf", "Qwen3.5-4B-Q4_K_M.gguf", "Qwen3.5-4B-Q8_0.gguf",
    "Qwen3.5-4B-Q4_K_M-imatrix.gguf", "mmproj-Qwen3.5-4B-F16.gguf",
    "BF16/Qwen3.5-4B-BF16-00001-of-00002.gguf", "BF16/Qwen3.5-4B-BF16-00002-of-00002.gguf"};

TEST(ModelFiles, GgufRepoChoosesOneQuantization) {
  auto m = select_model_files(kGgufRepo, "");
  EXPECT_EQ(m.format, "gguf");
  EXPECT_EQ(m.entry, "Qwen3.5-4B-Q4_K_M.gguf");  // the default; not the -imatrix copy, not mmproj
  EXPECT_EQ(m.files, std::vector<std::string>{"Qwen3.5-4B-Q4_K_M.gguf"});
  m = select_model_files(kGgufRepo, "q8_0");
  EXPECT_EQ(m.entry, "Qwen3.5-4B-Q8_0.gguf");
  m = select_model_files(kGgufRepo, "BF16");  // split: every part, opened by the first
  EXPECT_EQ(m.entry, "BF16/Qwen3.5-4B-BF16-00001-of-00002.gguf");
  EXPECT_EQ(m.files.size(), 2u);
  // Without Q4_K_M: a K type (faster kernels) before the IQ2 file listed first.
  m = select_model_files({"M-IQ2_XS.gguf", "M-Q2_K.gguf", "M-IQ4_XS.gguf"}, "");
  EXPECT_EQ(m.entry, "M-IQ4_XS.gguf");
  m = select_model_files({"M-IQ2_XS.gguf", "M-IQ1_M.gguf", "M-Q2_K.gguf"}, "");
  EXPECT_EQ(m.entry, "M-Q2_K.gguf");
  // Only lattice types and bf16: the largest lattice type, not the bf16 file many times its size.
  m = select_model_files({"M-BF16.gguf", "M-IQ1_M.gguf", "M-IQ2_XXS.gguf", "M-IQ3_XXS.gguf", "M-UD-IQ2_M.gguf"}, "");
  EXPECT_EQ(m.entry, "M-IQ3_XXS.gguf");
  try {
    select_model_files(kGgufRepo, "Q5_K_M");
    FAIL() << "no Q5_K_M in the repo";
  } catch (const rapid::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();  // says what exists
  }
}

TEST(ModelFiles, SplitWithAMissingPartIsRefused) {
  std::vector<std::string> files = {"M-Q4_K_M-00001-of-00003.gguf", "M-Q4_K_M-00002-of-00003.gguf"};
  EXPECT_THROW(select_model_files(files, "Q4_K_M"), rapid::Error);
}

TEST(ModelFiles, SafetensorsRepoTakesWhatTheLoaderReads) {
  std::vector<std::string> files = {
      ".gitattributes", "README.md", "config.json", "generation_config.json", "merges.txt",
      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "chat_template.jinja",
      "onnx/model.onnx", "original/consolidated.safetensors", "pytorch_model.bin", "figures/bench.png"};
  auto m = select_model_files(files, "");
  EXPECT_EQ(m.format, "safetensors");
  EXPECT_EQ(m.entry, "");
  EXPECT_EQ(m.files, (std::vector<std::string>{
                         "chat_template.jinja", "config.json", "generation_config.json", "merges.txt",
                         "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                         "model.safetensors.index.json", "special_tokens_map.json", "tokenizer.json",
                         "tokenizer_config.json", "vocab.json"}));
}

TEST(ModelFiles, NoWeightsIsAClearError) {
  EXPECT_THROW(select_model_files({"README.md", "config.json", "pytorch_model.bin"}, ""), rapid::Error);
  EXPECT_THROW(select_model_files({"config.json", "model.safetensors"}, "Q4_K_M"), rapid::Error);
}
