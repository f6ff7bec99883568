// Multi-head latent attention (DeepSeek-V2/V3, GLM-4.7-Flash): queries through a low-rank
// bottleneck (q_a_proj → RMSNorm → q_b_proj), keys and values expanded per head from one shared
// latent (kv_a_proj_with_mqa → RMSNorm → kv_b_proj) plus one rope key part shared by every head.
// Each query / key head is a no-rope part then a rope part (interleaved pairs); value heads may be
// narrower or wider than key heads.
//
// This is the expanded form: the caller caches per-head K and V (cache pages hold one head width
// for both, so K, V and Q are zero-padded to dim() = max(key width, value width); zeros add nothing
// to q·k nor to the weighted value sum). Caching the latent instead (kv_lora_rank + rope floats per
// token for all heads, the absorbed form) is a later memory and speed step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/rope.h"
#include "model/layers.h"
#include "model/weights.h"

namespace rapid::model {

struct MlaShape {
  int64_t hidden = 0, heads = 0;
  int64_t q_lora = 0;  // 0 = a plain q_proj
  int64_t kv_lora = 0, nope = 0, rope = 0, v = 0;
  float eps = 1e-6f;
  int64_t qk() const { return nope + rope; }
  int64_t dim() const { return qk() > v ? qk() : v; }  // the cached (padded) head width
};

// Per-forward buffers, shared by every layer.
struct MlaScratch {
  std::vector<float> qa, qf, ckv, lat, kvb, o;
};

class MlaAttention {
 public:
  // Loads `prefix` ("model.layers.N.self_attn."): q_a_proj, q_a_layernorm, q_b_proj (or q_proj),
  // kv_a_proj_with_mqa, kv_a_layernorm, o_proj, and the K/V expansion as Hugging Face ships it
  // (kv_b_proj [heads * (nope + v), kv_lora], per head its key rows then its value rows) or as
  // mlx-lm's sanitize splits it (embed_q [heads, kv_lora, nope], unembed_out [heads, v, kv_lora],
  // maybe quantized; rebuilt here as an f32 kv_b_proj, kept alive in `owned`).
  MlaAttention(const WeightStore& ws, const std::string& prefix, const MlaShape& shape,
               std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned);

  // q, k, v [n][heads * dim()] of n normed rows xn, rope parts rotated by the rows' tables
  // (cos / sin: rope / 2 floats per row), padding zero.
  void project(const float* xn, int64_t n, const compute::Rope& rope, const float* cos, const float* sin, float* q,
               float* k, float* v, ExecContext& ctx, MlaScratch& s) const;
  // out [n][hidden] = o_proj of the attention output att [n][heads * dim()] (each head's first v).
  void output(const float* att, int64_t n, float* out, ExecContext& ctx, MlaScratch& s) const;
  // Exact (parity) mode: every projection as f32.
  void materialize_f32(compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned);

  const MlaShape& shape() const { return sh_; }

 private:
  void load_kv_b(const WeightStore& ws, const std::string& prefix, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned);

  MlaShape sh_;
  Linear q_a_, q_b_, kv_a_, kv_b_, o_;  // q_b_ is q_proj without a q bottleneck
  std::vector<float> q_a_norm_, kv_a_norm_;
};

}  // namespace rapid::model
