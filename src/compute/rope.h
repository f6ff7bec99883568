// Rotary position embedding, HF "rotate_half" convention: dimension i pairs with i + d/2
// (apply), or the GGUF/GPT-J pair layout: dimension 2i pairs with 2i+1 (apply_pairs).
// Frequencies follow transformers' rope init functions (default, linear, llama3, yarn).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rapid::compute {

// A Rope's parameters in transformers' rope_scaling terms. compute reads no config: the model
// fills this from its ModelConfig (model/layers.h rope_params); fields a type does not use are
// ignored.
struct RopeParams {
  int64_t rotary_dim = 0;  // even, ≤ head_dim (partial rotary leaves the tail untouched)
  double base = 10000.0;   // rope_theta
  int64_t max_position_embeddings = 0;
  std::string type = "default";  // default | linear | llama3 | yarn
  double factor = 1.0;
  double low_freq_factor = 0, high_freq_factor = 0;  // llama3
  int64_t original_max_position_embeddings = 0;      // llama3 / yarn (yarn: 0 = max_position_embeddings)
  double beta_fast = 0, beta_slow = 0;               // yarn
  std::optional<double> attention_factor;            // yarn (mscale)
};

class Rope {
 public:
  Rope() = default;
  explicit Rope(const RopeParams& p);

  // Fills cos/sin tables (rotary_dim/2 each) for a position.
  void angles(int64_t pos, float* cos_out, float* sin_out) const;
  // Rotates `n_heads` heads of `head_dim` floats at x (head h at x + h*head_dim).
  void apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) const;
  // Same rotation for heads whose dimensions are stored in pair order (element 2i = rotate_half
  // element i, 2i+1 = element i + half), as llama.cpp's GGUF Q/K rows are: the arithmetic per
  // pair is identical to apply(), only the positions differ.
  void apply_pairs(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) const;

  int64_t half() const { return static_cast<int64_t>(inv_freq_.size()); }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_factor() const { return attn_factor_; }

 private:
  std::vector<float> inv_freq_;
  float attn_factor_ = 1.0f;
};

}  // namespace rapid::compute
