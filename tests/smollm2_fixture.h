// The real SmolLM2-135M-Instruct Q4_1 GGUF the engine tests run on (scripts/fetch_models.sh), with
// its transformers greedy golden (tests/golden/model, scripts/make_parity_goldens.py), loaded once
// per test binary. Tests skip (saying why) when the model has not been downloaded.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/arch.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace rapid::fixtures {

inline std::string smollm2_gguf_path() {
  if (const char* e = std::getenv("RAPID_SMOLLM2_GGUF")) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") +
         "/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
}

struct SmolLM2 {
  std::shared_ptr<model::Checkpoint> ckpt;
  std::shared_ptr<model::Model> model;
  std::shared_ptr<const tok::Tokenizer> tok;
  nlohmann::json golden;  // smollm2_q4_1_greedy.json
};

inline SmolLM2& smollm2() {
  static SmolLM2 f = [] {
    SmolLM2 x;
    x.ckpt = model::load_checkpoint(smollm2_gguf_path());
    model::ModelOptions o;
    o.num_threads = 2;
    x.model = model::create_model(x.ckpt, o);
    x.tok = tok::load_tokenizer(smollm2_gguf_path());
    std::ifstream in(std::string(RAPID_SOURCE_DIR) + "/tests/golden/model/smollm2_q4_1_greedy.json");
    x.golden = nlohmann::json::parse(in);
    return x;
  }();
  return f;
}

}  // namespace rapid::fixtures

#define NEED_SMOLLM2()                                                   \
  if (!std::filesystem::exists(rapid::fixtures::smollm2_gguf_path()))    \
  GTEST_SKIP() << "model not downloaded: " << rapid::fixtures::smollm2_gguf_path()
