// Rotary position embedding, HF "rotate_half" convention: dimension i pairs with i + d/2.
// Frequencies follow transformers' rope init functions (default, linear, llama3, yarn).
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace rapid {

class Rope {
 public:
  Rope() = default;
  // `rotary_dim` ≤ head_dim (partial rotary leaves the tail untouched).
  Rope(int64_t rotary_dim, double base, const RopeScaling& scaling, int64_t max_position_embeddings);

  // Fills cos/sin tables (rotary_dim/2 each) for a position.
  void angles(int64_t pos, float* cos_out, float* sin_out) const;
  // Rotates `n_heads` heads of `head_dim` floats at x (head h at x + h*head_dim).
  void apply(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin) const;

  int64_t half() const { return static_cast<int64_t>(inv_freq_.size()); }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_factor() const { return attn_factor_; }

 private:
  std::vector<float> inv_freq_;
  float attn_factor_ = 1.0f;
};

}  // namespace rapid
