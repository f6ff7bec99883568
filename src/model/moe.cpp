#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "compute/ops.h"
#include "tensor/dequantize.h"
#include "tensor/mxfp4.h"
#include "tensor/quant_formats.h"

namespace rapid::model {

compute::WeightView expert_slice(const tensor::Tensor& t, int64_t e, int64_t row0, int64_t rows, int64_t cols) {
  if (t.shape.size() != 3 || e < 0 || e >= t.shape[0] || row0 < 0 || row0 + rows > t.shape[1] || t.shape[2] != cols)
    throw Error("expert tensor " + t.name + " does not have the expected [experts, rows, " + std::to_string(cols) +
                "] shape");
  const int64_t first = e * t.shape[1] + row0;  // flat row index of the slice's first row
  tensor::Tensor s = t;
  s.shape = {rows, cols};
  if (t.dtype == tensor::DType::MLX_AFFINE) {
    const size_t stride = static_cast<size_t>(cols * t.bits / 8);
    const size_t gbytes = static_cast<size_t>(cols / t.group_size) * tensor::block_bytes(t.group_dtype);
    s.data = static_cast<const uint8_t*>(t.data) + first * stride;
    s.scales = static_cast<const uint8_t*>(t.scales) + first * gbytes;
    s.biases = static_cast<const uint8_t*>(t.biases) + first * gbytes;
    s.nbytes = stride * static_cast<size_t>(rows);
  } else if (t.dtype == tensor::DType::MXFP4) {
    const size_t stride = tensor::row_bytes(t.dtype, cols);
    s.data = static_cast<const uint8_t*>(t.data) + first * stride;
    s.scales = static_cast<const uint8_t*>(t.scales) + first * (cols / tensor::mxfp4::kBlock);
    s.nbytes = stride * static_cast<size_t>(rows);
  } else {
    const size_t stride = tensor::row_bytes(t.dtype, cols);
    if (t.nbytes && t.nbytes < stride * static_cast<size_t>(t.shape[0] * t.shape[1]))
      throw Error("expert tensor " + t.name + " is smaller than its shape says");
    s.data = static_cast<const uint8_t*>(t.data) + first * stride;
    s.nbytes = stride * static_cast<size_t>(rows);
  }
  return compute::WeightView::of(s);
}

bool stacked_experts(const std::string& name, size_t ndim) {
  return ndim == 3 && (name.find(".switch_mlp.") != std::string::npos || name.find(".experts.") != std::string::npos);
}

namespace {

// Whether the kernels may read w's data (and MLX scales / biases) as typed arrays.
bool aligned(const compute::WeightView& w) {
  auto ok = [](const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  switch (w.dtype) {
    case tensor::DType::MLX_AFFINE: {
      const size_t g = tensor::block_bytes(w.group_dtype);
      return ok(w.data, 4) && ok(w.scales, g) && ok(w.biases, g);
    }
    case tensor::DType::F32: return ok(w.data, 4);
    case tensor::DType::F16: case tensor::DType::BF16: return ok(w.data, 2);
    default: return true;  // GGUF blocks: the format aligns its data; MXFP4 is read as bytes
  }
}

// Points w at an aligned copy of its rows (kept alive in `keep`), whose pages leave the file
// mapping they came from (aligned_copy), or each expert in use would stay resident twice.
void copy_aligned(compute::WeightView& w, std::vector<std::shared_ptr<std::vector<uint8_t>>>& keep,
                  const WeightStore& ws) {
  auto dup = [&](const void*& p, size_t bytes) {
    auto buf = aligned_copy(p, bytes, ws.mapping_of(p));
    p = buf->data();
    keep.push_back(std::move(buf));
  };
  dup(w.data, w.row_stride * static_cast<size_t>(w.rows));
  if (w.dtype == tensor::DType::MLX_AFFINE) {
    const size_t g = static_cast<size_t>(w.rows * (w.cols / w.group_size)) * tensor::block_bytes(w.group_dtype);
    dup(w.scales, g);
    dup(w.biases, g);
  }
}

Linear slice_linear(const tensor::Tensor& t, int64_t e, int64_t row0, int64_t rows, int64_t cols) {
  Linear l;
  l.w = expert_slice(t, e, row0, rows, cols);
  return l;
}

// Row e of a [E, n] tensor (stacked expert biases) as f32.
std::vector<float> expert_row(const tensor::Tensor& t, int64_t e, int64_t n) {
  if (t.shape.size() != 2 || e >= t.shape[0] || t.shape[1] != n)
    throw Error("tensor " + t.name + " does not have the expected [experts, " + std::to_string(n) + "] shape");
  std::vector<float> v(static_cast<size_t>(n));
  tensor::dequantize_row(t, e, v.data());
  return v;
}

// Expert e's [out, in] weight out of a [E, in, out * step] tensor stored input-major: element
// (r, c) is t[e, c, r * step + off] (transformers' x·W expert layout; step 2
// de-interleaves gate/up). Copied in the tensor's own float dtype.
Linear transposed_expert(const tensor::Tensor& t, int64_t e, int64_t out, int64_t in, int64_t step, int64_t off,
                         std::vector<std::shared_ptr<std::vector<uint8_t>>>& keep) {
  if (t.shape.size() != 3 || e >= t.shape[0] || t.shape[1] != in || t.shape[2] != out * step)
    throw Error("expert tensor " + t.name + " does not have the expected [experts, " + std::to_string(in) + ", " +
                std::to_string(out * step) + "] shape");
  if (t.dtype != tensor::DType::F32 && t.dtype != tensor::DType::BF16 && t.dtype != tensor::DType::F16)
    throw Error("expert tensor " + t.name + ": only f32 / bf16 / f16 are supported in this layout");
  const size_t es = t.dtype == tensor::DType::F32 ? 4 : 2, ncol = static_cast<size_t>(out * step);
  if (t.nbytes && t.nbytes < static_cast<size_t>(t.shape[0]) * in * ncol * es)
    throw Error("expert tensor " + t.name + " is smaller than its shape says");
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(out * in) * es);
  const uint8_t* src = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(e * in) * ncol * es;
  for (int64_t c = 0; c < in; ++c)
    for (int64_t r = 0; r < out; ++r)
      std::memcpy(buf->data() + static_cast<size_t>(r * in + c) * es, src + (c * ncol + r * step + off) * es, es);
  Linear l;
  l.w.dtype = t.dtype;
  l.w.data = buf->data();
  l.w.rows = out;
  l.w.cols = in;
  l.w.row_stride = static_cast<size_t>(in) * es;
  keep.push_back(std::move(buf));
  return l;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// gpt-oss's Hugging Face MXFP4 experts: `name`_blocks [E, R, cols/32, 16] uint8 and `name`_scales
// [E, R, cols/32] uint8, R = out·step rows (y = W·x per row, as dequantized by transformers before
// its transpose). Expert e's rows off, off + step, ... as an MXFP4 view into the mapping.
Linear mxfp4_expert(const WeightStore& ws, const std::string& name, int64_t e, int64_t out, int64_t step, int64_t off,
                    int64_t cols) {
  const tensor::Tensor& b = ws.get(name + "_blocks");
  const int64_t E = b.shape.empty() ? 0 : b.shape[0], G = cols / tensor::mxfp4::kBlock, R = out * step;
  if (b.dtype != tensor::DType::U8 || b.shape != std::vector<int64_t>{E, R, G, tensor::mxfp4::kBlockBytes} || cols % tensor::mxfp4::kBlock)
    throw Error(name + "_blocks: expected uint8 [experts, " + std::to_string(R) + ", " + std::to_string(G) + ", 16], got " +
                tensor::dtype_name(b.dtype) + " " + shape_str(b.shape));
  const tensor::Tensor& sc = ws.get(name + "_scales");
  if (sc.dtype != tensor::DType::U8 || sc.shape != std::vector<int64_t>{E, R, G})
    throw Error(name + "_scales: expected uint8 (E8M0) [" + std::to_string(E) + ", " + std::to_string(R) + ", " +
                std::to_string(G) + "], got " + tensor::dtype_name(sc.dtype) + " " + shape_str(sc.shape));
  if (e >= E) throw Error(name + "_blocks: has " + std::to_string(E) + " experts, the config more");
  const int64_t first = e * R + off;  // flat row of the expert's first row
  Linear l;
  l.w.dtype = tensor::DType::MXFP4;
  l.w.rows = out;
  l.w.cols = cols;
  l.w.bits = 4;
  l.w.group_size = tensor::mxfp4::kBlock;
  l.w.row_stride = static_cast<size_t>(step * G * tensor::mxfp4::kBlockBytes);
  l.w.scale_stride = static_cast<size_t>(step * G);
  l.w.data = static_cast<const uint8_t*>(b.data) + first * G * tensor::mxfp4::kBlockBytes;
  l.w.scales = static_cast<const uint8_t*>(sc.data) + first * G;
  return l;
}

}  // namespace

// gate_up_proj_bias [E, 2I] interleaves gate (even) and up (odd); down_proj_bias is [E, H].
void MoeBlock::set_interleaved_biases(Expert& ex, const tensor::Tensor& gate_up, const tensor::Tensor& down, int64_t e) const {
  const int64_t I = sh_.expert_inter;
  const std::vector<float> b = expert_row(gate_up, e, 2 * I);
  for (int64_t i = 0; i < I; ++i) {
    ex.gate.bias.push_back(b[2 * i]);
    ex.up.bias.push_back(b[2 * i + 1]);
  }
  ex.down.bias = expert_row(down, e, sh_.hidden);
}

MoeBlock::MoeBlock(const WeightStore& ws, const std::string& p, const MoeShape& shape) : sh_(shape), ws_(&ws) {
  const int64_t E = sh_.experts, H = sh_.hidden, I = sh_.expert_inter;
  if (E <= 0 || sh_.top_k <= 0 || sh_.top_k > E || I <= 0 || H <= 0)
    throw Error(p + ": bad mixture-of-experts geometry");
  experts_.resize(static_cast<size_t>(E));
  aligned_.assign(static_cast<size_t>(E), 0);
  if (sh_.gpt_oss) {
    router_ = load_linear(ws, p + "router", E, H);
    load_gpt_oss(ws, p);
    return;
  }
  if (sh_.gemma4) {
    router_ = load_linear(ws, p + "router.proj", E, H);
    router_norm_ = load_vector(ws, p + "router.scale", H);
    const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H)));
    for (float& w : router_norm_) w *= root;
    expert_scale_ = load_vector(ws, p + "router.per_expert_scale", E);
  } else {
    router_ = load_linear(ws, p + "gate", E, H);
    if (sh_.glm) {
      if (sh_.groups <= 0 || E % sh_.groups || sh_.topk_groups <= 0 || sh_.topk_groups > sh_.groups ||
          sh_.top_k > sh_.topk_groups * (E / sh_.groups))
        throw Error(p + ": n_group / topk_group do not divide the experts so that top-k of them can be chosen");
      choice_bias_ = load_vector(ws, p + "gate.e_score_correction_bias", E);
    }
  }
  const std::string sw = p + (sh_.gemma4 ? "experts.switch_glu." : "switch_mlp.");
  if (const tensor::Tensor* g = ws.find(sw + "gate_proj.weight")) {
    const tensor::Tensor& u = ws.get(sw + "up_proj.weight");
    // Gemma 4 GGUF files with unfused experts keep down_proj under its transformers name.
    const tensor::Tensor* dp = sh_.gemma4 && !ws.find(sw + "down_proj.weight") ? ws.find(p + "experts.down_proj") : nullptr;
    const tensor::Tensor& d = dp ? *dp : ws.get(sw + "down_proj.weight");
    for (int64_t e = 0; e < E; ++e)
      experts_[e] = {slice_linear(*g, e, 0, I, H), slice_linear(u, e, 0, I, H), slice_linear(d, e, 0, H, I)};
  } else if (const tensor::Tensor* gu = ws.find(p + "experts.gate_up_proj")) {
    const tensor::Tensor& d = ws.get(p + "experts.down_proj");
    for (int64_t e = 0; e < E; ++e)
      experts_[e] = {slice_linear(*gu, e, 0, I, H), slice_linear(*gu, e, I, I, H), slice_linear(d, e, 0, H, I)};
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      experts_[e] = {load_linear(ws, q + "gate_proj", I, H), load_linear(ws, q + "up_proj", I, H),
                     load_linear(ws, q + "down_proj", H, I)};
    }
  }
  if (sh_.shared_inter > 0) {
    const int64_t S = sh_.shared_inter;
    const std::string q = p + (sh_.glm ? "shared_experts." : "shared_expert.");
    shared_ = {load_linear(ws, q + "gate_proj", S, H), load_linear(ws, q + "up_proj", S, H),
               load_linear(ws, q + "down_proj", H, S)};
    if (!sh_.glm) shared_gate_ = load_linear(ws, p + "shared_expert_gate", 1, H);
  }
}

void MoeBlock::load_gpt_oss(const WeightStore& ws, const std::string& p) {
  const int64_t E = sh_.experts, H = sh_.hidden, I = sh_.expert_inter;
  if (const tensor::Tensor* g = ws.find(p + "experts.gate_proj.weight")) {
    const tensor::Tensor& u = ws.get(p + "experts.up_proj.weight");
    const tensor::Tensor& d = ws.get(p + "experts.down_proj.weight");
    const tensor::Tensor &gb = ws.get(p + "experts.gate_proj.bias"), &ub = ws.get(p + "experts.up_proj.bias"),
                 &db = ws.get(p + "experts.down_proj.bias");
    for (int64_t e = 0; e < E; ++e) {
      experts_[e] = {slice_linear(*g, e, 0, I, H), slice_linear(u, e, 0, I, H), slice_linear(d, e, 0, H, I)};
      experts_[e].gate.bias = expert_row(gb, e, I);
      experts_[e].up.bias = expert_row(ub, e, I);
      experts_[e].down.bias = expert_row(db, e, H);
    }
  } else if (const tensor::Tensor* gu = ws.find(p + "experts.gate_up_proj")) {
    const tensor::Tensor& d = ws.get(p + "experts.down_proj");
    const tensor::Tensor &gub = ws.get(p + "experts.gate_up_proj_bias"), &db = ws.get(p + "experts.down_proj_bias");
    for (int64_t e = 0; e < E; ++e) {
      Expert& ex = experts_[e];
      ex = {transposed_expert(*gu, e, I, H, 2, 0, copies_), transposed_expert(*gu, e, I, H, 2, 1, copies_),
            transposed_expert(d, e, H, I, 1, 0, copies_)};
      set_interleaved_biases(ex, gub, db, e);
    }
  } else if (ws.find(p + "experts.gate_up_proj_blocks")) {
    for (int64_t e = 0; e < E; ++e) {
      Expert& ex = experts_[e];
      // Rows 2i / 2i+1 of gate_up are gate / up row i (transformers de-interleaves the columns
      // of its transposed copy, i.e. these rows): views with doubled strides, no copy.
      ex = {mxfp4_expert(ws, p + "experts.gate_up_proj", e, I, 2, 0, H),
            mxfp4_expert(ws, p + "experts.gate_up_proj", e, I, 2, 1, H),
            mxfp4_expert(ws, p + "experts.down_proj", e, H, 1, 0, I)};
      set_interleaved_biases(ex, ws.get(p + "experts.gate_up_proj_bias"), ws.get(p + "experts.down_proj_bias"), e);
    }
  } else {
    throw Error(p + ": no gpt-oss expert tensors (experts.gate_proj.weight or experts.gate_up_proj)");
  }
}

const MoeBlock::Expert& MoeBlock::expert(int64_t e) const {
  Expert& ex = experts_[static_cast<size_t>(e)];
  if (!aligned_[static_cast<size_t>(e)]) {
    for (Linear* l : {&ex.gate, &ex.up, &ex.down})
      if (!aligned(l->w)) copy_aligned(l->w, copies_, *ws_);
    aligned_[static_cast<size_t>(e)] = 1;
  }
  return ex;
}

void MoeBlock::materialize_f32(compute::ThreadPool& pool, std::vector<std::shared_ptr<std::vector<uint8_t>>>& owned) {
  rapid::model::materialize_f32(router_, pool, owned);
  rapid::model::materialize_f32(shared_gate_, pool, owned);
  for (Expert* ex : {&shared_})
    for (Linear* l : {&ex->gate, &ex->up, &ex->down}) rapid::model::materialize_f32(*l, pool, owned);
  for (int64_t e = 0; e < sh_.experts; ++e) {
    expert(e);  // the f32 copy reads every row as typed data
    Expert& ex = experts_[static_cast<size_t>(e)];
    for (Linear* l : {&ex.gate, &ex.up, &ex.down}) rapid::model::materialize_f32(*l, pool, owned);
  }
}

// Softmax over the router logits, the top-k (ties: the lower expert index first) in descending
// order, renormalised when the family asks (gpt-oss: the top-k logits, softmax over those). Then a counting sort of (row, rank) pairs by expert,
// rows ascending within an expert.
void MoeBlock::route(int64_t n, MoeScratch& s) const {
  const int64_t E = sh_.experts, K = sh_.top_k;
  s.sel.resize(static_cast<size_t>(n * K));
  s.weight.resize(static_cast<size_t>(n * K));
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    const float* l = s.logits.data() + t * E;
    for (int64_t e = 0; e < E; ++e) order[e] = static_cast<int32_t>(e);
    if (sh_.glm) {
      route_sigmoid_grouped(l, p.data(), order.data(), s.sel.data() + t * K, s.weight.data() + t * K);
      continue;
    }
    if (sh_.gpt_oss || sh_.gemma4) {  // the top-k logits, then a softmax over those k alone
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
      const float top = l[order[0]];
      float tot = 0;
      for (int64_t k = 0; k < K; ++k) tot += s.weight[t * K + k] = std::exp(l[order[k]] - top);
      for (int64_t k = 0; k < K; ++k) {
        s.sel[t * K + k] = order[k];
        s.weight[t * K + k] /= tot;
        if (sh_.gemma4) s.weight[t * K + k] *= expert_scale_[order[k]];
      }
      continue;
    }
    const float mx = *std::max_element(l, l + E);
    float sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(l[e] - mx);
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float tot = 0;
    for (int64_t k = 0; k < K; ++k) tot += p[order[k]];
    for (int64_t k = 0; k < K; ++k) {
      s.sel[t * K + k] = order[k];
      s.weight[t * K + k] = sh_.norm_topk ? p[order[k]] / tot : p[order[k]];
    }
  }
  s.count.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < n * K; ++i) ++s.count[s.sel[i] + 1];
  for (int64_t e = 0; e < E; ++e) s.count[e + 1] += s.count[e];  // count[e] = first slot of expert e
  s.offset.assign(s.count.begin(), s.count.end());
  s.rows.resize(static_cast<size_t>(n * K));
  for (int64_t i = 0; i < n * K; ++i) s.rows[s.offset[s.sel[i]]++] = static_cast<int32_t>(i);  // i = t*K + rank
}

// One row of GLM's routing (see MoeShape::glm), transformers' Glm4MoeLiteTopkRouter: experts of
// the groups not chosen are out of the race (-inf), ties go to the lower index. `score` and `order`
// are E-float / E-int scratch; `order` arrives as 0..E-1.
void MoeBlock::route_sigmoid_grouped(const float* l, float* score, int32_t* order, int32_t* sel, float* weight) const {
  const int64_t E = sh_.experts, K = sh_.top_k, G = sh_.groups, per = E / G;
  std::vector<float> choice(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    score[e] = 1.0f / (1.0f + std::exp(-l[e]));
    choice[e] = score[e] + choice_bias_[e];
  }
  if (G > 1) {
    std::vector<float> best2(static_cast<size_t>(G));
    std::vector<int32_t> gorder(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
      const float* c = choice.data() + g * per;
      float a = -INFINITY, b = -INFINITY;  // the group's best and second best
      for (int64_t j = 0; j < per; ++j) {
        if (c[j] > a) b = a, a = c[j];
        else if (c[j] > b) b = c[j];
      }
      best2[g] = per > 1 ? a + b : a;
      gorder[g] = static_cast<int32_t>(g);
    }
    std::partial_sort(gorder.begin(), gorder.begin() + sh_.topk_groups, gorder.end(), [&](int32_t a, int32_t b) {
      return best2[a] > best2[b] || (best2[a] == best2[b] && a < b);
    });
    for (int64_t r = sh_.topk_groups; r < G; ++r)
      std::fill(choice.begin() + gorder[r] * per, choice.begin() + (gorder[r] + 1) * per, -INFINITY);
  }
  std::partial_sort(order, order + K, order + E, [&](int32_t a, int32_t b) {
    return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
  });
  float tot = 0;
  for (int64_t k = 0; k < K; ++k) tot += score[order[k]];
  for (int64_t k = 0; k < K; ++k) {
    sel[k] = order[k];
    weight[k] = (sh_.norm_topk ? score[order[k]] / (tot + 1e-20f) : score[order[k]]) * sh_.routed_scaling;
  }
}

// Rows [r0, r1) of g [n, inter] = act(g + gate bias) * (u + up bias), element by element (libm's
// exp per element), so how the rows are split cannot change a value.
void MoeBlock::act_rows(const Expert& ex, int64_t n, float* g, float* u, int64_t r0, int64_t r1) const {
  compute::GatedAct a;
  if (sh_.gpt_oss) a = {compute::GatedAct::SwigluOai, sh_.swiglu_alpha, sh_.swiglu_limit};
  else if (sh_.gemma4) a.kind = compute::GatedAct::GeluTanh;
  compute::gated_act_rows(a, g, u, n, ex.gate.w.rows, r0, r1, ex.gate.bias.empty() ? nullptr : ex.gate.bias.data(),
                          ex.up.bias.empty() ? nullptr : ex.up.bias.data());
}

// Every routed expert's down(act(gate(x)) * up(x)) over the rows routed to it, and the shared
// expert's over all rows, in two parallel regions (all gate/up rows with the activation per chunk,
// then all down rows) instead of a few per expert: a decode step's experts are small matrices
// (Qwen3-30B-A3B: 768 x 2048), so per-expert regions cost more in synchronisation than in work.
// Expert e's rows land in grouped order (count[e] + j) in s.yg, the shared expert's after n*K rows.
void MoeBlock::run_experts(const float* xn, int64_t n, ExecContext& ctx, MoeScratch& s) const {
  const int64_t E = sh_.experts, K = sh_.top_k, H = sh_.hidden, I = sh_.expert_inter, S = sh_.shared_inter;
  const int64_t M = n * K;
  s.xg.resize(static_cast<size_t>(M * H));
  s.g.resize(static_cast<size_t>(M * I + n * S));
  s.u.resize(s.g.size());
  s.yg.resize(static_cast<size_t>((M + (S > 0 ? n : 0)) * H));
  s.mm.clear();
  s.used.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = s.count[e], m = s.count[e + 1] - b;
    if (m == 0) continue;
    const Expert& ex = expert(e);
    // An expert every row chose has them all, in order (top-k experts are distinct): read xn itself,
    // so its quantization is shared with every such expert.
    const float* x = xn;
    if (m != n) {
      for (int64_t j = 0; j < m; ++j)
        std::memcpy(s.xg.data() + (b + j) * H, xn + (s.rows[b + j] / K) * H, static_cast<size_t>(H) * 4);
      x = s.xg.data() + b * H;
    }
    s.mm.push_back({{&ex.gate.w, s.g.data() + b * I}, {&ex.up.w, s.u.data() + b * I}, x, m});
    s.used.push_back(static_cast<int32_t>(e));
  }
  if (S > 0) {
    s.mm.push_back({{&shared_.gate.w, s.g.data() + M * I}, {&shared_.up.w, s.u.data() + M * I}, xn, n});
    s.used.push_back(-1);
  }
  auto ex_of = [&](int i) -> const Expert& { return s.used[i] < 0 ? shared_ : experts_[s.used[i]]; };
  const int count = static_cast<int>(s.mm.size());
  if (s.mms.size() < s.mm.size()) s.mms.resize(s.mm.size());
  compute::matmul_groups(s.mm.data(), count, *ctx.pool, s.mms.data(), [&](int i, int64_t r0, int64_t r1) {
    act_rows(ex_of(i), s.mm[i].n, s.mm[i].a.y, s.mm[i].b.y, r0, r1);
  }, ctx.path);
  for (int i = 0; i < count; ++i) {
    compute::MatmulGroup& G = s.mm[i];
    const int64_t first = s.used[i] < 0 ? M : s.count[s.used[i]];
    G.x = G.a.y;
    G.a = {&ex_of(i).down.w, s.yg.data() + first * H};
    G.b = {nullptr, nullptr};
  }
  compute::matmul_groups(s.mm.data(), count, *ctx.pool, s.mms.data(), [&](int i, int64_t r0, int64_t r1) {
    const std::vector<float>& bias = ex_of(i).down.bias;
    for (int64_t t = 0; t < s.mm[i].n && !bias.empty(); ++t)
      for (int64_t r = r0; r < r1; ++r) s.mm[i].a.y[t * H + r] += bias[r];
  }, ctx.path);
}

void MoeBlock::forward(const float* xn, int64_t n, float* out, ExecContext& ctx, MoeScratch& s,
                       const float* router_in) const {
  const int64_t E = sh_.experts, K = sh_.top_k, H = sh_.hidden;
  s.logits.resize(static_cast<size_t>(n * E));
  if (!router_norm_.empty()) {
    s.rn.resize(static_cast<size_t>(n * H));
    const float* x = router_in ? router_in : xn;
    for (int64_t t = 0; t < n; ++t) compute::rms_norm(x + t * H, router_norm_.data(), H, sh_.norm_eps, false, s.rn.data() + t * H);
    router_(s.rn.data(), n, s.logits.data(), ctx);
  } else {
    router_(router_in ? router_in : xn, n, s.logits.data(), ctx);
  }
  route(n, s);
  s.sg.resize(static_cast<size_t>(n));
  if (shared_gate_.present()) shared_gate_(xn, n, s.sg.data(), ctx);
  run_experts(xn, n, ctx, s);
  s.slot.resize(static_cast<size_t>(n * K));
  for (int64_t p = 0; p < n * K; ++p) s.slot[s.rows[p]] = static_cast<int32_t>(p);  // (t, rank) -> grouped row
  // A row's weighted sum in its own rank order, independent of the batch.
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * H;
    std::fill(o, o + H, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float w = s.weight[t * K + k];
      const float* y = s.yg.data() + s.slot[t * K + k] * H;
      for (int64_t h = 0; h < H; ++h) o[h] += w * y[h];
    }
  }
  if (sh_.shared_inter > 0) {
    const float* y = s.yg.data() + n * K * H;
    for (int64_t t = 0; t < n; ++t) {
      const float g = shared_gate_.present() ? 1.0f / (1.0f + std::exp(-s.sg[t])) : 1.0f;  // GLM's: ungated
      for (int64_t h = 0; h < H; ++h) out[t * H + h] += g * y[t * H + h];
    }
  }
}

}  // namespace rapid::model
