// `--model` as users write it, for every command that loads a model: a path, or a hub id
// (`org/name[@revision][:QUANT]`) taken from the Hugging Face cache, pulled first when missing
// (by `rapid-mlx-http pull`, so this binary stays free of the network stack).
#pragma once
#include <string>

namespace rapid::cli {

struct ModelArg {
  std::string path;  // what the loader opens
  std::string name;  // how to call it: the hub id, else the file or folder name
};

ModelArg resolve_model_arg(const std::string& spec);

}  // namespace rapid::cli
