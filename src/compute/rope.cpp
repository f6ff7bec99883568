#include "compute/rope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace rapid::compute {

Rope::Rope(const RopeParams& sc) {
  const int64_t dim = sc.rotary_dim, max_pos = sc.max_position_embeddings;
  const double base = sc.base;
  if (dim <= 0 || dim % 2) throw Error("rope: rotary dimension must be even and positive");
  const int64_t half = dim / 2;
  inv_freq_.resize(half);
  // As transformers: base ** (arange(0, dim, 2) / dim) evaluated in float32.
  std::vector<float> pos_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    pos_freq[i] = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(base)), static_cast<double>(e)));
    inv_freq_[i] = 1.0f / pos_freq[i];
  }
  const std::string& type = sc.type;
  if (type == "default" || type.empty()) {
  } else if (type == "linear") {
    for (auto& f : inv_freq_) f = static_cast<float>(f / sc.factor);
  } else if (type == "llama3") {
    double old_ctx = static_cast<double>(sc.original_max_position_embeddings);
    double low_wl = old_ctx / sc.low_freq_factor, high_wl = old_ctx / sc.high_freq_factor;
    for (auto& f : inv_freq_) {
      double wl = 2 * M_PI / f;
      double out = wl > low_wl ? f / sc.factor : f;
      if (!(wl < high_wl) && !(wl > low_wl)) {
        double smooth = (old_ctx / wl - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        out = (1 - smooth) * out / sc.factor + smooth * out;
      }
      f = static_cast<float>(out);
    }
  } else if (type == "yarn") {
    double factor = sc.factor;
    double orig = sc.original_max_position_embeddings > 0 ? static_cast<double>(sc.original_max_position_embeddings)
                                                          : static_cast<double>(max_pos);
    attn_factor_ = static_cast<float>(sc.attention_factor ? *sc.attention_factor
                                      : factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0);
    auto corr_dim = [&](double rot) {
      return (dim * std::log(orig / (rot * 2 * M_PI))) / (2 * std::log(base));
    };
    double low = std::max(0.0, std::floor(corr_dim(sc.beta_fast)));
    double high = std::min(static_cast<double>(dim - 1), std::ceil(corr_dim(sc.beta_slow)));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      double extra = 1.0 - ramp;  // weight of the extrapolated (unscaled) frequency
      double interp = 1.0 / (factor * pos_freq[i]);
      inv_freq_[i] = static_cast<float>(interp * (1 - extra) + (1.0 / pos_freq[i]) * extra);
    }
  } else {
    throw Error("rope: unsupported rope_scaling type '" + type + "'");
  }
}

void Rope::angles(int64_t pos, float* c, float* s) const {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    float a = p * inv_freq_[i];  // f32 product, as the reference computes it
    c[i] = static_cast<float>(std::cos(static_cast<double>(a))) * attn_factor_;
    s[i] = static_cast<float>(std::sin(static_cast<double>(a))) * attn_factor_;
  }
}

void Rope::apply(float* x, int64_t n_heads, int64_t head_dim, const float* c, const float* s) const {
  const int64_t h = half();
  for (int64_t hd = 0; hd < n_heads; ++hd) {
    float* v = x + hd * head_dim;
    for (int64_t i = 0; i < h; ++i) {
      float a = v[i], b = v[i + h];
      v[i] = a * c[i] - b * s[i];
      v[i + h] = b * c[i] + a * s[i];
    }
  }
}

void Rope::apply_pairs(float* x, int64_t n_heads, int64_t head_dim, const float* c, const float* s) const {
  const int64_t h = half();
  for (int64_t hd = 0; hd < n_heads; ++hd) {
    float* v = x + hd * head_dim;
    for (int64_t i = 0; i < h; ++i) {
      float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c[i] - b * s[i];
      v[2 * i + 1] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace rapid::compute
