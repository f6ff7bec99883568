#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/checkpoint_hf.h"
#include "model/config_load.h"
#include "model/gguf.h"
#include "model/gguf_names.h"

namespace rapid {

namespace fs = std::filesystem;

const Tensor& WeightStore::get(const std::string& name) const {
  auto* t = find(name);
  if (!t) throw Error("missing weight tensor '" + name + "'");
  return *t;
}

static bool has_gguf_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {};
  return f.read(m, 4) && std::memcmp(m, "GGUF", 4) == 0;
}

static std::unique_ptr<Checkpoint> load_gguf_checkpoint(const std::string& path) {
  auto ck = std::make_unique<Checkpoint>();
  ck->path = path;
  ck->tokenizer_path = path;
  GgufFile g = read_gguf(path);
  ck->config = config_from_gguf(g);
  add_gguf_tensors(g, ck->config, ck->weights);
  return ck;
}

std::unique_ptr<Checkpoint> load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (has_gguf_magic(path)) return load_gguf_checkpoint(path);
    if (fs::path(path).filename() == "config.json" || fs::path(path).extension() == ".safetensors")
      return load_checkpoint(fs::path(path).parent_path().string());
    throw FileError(path, "neither a GGUF file nor a model directory");
  }
  if (!fs::is_directory(path, ec)) throw FileError(path, "no such file or directory");
  if (!fs::exists(fs::path(path) / "config.json")) {
    // A directory holding a single .gguf is that model.
    std::vector<std::string> ggufs;
    for (auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".gguf" && e.path().filename() != "tokenizer.gguf") ggufs.push_back(e.path().string());
    if (ggufs.size() == 1) return load_gguf_checkpoint(ggufs[0]);
    throw FileError(path, ggufs.empty() ? "no config.json and no .gguf file" : "several .gguf files; name one");
  }
  return load_hf_checkpoint(path);
}

}  // namespace rapid
