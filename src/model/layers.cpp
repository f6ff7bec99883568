#include "model/layers.h"

#include <cmath>

#include "common/error.h"
#include "tensor/dequantize.h"

namespace rapid::model {

void Linear::operator()(const float* x, int64_t n, float* y, ExecContext& ctx) const {
  compute::matmul(w, x, n, y, *ctx.pool, ctx.scratch, ctx.path);
  add_bias(y, n);
}

void Linear::add_bias(float* y, int64_t n) const {
  if (!bias.empty())
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < w.rows; ++r) y[t * w.rows + r] += bias[r];
}

Linear load_linear(const WeightStore& ws, const std::string& name, int64_t out, int64_t in,
                   bool require_bias) {
  const tensor::Tensor& t = ws.get(name + ".weight");
  if (t.shape.size() != 2 || t.rows() != out || t.cols() != in)
    throw Error("weight " + t.name + " has shape [" +
                (t.shape.size() == 2 ? std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1])
                                     : std::string("?")) +
                "], expected [" + std::to_string(out) + ", " + std::to_string(in) + "]");
  Linear l;
  l.w = compute::WeightView::of(t);
  if (require_bias || ws.find(name + ".bias")) l.bias = load_vector(ws, name + ".bias", out);
  return l;
}

void materialize_f32(Linear& l, compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned) {
  if (!l.present() || l.w.dtype == tensor::DType::F32) return;
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(l.w.rows * l.w.cols * 4));
  auto* f = reinterpret_cast<float*>(buf->data());
  pool.parallel_for(l.w.rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) weight_row_f32(l.w, r, f + r * l.w.cols);
  });
  compute::WeightView v;
  v.dtype = tensor::DType::F32;
  v.data = f;
  v.rows = l.w.rows;
  v.cols = l.w.cols;
  v.row_stride = static_cast<size_t>(l.w.cols) * 4;
  l.w = v;
  owned.push_back(std::move(buf));
}

std::vector<float> load_vector(const WeightStore& ws, const std::string& name, int64_t n) {
  const tensor::Tensor& t = ws.get(name);
  if (t.numel() != n)
    throw Error("tensor " + name + " has " + std::to_string(t.numel()) + " elements, expected " +
                std::to_string(n));
  std::vector<float> v(static_cast<size_t>(n));
  tensor::Tensor flat = t;
  flat.shape = {1, n};
  tensor::dequantize_row(flat, 0, v.data());
  return v;
}

void check_decoder_sizes(ModelConfig& c, const std::string& path, const std::string& what) {
  if (c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.num_attention_heads <= 0 || c.vocab_size <= 0 ||
      (c.intermediate_size <= 0 && c.layer_is_moe.empty()))
    throw Error(path + ": config lacks sizes for " + what);
  if (c.num_key_value_heads <= 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.head_dim <= 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0) throw Error(path + ": attention heads not a multiple of KV heads");
}

compute::RopeParams rope_params(const ModelConfig& c, int64_t rotary_dim, double base, const RopeScaling& s) {
  compute::RopeParams p;
  p.rotary_dim = rotary_dim;
  p.base = base;
  p.max_position_embeddings = c.max_position_embeddings;
  p.type = s.type;
  p.factor = s.factor;
  p.low_freq_factor = s.low_freq_factor;
  p.high_freq_factor = s.high_freq_factor;
  p.original_max_position_embeddings = s.original_max_position_embeddings;
  p.beta_fast = s.beta_fast;
  p.beta_slow = s.beta_slow;
  p.attention_factor = s.attention_factor;
  return p;
}

float query_scale(const ModelConfig& c, int64_t pos) {
  if (c.query_scale_beta == 0) return 1.0f;
  const float blocks = std::floor(static_cast<float>(pos) / static_cast<float>(c.query_scale_interval));
  return 1.0f + static_cast<float>(c.query_scale_beta) * std::log(1.0f + blocks);
}

}  // namespace rapid::model
