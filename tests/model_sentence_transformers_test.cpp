// Reading a sentence-transformers pipeline (modules.json, the Pooling module's config.json, a
// Normalize module) as sentence-transformers writes it: both the boolean pooling_mode_* keys of
// its older versions and the "pooling_mode" string of newer ones; everything the server cannot
// reproduce is refused with the file and the reason.
#include <gtest/gtest.h>

#include <fstream>

#include "cache_temp_dir.h"
#include "common/error.h"
#include "model/sentence_transformers.h"

namespace rapid::model {
namespace {

const char* kModules =
    R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";

struct StDir {
  CacheTempDir dir;
  void write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((dir.path / rel).parent_path());
    std::ofstream(dir.path / rel) << text;
  }
  std::string path() const { return dir.path.string(); }
  std::string error() const {
    try {
      model::read_sentence_transformers(path());
    } catch (const FileError& e) {
      return e.what();
    }
    return "";
  }
};

std::string pooling_flags(const char* on) {
  std::string s = "{\"word_embedding_dimension\": 64";
  for (const char* m : {"cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens",
                        "lasttoken"})
    s += std::string(", \"pooling_mode_") + m + "\": " + (std::string(m) == on ? "true" : "false");
  return s + "}";
}

TEST(SentenceTransformers, NoModulesJsonIsNotAnEmbeddingModel) {
  StDir d;
  EXPECT_FALSE(model::read_sentence_transformers(d.path()).has_value());
  EXPECT_FALSE(model::read_sentence_transformers(d.path() + "/model.gguf").has_value());
}

TEST(SentenceTransformers, Qwen3EmbeddingPipeline) {
  StDir d;
  d.write("modules.json", kModules);
  d.write("1_Pooling/config.json", pooling_flags("lasttoken"));
  auto p = model::read_sentence_transformers(d.path());
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->mode, PoolingMode::LastToken);
  EXPECT_TRUE(p->normalize);
}

TEST(SentenceTransformers, MeanAndClsWithoutNormalize) {
  for (auto [flag, mode] : {std::pair{"mean_tokens", model::PoolingMode::Mean}, std::pair{"cls_token", model::PoolingMode::Cls}}) {
    StDir d;
    d.write("modules.json",
            R"([{"path":"","type":"sentence_transformers.models.Transformer"},
                {"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
    d.write("1_Pooling/config.json", pooling_flags(flag));
    auto p = read_sentence_transformers(d.path());
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->mode, mode);
    EXPECT_FALSE(p->normalize);
  }
}

TEST(SentenceTransformers, PoolingModeString) {
  StDir d;
  d.write("modules.json", kModules);
  d.write("1_Pooling/config.json", R"({"embedding_dimension": 64, "pooling_mode": "mean"})");
  EXPECT_EQ(model::read_sentence_transformers(d.path())->mode, PoolingMode::Mean);
}

TEST(SentenceTransformers, RefusesWhatItCannotReproduce) {
  struct Case {
    std::string modules, pooling, want;
  };
  const std::string dense = R"([{"path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
                                {"path":"2_Dense","type":"sentence_transformers.models.Dense"}])";
  const Case cases[] = {
      {kModules, pooling_flags("max_tokens"), "pooling mode 'max' is not supported"},
      {kModules, pooling_flags("weightedmean_tokens"), "'weightedmean' is not supported"},
      {kModules, pooling_flags("none"), "no pooling mode is set"},
      {kModules, R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})", "several pooling modes"},
      {kModules, "{not json", "not valid JSON"},
      {dense, pooling_flags("lasttoken"), "module type 'sentence_transformers.models.Dense' is not supported"},
      {R"({"a": 1})", pooling_flags("lasttoken"), "not a JSON array"},
      {R"([{"path":""}])", pooling_flags("lasttoken"), "without a \"type\""},
      {R"([{"path":"","type":"sentence_transformers.models.Transformer"}])", "", "no Pooling module"},
      {R"([{"path":"../x","type":"sentence_transformers.models.Pooling"}])", "", "leaves the model directory"},
  };
  for (const Case& c : cases) {
    StDir d;
    d.write("modules.json", c.modules);
    if (!c.pooling.empty()) d.write("1_Pooling/config.json", c.pooling);
    const std::string err = d.error();
    EXPECT_NE(err.find(c.want), std::string::npos) << err << " (wanted: " << c.want << ")";
    EXPECT_NE(err.find(d.path()), std::string::npos) << err;
  }
}

TEST(SentenceTransformers, MaxSeqLengthFromSentenceBertConfig) {
  StDir d;
  d.write("modules.json", kModules);
  d.write("1_Pooling/config.json", pooling_flags("mean_tokens"));
  EXPECT_EQ(read_sentence_transformers(d.path())->max_seq_length, 0);  // no sentence_bert_config.json
  d.write("sentence_bert_config.json", R"({"max_seq_length": 256, "do_lower_case": false})");
  EXPECT_EQ(read_sentence_transformers(d.path())->max_seq_length, 256);
  d.write("sentence_bert_config.json", R"({"max_seq_length": null})");
  EXPECT_EQ(read_sentence_transformers(d.path())->max_seq_length, 0);
  for (const char* bad : {R"({"max_seq_length": 0})", R"({"max_seq_length": "8"})", R"({"do_lower_case": true})",
                          "[1]", "{oops"}) {
    d.write("sentence_bert_config.json", bad);
    const std::string err = d.error();
    EXPECT_NE(err.find("sentence_bert_config.json"), std::string::npos) << bad << ": " << err;
  }
}

TEST(SentenceTransformers, MissingPoolingConfigNamesTheFile) {
  StDir d;
  d.write("modules.json", kModules);
  const std::string err = d.error();
  EXPECT_NE(err.find("1_Pooling/config.json"), std::string::npos) << err;
}

}  // namespace
}  // namespace rapid::model
