// All tensors of a model, by HF name, whatever file format they came from. Loaders translate
// format-specific names (GGUF "blk.0.attn_q.weight") and layouts (GGUF's permuted Q/K rows) into
// the HF convention, so architectures are written once.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "model/model_config.h"
#include "model/tensor.h"

namespace rapid {

class WeightStore {
 public:
  const Tensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const Tensor& get(const std::string& name) const;  // throws Error naming the missing tensor
  const std::map<std::string, Tensor>& all() const { return tensors_; }

  void add(Tensor t) { tensors_[t.name] = std::move(t); }
  void keep_alive(std::shared_ptr<MappedFile> f) { files_.push_back(std::move(f)); }
  void keep_alive(std::shared_ptr<std::vector<uint8_t>> buf) { buffers_.push_back(std::move(buf)); }

 private:
  std::map<std::string, Tensor> tensors_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers_;
};

// A loaded checkpoint: config + weights + where the tokenizer lives.
struct Checkpoint {
  std::string path;  // model directory or .gguf file
  ModelConfig config;
  WeightStore weights;
  std::string tokenizer_path;  // dir with tokenizer.json, or the .gguf itself
};

// Loads a model directory (config.json + *.safetensors, HF or MLX-quantized) or a .gguf file.
// Throws FileError with the path and reason on any inconsistency.
std::unique_ptr<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace rapid
