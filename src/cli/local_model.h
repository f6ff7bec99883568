// A model loaded into this process for the terminal commands (`run`, `chat`): weights, tokenizer
// and the sampling defaults its generation_config gives, overridable from the command line.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling.h"
#include "model/arch.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {

struct LoadOptions {
  int threads = 0;          // 0: all cores
  tensor::DType kv = tensor::DType::F16;
  bool exact = false;       // f32 reference path
};

struct LocalModel {
  std::shared_ptr<model::Checkpoint> ckpt;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<model::Model> model;
  double load_seconds = 0;
};

// `path` as resolve_model_arg gives it.
LocalModel load_local_model(const std::string& path, const LoadOptions& opts);

struct SamplingOverrides {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
};
// The command line's values, else generation_config.json's, else greedy.
engine::SamplingParams sampling_for(const SamplingOverrides& o, const model::ModelConfig& c);

// The conversation through the model's chat template with the generation prompt, as token ids
// (transformers' apply_chat_template); nullopt when the model has no template.
std::optional<std::vector<int32_t>> render_chat(const tok::Tokenizer& tok, const nlohmann::ordered_json& messages);

}  // namespace rapid::cli
