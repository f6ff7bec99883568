// Which files of a hub repo make a servable model, and which of them the loader opens: a
// safetensors repo needs its config, tokenizer, template and weights (not the other formats,
// READMEs or images); a GGUF repo needs the GGUF of the chosen quantization (all its splits).
#pragma once
#include <string>
#include <vector>

namespace rapid::hub {

struct ModelFiles {
  std::vector<std::string> files;  // to download / expect in the snapshot, sorted
  std::string entry;               // what the loader opens, relative ("" = the snapshot folder)
  std::string format;              // "safetensors" or "gguf"
};

// Chooses from a repo's file list. `quant` picks a GGUF ("Q4_K_M", case-insensitive); without it
// a safetensors model wins, else a GGUF by preference (Q4_K_M, Q4_K_S, Q4_0, Q4_1, Q5_K_M, Q6_K,
// Q8_0, else the first listed).
// Throws Error naming what the repo offers when nothing fits.
ModelFiles select_model_files(const std::vector<std::string>& repo_files, const std::string& quant);

// "Q4_K_M" from "model-Q4_K_M-00001-of-00002.gguf"; "" when the name carries none.
std::string gguf_quant_of(const std::string& filename);

}  // namespace rapid::hub
