// All tensors of a model, by HF name, whatever file format they came from. Loaders translate
// format-specific names (GGUF "blk.0.attn_q.weight") and layouts into the HF convention, so
// architectures are written once. One exception, flagged on the Checkpoint: GGUF's pair-ordered
// Q/K rows stay as stored (see Checkpoint::rope_interleaved_qk).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace rapid::model {

class WeightStore {
 public:
  const tensor::Tensor* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const tensor::Tensor& get(const std::string& name) const;  // throws Error naming the missing tensor
  const std::map<std::string, tensor::Tensor>& all() const { return tensors_; }

  void add(tensor::Tensor t) { tensors_[t.name] = std::move(t); }
  void keep_alive(std::shared_ptr<MappedFile> f) { files_.push_back(std::move(f)); }
  void keep_alive(std::shared_ptr<std::vector<uint8_t>> buf) { buffers_.push_back(std::move(buf)); }
  void keep_alive(std::shared_ptr<const uint8_t[]> buf) { arrays_.push_back(std::move(buf)); }
  // The kept-alive file mapping holding p, or nullptr (heap buffers, tensors of tests).
  const MappedFile* mapping_of(const void* p) const {
    for (auto& f : files_)
      if (p >= f->data() && p < f->data() + f->size()) return f.get();
    return nullptr;
  }

 private:
  std::map<std::string, tensor::Tensor> tensors_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers_;
  std::vector<std::shared_ptr<const uint8_t[]>> arrays_;  // uninitialised at allocation (repacked weights)
};

// A heap copy of the n bytes at p, for a reader that needs them aligned. When p lies in the file
// mapping `from`, it is read with pread and the bytes' pages leave the mapping (nothing reads them
// there again): otherwise a misaligned (mlx-lm written) checkpoint stays resident twice, in the
// mapping and in the copies.
std::shared_ptr<std::vector<uint8_t>> aligned_copy(const void* p, size_t n, const MappedFile* from);

// A loaded checkpoint: config + weights + where the tokenizer lives.
struct Checkpoint {
  std::string path;  // model directory or .gguf file
  ModelConfig config;
  WeightStore weights;
  std::string tokenizer_path;  // dir with tokenizer.json, or the .gguf itself
  // q_proj / k_proj weights and biases keep llama.cpp's GGUF row order (llama/mistral files): in
  // each head, stored row 2j+s is HF row s*head_dim/2 + j. Un-permuting would copy those tensors
  // out of the mapping (extra resident memory), so the model instead rotates adjacent pairs in
  // RoPE; q·k per head is the same sum in another order. Consumers that need HF order (convert,
  // comparisons) read rows through dequantize_hf_row.
  bool rope_interleaved_qk = false;
};

// Where HF row (2-D) or element (1-D bias) `i` of tensor `t` is stored: differs from i only for
// the pair-ordered Q/K tensors of a rope_interleaved_qk checkpoint.
int64_t stored_qk_index(const Checkpoint& ck, const tensor::Tensor& t, int64_t i);
// Row r of t in HF order (dequantized, cols() floats); un-permutes pair-ordered Q/K tensors.
void dequantize_hf_row(const Checkpoint& ck, const tensor::Tensor& t, int64_t r, float* out);

// Loads a model directory (config.json + *.safetensors, HF or MLX-quantized) or a .gguf file.
// Throws FileError with the path and reason on any inconsistency.
std::unique_ptr<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace rapid::model
