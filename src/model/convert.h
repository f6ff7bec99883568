// Checkpoint conversion (`rapid-mlx convert`): any loadable model (GGUF, HF safetensors, MLX)
// → an HF-layout safetensors directory, either float (dequantized) or MLX affine-quantized with
// the layout `mlx_lm.convert -q` writes (Linear/Embedding weights packed, norms float, config
// gets `quantization` and `quantization_config`).
#pragma once
#include <optional>
#include <string>

#include "tensor/tensor.h"

namespace rapid::model {

struct ConvertOptions {
  std::optional<int> quantize_bits;   // 2,3,4,5,6,8 → MLX affine; none → float
  int group_size = 64;
  std::optional<tensor::DType> dtype;         // F32/F16/BF16 for float tensors and MLX scales/biases
};

struct ConvertReport {
  int tensors = 0, quantized = 0;
  size_t bytes = 0;
};

// Writes `to` (created if needed): model.safetensors, config.json, generation_config.json, and
// the tokenizer (HF files copied; for a GGUF source the .gguf itself as tokenizer.gguf, which
// load_checkpoint reports as the tokenizer path). Throws Error/FileError.
ConvertReport convert_checkpoint(const std::string& from, const std::string& to, const ConvertOptions& opt);

}  // namespace rapid::model
