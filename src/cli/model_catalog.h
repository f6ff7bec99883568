// What `serve --models-dir DIR` and `serve --hf-cache` can load on demand: every model a folder
// holds and every model repo in the Hugging Face cache, by the name a request's `model` uses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rapid::cli {

struct CatalogEntry {
  std::string name;    // as resolve_model_arg names it: the file or folder name, or the hub id
  std::string source;  // what resolve_model_arg opens: a path or the hub id
};

// DIR's .gguf files and model folders (config.json), and those one level down, sorted by name.
std::vector<CatalogEntry> scan_models_dir(const std::string& dir);
// The Hugging Face cache's model repos whose main revision resolves to a loadable model.
std::vector<CatalogEntry> scan_hf_cache();
// The bytes of a model's weight files (a .gguf, or a folder's *.safetensors): what its mapping
// makes resident.
uint64_t weight_bytes(const std::string& path);

}  // namespace rapid::cli
