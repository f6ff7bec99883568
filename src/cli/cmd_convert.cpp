// `rapid-mlx convert`: GGUF / HF / MLX checkpoints to HF safetensors (dequantized) or MLX
// affine-quantized safetensors.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "model/convert.h"

namespace rapid::cli {
namespace {

struct Args {
  std::string from, to;
  model::ConvertOptions opt;
};

FlagTable table(Args& a) {
  return FlagTable(
      "convert",
      {text("--from", "PATH", "a .gguf file or a model directory (HF / MLX safetensors)", &a.from).required(),
       text("--to", "DIR", "the output directory", &a.to).required(),
       choice("--quantize", "MLX affine-quantize to this many bits (mlx_lm.convert -q layout)", &a.opt.quantize_bits,
              {{"4", 4}, {"8", 8}, {"2", 2}, {"3", 3}, {"5", 5}, {"6", 6}})
           .alias("-q"),
       choice("--group-size", "weights per quantization scale", &a.opt.group_size, {{"32", 32}, {"64", 64}, {"128", 128}}),
       choice("--dtype", "float type of the output without --quantize", &a.opt.dtype,
              {{"f32", tensor::DType::F32}, {"f16", tensor::DType::F16}, {"bf16", tensor::DType::BF16}, {"float32", tensor::DType::F32},
               {"float16", tensor::DType::F16}, {"bfloat16", tensor::DType::BF16}})
           .default_is("the source's float type, f32 for quantized sources")},
      "convert GGUF / HF / MLX checkpoints (dequantize, MLX-quantize)", {},
      "Without --quantize: HF safetensors, dequantized to --dtype. With --quantize: MLX affine-quantized.\n"
      "A GGUF source's tokenizer is kept as DIR/tokenizer.gguf.");
}

int run(Args& a) {
  auto rep = model::convert_checkpoint(a.from, a.to, a.opt);
  std::printf("converted %s -> %s: %d tensors (%d quantized), %.1f MB\n", a.from.c_str(), a.to.c_str(), rep.tensors,
              rep.quantized, double(rep.bytes) / 1e6);
  return 0;
}

Registrar reg("convert", table, run);

}  // namespace
}  // namespace rapid::cli
