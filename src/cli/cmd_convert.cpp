// rapid-mlx convert --from PATH --to DIR [--quantize 2|3|4|5|6|8] [--group-size 32|64|128]
//                   [--dtype f32|f16|bf16]
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli/command.h"
#include "model/convert.h"

namespace {

constexpr const char* kUsage =
    "usage: rapid-mlx convert --from PATH --to DIR [--quantize 4|8|2|3|5|6] [--group-size 64]\n"
    "                         [--dtype f32|f16|bf16]\n"
    "  PATH: a .gguf file or a model directory (HF / MLX safetensors).\n"
    "  Without --quantize: HF safetensors, dequantized to --dtype (default: the source's float type,\n"
    "  f32 for quantized sources). With --quantize: MLX affine-quantized (mlx_lm.convert -q layout).\n"
    "  A GGUF source's tokenizer is kept as DIR/tokenizer.gguf.\n";

int run(const std::vector<std::string>& args) {
  std::string from, to;
  rapid::ConvertOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "convert: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    const std::string& v = args[++i];
    try {
      if (a == "--from") from = v;
      else if (a == "--to") to = v;
      else if (a == "--quantize" || a == "-q") opt.quantize_bits = std::stoi(v);
      else if (a == "--group-size") opt.group_size = std::stoi(v);
      else if (a == "--dtype") {
        if (v == "f32" || v == "float32") opt.dtype = rapid::DType::F32;
        else if (v == "f16" || v == "float16") opt.dtype = rapid::DType::F16;
        else if (v == "bf16" || v == "bfloat16") opt.dtype = rapid::DType::BF16;
        else {
          std::fprintf(stderr, "convert: unknown --dtype '%s'\n", v.c_str());
          return 2;
        }
      } else {
        std::fprintf(stderr, "convert: unknown option '%s'\n%s", a.c_str(), kUsage);
        return 2;
      }
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "convert: %s expects a number, got '%s'\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (from.empty() || to.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto rep = rapid::convert_checkpoint(from, to, opt);
  std::printf("converted %s -> %s: %d tensors (%d quantized), %.1f MB\n", from.c_str(), to.c_str(), rep.tensors,
              rep.quantized, double(rep.bytes) / 1e6);
  return 0;
}

rapid::cli::Registrar reg("convert", "convert GGUF / HF / MLX checkpoints (dequantize, MLX-quantize)", run);

}  // namespace
