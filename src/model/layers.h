// Building blocks shared by the architectures: a linear layer over any weight format, norm
// weights held as f32, and the per-forward scratch buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/matmul.h"
#include "compute/rope.h"
#include "compute/thread_pool.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace rapid::model {

struct ExecContext {
  compute::ThreadPool* pool = nullptr;
  compute::MatmulScratch scratch;
  compute::MatmulPath path = compute::MatmulPath::Fast;
};

struct Linear {
  compute::WeightView w;
  std::vector<float> bias;  // empty = none
  bool present() const { return w.data != nullptr; }
  int64_t out_features() const { return w.rows; }
  int64_t in_features() const { return w.cols; }
  // y [n, out] = x [n, in] · Wᵀ (+ b)
  void operator()(const float* x, int64_t n, float* y, ExecContext& ctx) const;
  void add_bias(float* y, int64_t n) const;  // y [n, out] += b (no-op without bias)
};

// Loads `name` as a Linear with `bias_name` if that tensor exists; checks the shape.
Linear load_linear(const WeightStore& ws, const std::string& name, int64_t out, int64_t in,
                   bool require_bias = false);
// Exact (parity) mode: replaces l's weights by an f32 copy (kept alive in `owned`) so each step
// is an f32 GEMV over exactly the values the reference multiplies with. No-op if absent or f32.
void materialize_f32(Linear& l, compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned);
// A 1-D tensor (norm weight, bias) as f32; checks its length.
std::vector<float> load_vector(const WeightStore& ws, const std::string& name, int64_t n);
// The sizes every decoder needs (throws Error naming `path` and `what` when one is missing or
// inconsistent), with the defaults HF configs leave implicit filled in: KV heads = attention heads,
// head_dim = hidden / heads.
void check_decoder_sizes(ModelConfig& c, const std::string& path, const std::string& what);
// The config's RoPE scaling as compute's parameters, for `rotary_dim` dimensions rotating at `base`.
compute::RopeParams rope_params(const ModelConfig& c, int64_t rotary_dim, double base, const RopeScaling& scaling);
// The factor queries at `pos` are scaled by (config.query_scale_beta; 1 when off), in f32 as
// transformers' and mlx-lm's get_llama_4_attn_scale compute it.
float query_scale(const ModelConfig& c, int64_t pos);

}  // namespace rapid::model
