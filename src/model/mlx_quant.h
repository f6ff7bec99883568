// The `quantization` section of an MLX checkpoint's config.json (which modules are quantized and
// how); the packing itself is tensor/mlx_affine.h.
#pragma once
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::model::mlx {

struct QuantSpec {
  int bits = 4;
  int group_size = 64;
  // "mode": "affine" (scales + biases) or "mxfp4" (E8M0 scales only; bits 4, group_size 32). A
  // per-module override without "mode" is affine: mlx's nn.quantize passes the override dict to
  // to_quantized, whose mode defaults to affine (mlx-lm's gpt_oss routers: {"bits": 8, ...}).
  bool mxfp4 = false;
};

// config.json's `quantization` (or `quantization_config`): defaults plus per-module overrides
// (key = module path such as "model.layers.0.mlp.down_proj", value = {bits, group_size} or false).
struct QuantConfig {
  QuantSpec defaults;
  std::map<std::string, std::optional<QuantSpec>> overrides;
  // Spec for a module (path without ".weight"); nullopt when the module is left unquantized.
  std::optional<QuantSpec> for_module(const std::string& module) const;
};

// Returns nullopt when the config has no quantization section, or when it is a Hugging Face
// `quant_method: "mxfp4"` one (gpt-oss's own *_blocks / *_scales tensors, read by its loader).
// Throws Error on invalid values.
std::optional<QuantConfig> parse_quant_config(const nlohmann::json& config);

}  // namespace rapid::model::mlx
