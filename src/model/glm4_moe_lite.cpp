// GLM-4.7-Flash (glm4_moe_lite): pre-norm decoder layers of multi-head latent attention
// (model/mla.h) and an MLP that is a dense SwiGLU in the first layers (first_k_dense_replace) and
// a DeepSeek-V3-routed mixture of experts with shared experts after (model/moe.h, MoeShape::glm).
// The checkpoint's MTP layer (model.layers.<num_hidden_layers>.*) is not loaded.
//
// KV pages: every layer caches its expanded per-head K and V, both padded to MlaShape::dim() (the
// pages hold one head width for K and V; see mla.h), in the shared decoder's layout.
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "compute/attention.h"
#include "compute/ops.h"
#include "compute/rope.h"
#include "model/arch.h"
#include "model/batch_helpers.h"
#include "model/layers.h"
#include "model/mla.h"
#include "model/moe.h"
#include "model/paged_kv.h"
#include "tensor/dequantize.h"

namespace rapid::model {
namespace {

struct GlmLayer {
  std::vector<float> in_norm, post_attn_norm;
  std::unique_ptr<MlaAttention> attn;
  Linear gate, up, down;          // dense layers
  std::unique_ptr<MoeBlock> moe;  // routed layers
};

class Glm4MoeLiteModel final : public Model {
 public:
  Glm4MoeLiteModel(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts)
      : ckpt_(std::move(ckpt)), opts_(opts), pool_(opts.num_threads) {
    cfg_ = ckpt_->config;
    check_decoder_sizes(cfg_, ckpt_->path, "architecture glm4_moe_lite");
    H_ = cfg_.hidden_size;
    V_ = cfg_.vocab_size;
    eps_ = static_cast<float>(cfg_.rms_norm_eps);
    mla_ = MlaShape{.hidden = H_, .heads = cfg_.num_attention_heads, .q_lora = cfg_.q_lora_rank,
                    .kv_lora = cfg_.kv_lora_rank, .nope = cfg_.qk_nope_head_dim, .rope = cfg_.qk_rope_head_dim,
                    .v = cfg_.v_head_dim, .eps = eps_};
    if (static_cast<int64_t>(cfg_.layer_is_moe.size()) != cfg_.num_hidden_layers)
      throw Error(ckpt_->path + ": glm4_moe_lite needs n_routed_experts and the MoE layer pattern");
    ctx_.pool = &pool_;
    ctx_.path = opts.matmul;
    load_weights(ckpt_->weights);
    if (opts.matmul == compute::MatmulPath::Exact) materialize();
    // The rope part of each head rotates in interleaved pairs at rope_theta (mlx-lm: traditional;
    // transformers: rope_interleave), over all qk_rope_head_dim dimensions.
    rope_ = compute::Rope(rope_params(cfg_, mla_.rope, cfg_.rope_theta, cfg_.rope_scaling));
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(mla_.qk())));
  }

  const ModelConfig& config() const override { return cfg_; }

  std::unique_ptr<SequenceState> new_state(int64_t max_tokens) override { return private_paged_state(*this, max_tokens); }

  cache::BlockShape kv_block_shape(int32_t block_size) const override {
    return kv_block_shape_for(static_cast<int32_t>(layers_.size()), mla_.heads, mla_.dim(), block_size, opts_.kv_dtype);
  }

  std::unique_ptr<SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    return checked_paged_state(*this, std::move(pool), max_tokens, "glm4_moe_lite");
  }

  void forward_batch(const BatchEntry* entries, size_t count) override {
    if (count == 0) return;
    const int64_t total =
        admit_paged_batch(entries, count, V_, [&](const cache::BlockShape& sh) { check_pool_shape(sh); }, seqs_);
    reserve(total);
    const int64_t half = rope_.half();
    for (size_t i = 0; i < count; ++i)
      for (int64_t t = 0; t < seqs_[i].n; ++t) {
        const int64_t r = seqs_[i].row + t;
        tensor::dequantize_row(*embed_, entries[i].tokens[t], x_.data() + r * H_);
        rope_.angles(seqs_[i].pos0 + t, cos_.data() + r * half, sin_.data() + r * half);
      }
    segs_.resize(count);
    for (size_t li = 0; li < layers_.size(); ++li) run_layer(layers_[li], static_cast<int32_t>(li), total);
    head(entries, count);
  }

 private:
  void load_weights(const WeightStore& ws) {
    embed_ = &ws.get("model.embed_tokens.weight");
    if (embed_->rows() != V_ || embed_->cols() != H_)
      throw Error("model.embed_tokens.weight: shape does not match vocab_size x hidden_size");
    lm_head_ = ws.find("lm_head.weight") ? load_linear(ws, "lm_head", V_, H_) : Linear{compute::WeightView::of(*embed_), {}};
    final_norm_ = load_vector(ws, "model.norm.weight", H_);
    const MoeShape moe{.hidden = H_, .experts = cfg_.num_experts, .top_k = cfg_.num_experts_per_tok,
                       .expert_inter = cfg_.moe_intermediate_size, .shared_inter = cfg_.shared_expert_intermediate_size,
                       .norm_topk = cfg_.norm_topk_prob, .glm = true, .groups = cfg_.n_group,
                       .topk_groups = cfg_.topk_group, .routed_scaling = static_cast<float>(cfg_.routed_scaling_factor)};
    layers_.resize(static_cast<size_t>(cfg_.num_hidden_layers));
    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      GlmLayer& l = layers_[static_cast<size_t>(i)];
      const std::string p = "model.layers." + std::to_string(i) + ".";
      l.in_norm = load_vector(ws, p + "input_layernorm.weight", H_);
      l.post_attn_norm = load_vector(ws, p + "post_attention_layernorm.weight", H_);
      l.attn = std::make_unique<MlaAttention>(ws, p + "self_attn.", mla_, owned_);
      if (cfg_.layer_is_moe[static_cast<size_t>(i)]) {
        l.moe = std::make_unique<MoeBlock>(ws, p + "mlp.", moe);
      } else {
        l.gate = load_linear(ws, p + "mlp.gate_proj", cfg_.intermediate_size, H_);
        l.up = load_linear(ws, p + "mlp.up_proj", cfg_.intermediate_size, H_);
        l.down = load_linear(ws, p + "mlp.down_proj", H_, cfg_.intermediate_size);
      }
    }
  }

  void materialize() {
    materialize_f32(lm_head_, pool_, owned_);
    for (auto& l : layers_) {
      l.attn->materialize_f32(pool_, owned_);
      for (Linear* x : {&l.gate, &l.up, &l.down}) materialize_f32(*x, pool_, owned_);
      if (l.moe) l.moe->materialize_f32(pool_, owned_);
    }
  }

  void check_pool_shape(const cache::BlockShape& got) const {
    check_block_shape(got, kv_block_shape(got.block_size), "glm4_moe_lite");
  }

  void reserve(int64_t n) {
    if (n <= cap_) return;
    cap_ = n;
    for (auto* b : {&x_, &xn_, &tmp_}) b->resize(static_cast<size_t>(n * H_));
    for (auto* b : {&q_, &k_, &v_, &att_}) b->resize(static_cast<size_t>(n * mla_.heads * mla_.dim()));
    gate_.resize(static_cast<size_t>(n * cfg_.intermediate_size));
    up_.resize(gate_.size());
    cos_.resize(static_cast<size_t>(n * rope_.half()));
    sin_.resize(cos_.size());
  }

  void norm_rows(const float* x, const std::vector<float>& w, int64_t n, float* out) const {
    for (int64_t t = 0; t < n; ++t) compute::rms_norm(x + t * H_, w.data(), H_, eps_, false, out + t * H_);
  }

  void run_layer(const GlmLayer& l, int32_t li, int64_t n) {
    const int64_t nh = mla_.heads, D = mla_.dim();
    norm_rows(x_.data(), l.in_norm, n, xn_.data());
    l.attn->project(xn_.data(), n, rope_, cos_.data(), sin_.data(), q_.data(), k_.data(), v_.data(), ctx_, mla_scratch_);
    store_kv_segments(seqs_, li, nh, D, nh * D, q_.data(), k_.data(), v_.data(), att_.data(), segs_);
    const compute::AttentionParams ap{.n_heads = nh, .n_kv_heads = nh, .head_dim = D, .scale = scale_};
    compute::attention_batch(segs_.data(), segs_.size(), ap, pool_);
    l.attn->output(att_.data(), n, tmp_.data(), ctx_, mla_scratch_);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
    norm_rows(x_.data(), l.post_attn_norm, n, xn_.data());
    if (l.moe) {
      l.moe->forward(xn_.data(), n, tmp_.data(), ctx_, moe_scratch_);
    } else {
      const int64_t I = cfg_.intermediate_size;
      // silu(gate)·up per chunk of rows, inside the projections' region.
      compute::matmul_pair({&l.gate.w, gate_.data()}, {&l.up.w, up_.data()}, xn_.data(), n, pool_, ctx_.scratch,
                           [&](int64_t r0, int64_t r1) {
                             compute::gated_act_rows({}, gate_.data(), up_.data(), n, I, r0, r1);
                           },
                           ctx_.path);
      l.down(gate_.data(), n, tmp_.data(), ctx_);
    }
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
  }

  void head(const BatchEntry* entries, size_t count) {
    const FinalHead h{.norm = final_norm_, .eps = eps_, .lm_head = lm_head_, .hidden = H_, .vocab = V_};
    final_head(h, entries, count, seqs_, x_.data(), xn_.data(), logits_buf_, ctx_);
  }

  std::shared_ptr<Checkpoint> ckpt_;
  ModelOptions opts_;
  ModelConfig cfg_;
  compute::ThreadPool pool_;
  ExecContext ctx_;
  int64_t H_ = 0, V_ = 0;
  float eps_ = 1e-6f, scale_ = 1.0f;
  MlaShape mla_;
  const tensor::Tensor* embed_ = nullptr;
  Linear lm_head_;
  std::vector<float> final_norm_;
  std::vector<GlmLayer> layers_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;  // rebuilt kv_b_proj; f32 copies in Exact mode
  compute::Rope rope_;
  int64_t cap_ = 0;
  MlaScratch mla_scratch_;
  MoeScratch moe_scratch_;
  std::vector<float> x_, xn_, tmp_, q_, k_, v_, att_, gate_, up_, cos_, sin_, logits_buf_;
  std::vector<PagedSeq> seqs_;
  std::vector<compute::AttentionSegment> segs_;
};

}  // namespace

std::unique_ptr<Model> make_glm4_moe_lite_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  return std::make_unique<Glm4MoeLiteModel>(std::move(ckpt), opts);
}

}  // namespace rapid::model
