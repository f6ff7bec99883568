// The `quantization` section of an MLX checkpoint's config.json (which modules are quantized and
// how); the packing itself is tensor/mlx_affine.h.
#pragma once
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::mlx {

struct QuantSpec {
  int bits = 4;
  int group_size = 64;
};

// config.json's `quantization` (or `quantization_config`): defaults plus per-module overrides
// (key = module path such as "model.layers.0.mlp.down_proj", value = {bits, group_size} or false).
struct QuantConfig {
  QuantSpec defaults;
  std::map<std::string, std::optional<QuantSpec>> overrides;
  // Spec for a module (path without ".weight"); nullopt when the module is left unquantized.
  std::optional<QuantSpec> for_module(const std::string& module) const;
};

// Returns nullopt when the config has no quantization section. Throws Error on invalid values.
std::optional<QuantConfig> parse_quant_config(const nlohmann::json& config);

}  // namespace rapid::mlx
