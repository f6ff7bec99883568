#include "model/mla.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "compute/ops.h"

namespace rapid::model {
namespace {

// A [a, b, c] tensor as the 2-D weight [a * b, c] it is in memory (any row format).
compute::WeightView flat_view(const tensor::Tensor& t, int64_t a, int64_t b, int64_t c) {
  if (t.shape != std::vector<int64_t>{a, b, c})
    throw Error("tensor " + t.name + " does not have the expected [" + std::to_string(a) + ", " + std::to_string(b) +
                ", " + std::to_string(c) + "] shape");
  tensor::Tensor s = t;
  s.shape = {a * b, c};
  return compute::WeightView::of(s);
}

}  // namespace

MlaAttention::MlaAttention(const WeightStore& ws, const std::string& p, const MlaShape& shape,
                           std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned)
    : sh_(shape) {
  const int64_t H = sh_.hidden, nh = sh_.heads;
  if (H <= 0 || nh <= 0 || sh_.kv_lora <= 0 || sh_.rope <= 0 || sh_.rope % 2 || sh_.nope < 0 || sh_.v <= 0)
    throw Error(p + ": bad multi-head latent attention geometry");
  if (sh_.q_lora > 0) {
    q_a_ = load_linear(ws, p + "q_a_proj", sh_.q_lora, H);
    q_a_norm_ = load_vector(ws, p + "q_a_layernorm.weight", sh_.q_lora);
    q_b_ = load_linear(ws, p + "q_b_proj", nh * sh_.qk(), sh_.q_lora);
  } else {
    q_b_ = load_linear(ws, p + "q_proj", nh * sh_.qk(), H);
  }
  kv_a_ = load_linear(ws, p + "kv_a_proj_with_mqa", sh_.kv_lora + sh_.rope, H);
  kv_a_norm_ = load_vector(ws, p + "kv_a_layernorm.weight", sh_.kv_lora);
  load_kv_b(ws, p, owned);
  o_ = load_linear(ws, p + "o_proj", H, nh * sh_.v);
}

// mlx-lm's halves back into kv_b_proj's layout: head h's key row j is column j of embed_q[h]
// (k_nope = latent · embed_q[h]), its value rows are unembed_out[h]'s.
void MlaAttention::load_kv_b(const WeightStore& ws, const std::string& p,
                             std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned) {
  const int64_t nh = sh_.heads, R = sh_.kv_lora, nope = sh_.nope, vd = sh_.v, per = nope + vd;
  if (ws.find(p + "kv_b_proj.weight") || !ws.find(p + "embed_q.weight")) {
    kv_b_ = load_linear(ws, p + "kv_b_proj", nh * per, R);
    return;
  }
  const compute::WeightView wk = flat_view(ws.get(p + "embed_q.weight"), nh, R, nope);
  const compute::WeightView wv = flat_view(ws.get(p + "unembed_out.weight"), nh, vd, R);
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(nh * per * R) * sizeof(float));
  float* w = reinterpret_cast<float*>(buf->data());
  std::vector<float> row(static_cast<size_t>(std::max(nope, R)));
  for (int64_t h = 0; h < nh; ++h) {
    float* head = w + h * per * R;
    for (int64_t c = 0; c < R; ++c) {
      compute::weight_row_f32(wk, h * R + c, row.data());
      for (int64_t j = 0; j < nope; ++j) head[j * R + c] = row[j];
    }
    for (int64_t j = 0; j < vd; ++j) compute::weight_row_f32(wv, h * vd + j, head + (nope + j) * R);
  }
  kv_b_.w.dtype = tensor::DType::F32;
  kv_b_.w.data = w;
  kv_b_.w.rows = nh * per;
  kv_b_.w.cols = R;
  kv_b_.w.row_stride = static_cast<size_t>(R) * sizeof(float);
  owned.push_back(std::move(buf));
}

void MlaAttention::materialize_f32(compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned) {
  for (Linear* l : {&q_a_, &q_b_, &kv_a_, &kv_b_, &o_}) rapid::model::materialize_f32(*l, pool, owned);
}

void MlaAttention::project(const float* xn, int64_t n, const compute::Rope& rope, const float* cos, const float* sin,
                           float* q, float* k, float* v, ExecContext& ctx, MlaScratch& s) const {
  const int64_t nh = sh_.heads, R = sh_.kv_lora, nope = sh_.nope, rd = sh_.rope, qk = sh_.qk(), vd = sh_.v,
                D = sh_.dim(), half = rd / 2, ca = R + rd;
  s.qf.resize(static_cast<size_t>(n * nh * qk));
  s.ckv.resize(static_cast<size_t>(n * ca));
  if (q_a_.present()) {  // q_a and kv_a read the same rows: one pass over them
    s.qa.resize(static_cast<size_t>(n * sh_.q_lora));
    compute::MatmulOut outs[2] = {{&q_a_.w, s.qa.data()}, {&kv_a_.w, s.ckv.data()}};
    compute::matmul_multi(outs, 2, xn, n, *ctx.pool, ctx.scratch, ctx.path);
    for (int64_t t = 0; t < n; ++t) {
      float* r = s.qa.data() + t * sh_.q_lora;
      compute::rms_norm(r, q_a_norm_.data(), sh_.q_lora, sh_.eps, false, r);
    }
    q_b_(s.qa.data(), n, s.qf.data(), ctx);
  } else {
    compute::MatmulOut outs[2] = {{&q_b_.w, s.qf.data()}, {&kv_a_.w, s.ckv.data()}};
    compute::matmul_multi(outs, 2, xn, n, *ctx.pool, ctx.scratch, ctx.path);
  }
  s.lat.resize(static_cast<size_t>(n * R));
  for (int64_t t = 0; t < n; ++t) {
    float* c = s.ckv.data() + t * ca;
    compute::rms_norm(c, kv_a_norm_.data(), R, sh_.eps, false, s.lat.data() + t * R);
    rope.apply_pairs(c + R, 1, rd, cos + t * half, sin + t * half);                   // the shared rope key
    rope.apply_pairs(s.qf.data() + t * nh * qk + nope, nh, qk, cos + t * half, sin + t * half);
  }
  s.kvb.resize(static_cast<size_t>(n * nh * (nope + vd)));
  kv_b_(s.lat.data(), n, s.kvb.data(), ctx);
  const size_t f = sizeof(float);
  std::fill(q, q + n * nh * D, 0.0f);
  std::fill(k, k + n * nh * D, 0.0f);
  std::fill(v, v + n * nh * D, 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t o = (t * nh + h) * D;
      const float* kv = s.kvb.data() + (t * nh + h) * (nope + vd);
      std::memcpy(q + o, s.qf.data() + (t * nh + h) * qk, static_cast<size_t>(qk) * f);
      std::memcpy(k + o, kv, static_cast<size_t>(nope) * f);
      std::memcpy(k + o + nope, s.ckv.data() + t * ca + R, static_cast<size_t>(rd) * f);
      std::memcpy(v + o, kv + nope, static_cast<size_t>(vd) * f);
    }
}

void MlaAttention::output(const float* att, int64_t n, float* out, ExecContext& ctx, MlaScratch& s) const {
  const int64_t nh = sh_.heads, vd = sh_.v, D = sh_.dim();
  s.o.resize(static_cast<size_t>(n * nh * vd));
  for (int64_t r = 0; r < n * nh; ++r)
    std::memcpy(s.o.data() + r * vd, att + r * D, static_cast<size_t>(vd) * sizeof(float));
  o_(s.o.data(), n, out, ctx);
}

}  // namespace rapid::model
