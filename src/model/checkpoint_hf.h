// Loading of an HF / MLX model directory: config.json (+ generation_config.json) and its
// safetensors shards; MLX-quantized Linear/Embedding weights become one MLX_AFFINE tensor.
// Every tensor's data (and MLX scales/biases) is aligned to its element size: views of the
// mapping when the file is aligned, owned copies otherwise (files written without header padding).
#pragma once
#include <memory>
#include <string>

#include "model/weights.h"

namespace rapid::model {

std::unique_ptr<Checkpoint> load_hf_checkpoint(const std::string& dir);

// Strips wrapper prefixes so every architecture sees "model.*"/"lm_head.*" names
// ("language_model.model.x" / "model.language_model.x" → "model.x"). Returns "" for tensors of
// other towers (vision, audio, projector) that a text model does not use.
std::string normalize_hf_name(const std::string& name);

}  // namespace rapid::model
