#include "model/mlx_quant.h"

#include "common/error.h"
#include "tensor/mlx_affine.h"

namespace rapid::model::mlx {

std::optional<QuantSpec> QuantConfig::for_module(const std::string& module) const {
  auto it = overrides.find(module);
  if (it != overrides.end()) return it->second;
  return defaults;
}

static QuantSpec parse_spec(const nlohmann::json& j, const QuantSpec& base, const std::string& where) {
  QuantSpec s = base;
  s.mxfp4 = false;
  if (j.contains("mode") && j["mode"].is_string()) {
    const std::string mode = j["mode"].get<std::string>();
    if (mode != "affine" && mode != "mxfp4")
      throw Error(where + ": unsupported quantization mode '" + mode + "' (affine, mxfp4)");
    s.mxfp4 = mode == "mxfp4";
  }
  if (s.mxfp4) {  // mlx's only MXFP4 geometry; the top level's affine defaults do not apply
    if ((j.contains("bits") && j["bits"] != 4) || (j.contains("group_size") && j["group_size"] != 32))
      throw Error(where + ": mode 'mxfp4' needs bits 4 and group_size 32");
    s.bits = 4;
    s.group_size = 32;
    return s;
  }
  if (j.contains("bits")) {
    if (!j["bits"].is_number_integer()) throw Error(where + ": 'bits' is not an integer");
    s.bits = j["bits"].get<int>();
  }
  if (j.contains("group_size")) {
    if (!j["group_size"].is_number_integer()) throw Error(where + ": 'group_size' is not an integer");
    s.group_size = j["group_size"].get<int>();
  }
  if (!tensor::mlx::valid_bits(s.bits))
    throw Error(where + ": unsupported bits " + std::to_string(s.bits) + " (2,3,4,5,6,8)");
  if (!tensor::mlx::valid_group_size(s.group_size))
    throw Error(where + ": unsupported group_size " + std::to_string(s.group_size) + " (32,64,128)");
  return s;
}

std::optional<QuantConfig> parse_quant_config(const nlohmann::json& config) {
  const nlohmann::json* q = nullptr;
  if (config.contains("quantization") && config["quantization"].is_object())
    q = &config["quantization"];
  else if (config.contains("quantization_config") && config["quantization_config"].is_object())
    q = &config["quantization_config"];
  if (!q) return std::nullopt;
  // A transformers quantization_config of another method (gptq, awq, ...) is not ours; gpt-oss's
  // "mxfp4" names its tensors itself (experts.*_blocks / *_scales).
  if (q->contains("quant_method") && (*q)["quant_method"] == "mxfp4") return std::nullopt;
  if (q->contains("quant_method") && (*q)["quant_method"].is_string() &&
      (*q)["quant_method"] != "mlx")
    throw Error("unsupported quantization method '" + (*q)["quant_method"].get<std::string>() + "'");
  QuantConfig qc;
  qc.defaults = parse_spec(*q, QuantSpec{}, "quantization");
  for (auto& [key, val] : q->items()) {
    if (val.is_object())
      qc.overrides[key] = parse_spec(val, qc.defaults, "quantization." + key);
    else if (val.is_boolean() && !val.get<bool>())
      qc.overrides[key] = std::nullopt;
  }
  return qc;
}

}  // namespace rapid::model::mlx
