// ModelConfig from its sources: HF config.json (+ generation_config.json), or GGUF metadata;
// and back to an HF config.json (for `convert`).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/model_config.h"

namespace rapid::model {

// `config` is config.json; `generation` is generation_config.json or null. Reads a multimodal
// config's `text_config`. Throws Error on missing/invalid required fields.
ModelConfig config_from_hf(const nlohmann::json& config, const nlohmann::json& generation = nullptr);

// Reads <dir>/config.json and, if present, <dir>/generation_config.json. Throws FileError.
ModelConfig load_hf_config(const std::string& dir);

// GGUF metadata (and tensor shapes, for vocab size / tied embeddings / biases).
ModelConfig config_from_gguf(const GgufFile& g);

// HF-style config.json / generation_config.json for a config (what `convert` writes).
nlohmann::ordered_json config_to_hf_json(const ModelConfig& c);
nlohmann::ordered_json generation_config_to_hf_json(const ModelConfig& c);

}  // namespace rapid::model
