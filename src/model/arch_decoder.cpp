// The decoder-only transformer shared by Llama, Mistral / Ministral 3, Qwen2/3 and Gemma 3 (switches in
// ArchSpec).
#include <algorithm>
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
#include "model/mtp_head.h"
#include "model/moe.h"
#include "model/paged_kv.h"
#include "tensor/dequantize.h"

namespace rapid::model {
namespace {

struct Layer {
  std::vector<float> in_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm, q_norm, k_norm;
  Linear q, k, v, o, gate, up, down;
  std::vector<float> sinks;       // per query head (gpt-oss); empty = none
  std::unique_ptr<MoeBlock> moe;  // routed experts instead of gate/up/down (qwen3_moe)
  bool sliding = false;
};

class DecoderModel final : public Model {
 public:
  DecoderModel(std::shared_ptr<Checkpoint> ckpt, const ArchSpec& spec, const ModelOptions& opts)
      : ckpt_(std::move(ckpt)), spec_(spec), opts_(opts), pool_(opts.num_threads) {
    cfg_ = ckpt_->config;
    check_decoder_sizes(cfg_, ckpt_->path, "architecture " + spec.name);
    const auto& c = cfg_;
    H_ = c.hidden_size;
    I_ = c.intermediate_size;
    nh_ = c.num_attention_heads;
    nkv_ = cfg_.num_key_value_heads;
    hd_ = cfg_.head_dim;
    V_ = c.vocab_size;
    eps_ = static_cast<float>(c.rms_norm_eps);
    ctx_.pool = &pool_;
    ctx_.path = opts.matmul;

    const WeightStore& ws = ckpt_->weights;
    pairs_ = ckpt_->rope_interleaved_qk;
    embed_ = &ws.get("model.embed_tokens.weight");
    if (embed_->rows() != V_ || embed_->cols() != H_)
      throw Error("model.embed_tokens.weight: shape does not match vocab_size x hidden_size");
    const bool tied = !ws.find("lm_head.weight");
    if (tied) {
      lm_head_.w = compute::WeightView::of(*embed_);
    } else {
      lm_head_ = load_linear(ws, "lm_head", V_, H_);
    }
    final_norm_ = load_vector(ws, "model.norm.weight", H_);

    layers_.resize(static_cast<size_t>(c.num_hidden_layers));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool moe = i < static_cast<int64_t>(c.layer_is_moe.size()) && c.layer_is_moe[i];
      load_layer(layers_[i], ws, "model.layers." + std::to_string(i) + ".", moe);
      layers_[i].sliding = i < static_cast<int64_t>(c.layer_is_sliding.size()) && c.layer_is_sliding[i] &&
                           c.sliding_window > 0;
    }
    // MTP heads (Qwen3-Next / Qwen3.5 naming): fc over [norm(embedding), norm(hidden)], decoder
    // layer(s) of the model's own kind with their own KV, a final norm, the shared lm_head.
    if (const int n = MtpHead::count_layers(ws); n > 0 || ws.find("mtp.fc.weight")) {
      if (n == 0) throw Error(ckpt_->path + ": mtp.fc.weight without any mtp.layers.N");
      mtp_.load(ws, H_, eps_, spec_.norm_add_one, [&](const std::string& name) { return load_vector(ws, name, H_); });
      mtp_layers_.resize(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        const std::string p = "mtp.layers." + std::to_string(i) + ".";
        load_layer(mtp_layers_[i], ws, p, c.num_experts > 0 && ws.find(p + "mlp.gate.weight"));
      }
    }

    if (opts.matmul == compute::MatmulPath::Exact) materialize_f32();

    global_rope_ = compute::Rope(rope_params(c, hd_, c.rope_theta, c.rope_scaling));
    if (spec.local_rope_base)
      local_rope_ = compute::Rope(rope_params(c, hd_, c.rope_local_base_freq, RopeScaling{}));
    else
      local_rope_ = global_rope_;
    double qs = spec.query_pre_attn_scalar && c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                                           : static_cast<double>(hd_);
    attn_scale_ = static_cast<float>(1.0 / std::sqrt(qs));
    embed_scale_ = spec.scale_embeddings ? static_cast<float>(std::sqrt(static_cast<double>(H_))) : 1.0f;
  }

  const ModelConfig& config() const override { return cfg_; }

  std::unique_ptr<SequenceState> new_state(int64_t max_tokens) override {
    return private_paged_state(*this, max_tokens);
  }

  cache::BlockShape kv_block_shape(int32_t block_size) const override {
    return block_shape(static_cast<int32_t>(layers_.size()), block_size);
  }

  int mtp_layers() const override { return static_cast<int>(mtp_layers_.size()); }
  cache::BlockShape mtp_block_shape(int32_t block_size) const override {
    if (mtp_layers_.empty()) return Model::mtp_block_shape(block_size);
    return block_shape(static_cast<int32_t>(mtp_layers_.size()), block_size);
  }
  std::unique_ptr<SequenceState> new_mtp_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    if (mtp_layers_.empty()) return Model::new_mtp_state(pool, max_tokens);
    if (!pool) throw Error("new_mtp_state: no block pool");
    check_shape(pool->shape(), mtp_block_shape(pool->shape().block_size));
    return std::make_unique<PagedKvState>(std::move(pool), max_tokens);
  }

  // The MTP head over several sequences: [norm(embed(token)), norm(hidden)] → fc → MTP layer
  // (its own KV) → mtp.norm → shared lm_head, for the last row of each entry.
  void forward_mtp(const MtpEntry* entries, size_t count) override {
    if (mtp_layers_.empty()) return Model::forward_mtp(entries, count);
    if (count == 0) return;
    const int64_t total = mtp_.admit(entries, count, mtp_layers(), V_,
                                     [&](const cache::BlockShape& got) { check_shape(got, mtp_block_shape(got.block_size)); },
                                     mtp_rows_);
    reserve(total);
    seqs_.clear();
    for (const MtpHead::Rows& s : mtp_rows_) {
      seqs_.push_back(Seq{s.kv, s.pos0, s.row, s.n});
      for (int64_t t = 0; t < s.n; ++t) at_position(s.row + t, s.pos0 + t);
    }
    mtp_.input(entries, mtp_rows_, total, [&](int32_t tok, float* out) {
      tensor::dequantize_row(*embed_, tok, out);
      if (embed_scale_ != 1.0f) compute::scale_inplace(out, embed_scale_, H_);
    }, x_.data(), ctx_);
    segs_.resize(count);
    run_layer(mtp_layers_[static_cast<size_t>(entries[0].layer)], entries[0].layer, total);
    mtp_.output(entries, mtp_rows_, x_.data(), lm_head_, V_, ctx_);
    if (cfg_.final_logit_softcapping > 0) {
      const float cap = static_cast<float>(cfg_.final_logit_softcapping);
      for (size_t i = 0; i < count; ++i)
        for (int64_t j = 0; j < V_; ++j) entries[i].logits[j] = cap * std::tanh(entries[i].logits[j] / cap);
    }
  }

  cache::BlockShape block_shape(int32_t num_layers, int32_t block_size) const {
    return kv_block_shape_for(num_layers, nkv_, hd_, block_size, opts_.kv_dtype);
  }

  std::unique_ptr<SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool,
                                                 int64_t max_tokens) override {
    return checked_paged_state(*this, std::move(pool), max_tokens, cfg_.architecture);
  }

  void forward_batch(const BatchEntry* entries, size_t count) override {
    if (count == 0) return;
    const int64_t total = admit_paged_batch(entries, count, V_, [&](const cache::BlockShape& sh) { check_pool_shape(sh); },
                                            seqs_);
    reserve(total);
    for (size_t i = 0; i < count; ++i) {
      const Seq& s = seqs_[i];
      for (int64_t t = 0; t < s.n; ++t) {
        const int64_t r = s.row + t;
        tensor::dequantize_row(*embed_, entries[i].tokens[t], x_.data() + r * H_);
        if (embed_scale_ != 1.0f) compute::scale_inplace(x_.data() + r * H_, embed_scale_, H_);
        at_position(r, s.pos0 + t);
      }
    }

    segs_.resize(count);
    for (size_t li = 0; li < layers_.size(); ++li) run_layer(layers_[li], static_cast<int32_t>(li), total);

    // Final-normed hidden states for an MTP head (every row of the entries that ask).
    for (size_t i = 0; i < count; ++i)
      if (entries[i].hidden)
        for (int64_t t = 0; t < seqs_[i].n; ++t)
          compute::rms_norm(x_.data() + (seqs_[i].row + t) * H_, final_norm_.data(), H_, eps_, spec_.norm_add_one,
                   entries[i].hidden + t * H_);
    // Final norm + lm_head only over the rows whose logits are wanted, packed together (none for
    // an entry that only asks for hidden states: an embedding request).
    int64_t rows = 0;
    for (size_t i = 0; i < count; ++i) {
      const Seq& s = seqs_[i];
      if (!entries[i].logits) continue;
      for (int64_t t = entries[i].all_logits ? 0 : s.n - 1; t < s.n; ++t, ++rows)
        compute::rms_norm(x_.data() + (s.row + t) * H_, final_norm_.data(), H_, eps_, spec_.norm_add_one,
                 xn_.data() + rows * H_);
    }
    // One entry writes straight into its buffer; several share one lm_head call, then split.
    if (rows == 0) return;
    float* out = entries[0].logits;
    if (count > 1 || !out) {
      logits_buf_.resize(static_cast<size_t>(rows * V_));
      out = logits_buf_.data();
    }
    lm_head_(xn_.data(), rows, out, ctx_);
    if (cfg_.final_logit_softcapping > 0) {
      float cap = static_cast<float>(cfg_.final_logit_softcapping);
      for (int64_t i = 0; i < rows * V_; ++i) out[i] = cap * std::tanh(out[i] / cap);
    }
    if (out != entries[0].logits) scatter_logits(entries, count, out, V_);
  }

 private:
  using Seq = PagedSeq;  // one entry of the current batch: its state, first new position, rows in x_

  void load_layer(Layer& L, const WeightStore& ws, const std::string& p, bool moe) {
    L.in_norm = load_vector(ws, p + "input_layernorm.weight", H_);
    L.post_attn_norm = load_vector(ws, p + "post_attention_layernorm.weight", H_);
    if (spec_.sandwich_norms) {
      L.pre_ffn_norm = load_vector(ws, p + "pre_feedforward_layernorm.weight", H_);
      L.post_ffn_norm = load_vector(ws, p + "post_feedforward_layernorm.weight", H_);
    }
    L.q = load_linear(ws, p + "self_attn.q_proj", nh_ * hd_, H_, spec_.qkv_bias);
    L.k = load_linear(ws, p + "self_attn.k_proj", nkv_ * hd_, H_, spec_.qkv_bias);
    L.v = load_linear(ws, p + "self_attn.v_proj", nkv_ * hd_, H_, spec_.qkv_bias);
    L.o = load_linear(ws, p + "self_attn.o_proj", H_, nh_ * hd_);
    if (spec_.qk_norm || ws.find(p + "self_attn.q_norm.weight")) {
      L.q_norm = load_vector(ws, p + "self_attn.q_norm.weight", hd_);
      L.k_norm = load_vector(ws, p + "self_attn.k_norm.weight", hd_);
      // The norms scale each head dimension; move them to the pair order q/k are stored in.
      if (pairs_) {
        to_pair_order(L.q_norm);
        to_pair_order(L.k_norm);
      }
    }
    if (spec_.attn_sinks) L.sinks = load_vector(ws, p + "self_attn.sinks", nh_);
    if (moe) {
      const MoeShape sh{.hidden = H_, .experts = cfg_.num_experts, .top_k = cfg_.num_experts_per_tok,
                        .expert_inter = cfg_.moe_intermediate_size,
                        .shared_inter = cfg_.shared_expert_intermediate_size, .norm_topk = cfg_.norm_topk_prob,
                        .gpt_oss = spec_.gpt_oss_moe, .swiglu_alpha = static_cast<float>(cfg_.swiglu_alpha),
                        .swiglu_limit = static_cast<float>(cfg_.swiglu_limit)};
      L.moe = std::make_unique<MoeBlock>(ws, p + "mlp.", sh);
      return;
    }
    L.gate = load_linear(ws, p + "mlp.gate_proj", I_, H_);
    L.up = load_linear(ws, p + "mlp.up_proj", I_, H_);
    L.down = load_linear(ws, p + "mlp.down_proj", H_, I_);
  }

  void check_pool_shape(const cache::BlockShape& got) const { check_shape(got, kv_block_shape(got.block_size)); }
  void check_shape(const cache::BlockShape& got, const cache::BlockShape& want) const {
    check_block_shape(got, want, cfg_.architecture);
  }

  // Row r's position-dependent tables: RoPE angles at its own position (both bases) and its
  // query scale.
  void at_position(int64_t r, int64_t pos) {
    const int64_t half = global_rope_.half();
    global_rope_.angles(pos, gcos_.data() + r * half, gsin_.data() + r * half);
    local_rope_.angles(pos, lcos_.data() + r * half, lsin_.data() + r * half);
    qscale_[r] = query_scale(cfg_, pos);
  }

  // HF order (element s*hd/2 + j) → pair order (element 2j + s) of one head's vector.
  void to_pair_order(std::vector<float>& v) const {
    std::vector<float> hf = v;
    const int64_t half = hd_ / 2;
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t j = 0; j < half; ++j) v[2 * j + s] = hf[s * half + j];
  }

  // Exact (parity) mode: every projection dequantized once to f32.
  void materialize_f32() {
    rapid::model::materialize_f32(lm_head_, pool_, owned_);
    rapid::model::materialize_f32(mtp_.fc(), pool_, owned_);
    for (auto* group : {&layers_, &mtp_layers_})
      for (auto& L : *group) {
        for (Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) rapid::model::materialize_f32(*l, pool_, owned_);
        if (L.moe) L.moe->materialize_f32(pool_, owned_);
      }
  }

  void reserve(int64_t n) {
    if (n <= cap_) return;
    cap_ = n;
    x_.resize(n * H_);
    xn_.resize(n * H_);
    tmp_.resize(n * H_);
    q_.resize(n * nh_ * hd_);
    k_.resize(n * nkv_ * hd_);
    v_.resize(n * nkv_ * hd_);
    att_.resize(n * nh_ * hd_);
    gate_.resize(n * I_);
    up_.resize(n * I_);
    const int64_t half = global_rope_.half();
    gcos_.resize(n * half);
    gsin_.resize(n * half);
    lcos_.resize(n * half);
    lsin_.resize(n * half);
    qscale_.resize(n);
  }

  // fn(t0, t1) over the batch's rows [0, n), 32 at a time on the pool (a row's values never depend
  // on the split; a decode's few rows stay on this thread, as a region costs more than they do).
  template <class F>
  void each_rows(int64_t n, F&& fn) {
    pool_.parallel_for(n, 32, fn);
  }

  // x += r row by row, then the next sublayer's input norm of x into xn_.
  void add_then_norm(const float* r, const std::vector<float>& norm, int64_t n) {
    each_rows(n, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        if (r) compute::add_inplace(x_.data() + t * H_, r + t * H_, H_);
        compute::rms_norm(x_.data() + t * H_, norm.data(), H_, eps_, spec_.norm_add_one, xn_.data() + t * H_);
      }
    });
  }

  // Gemma's sandwich norm of a sublayer's output rows, in place.
  void norm_rows(float* y, const std::vector<float>& norm, int64_t n) {
    each_rows(n, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        compute::rms_norm(y + t * H_, norm.data(), H_, eps_, spec_.norm_add_one, y + t * H_);
    });
  }

  // All batch rows go through every projection at once; KV stores and attention are per entry.
  void run_layer(const Layer& L, int32_t li, int64_t n) {
    const bool one = spec_.norm_add_one;
    add_then_norm(nullptr, L.in_norm, n);
    {
      compute::MatmulOut outs[3] = {{&L.q.w, q_.data()}, {&L.k.w, k_.data()}, {&L.v.w, v_.data()}};
      compute::matmul_multi(outs, 3, xn_.data(), n, pool_, ctx_.scratch, ctx_.path);
      L.q.add_bias(q_.data(), n);
      L.k.add_bias(k_.data(), n);
      L.v.add_bias(v_.data(), n);
    }
    const compute::Rope& rope = L.sliding ? local_rope_ : global_rope_;
    const float* cs = L.sliding ? lcos_.data() : gcos_.data();
    const float* sn = L.sliding ? lsin_.data() : gsin_.data();
    const int64_t half = rope.half();
    each_rows(n, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* qt = q_.data() + t * nh_ * hd_;
        float* kt = k_.data() + t * nkv_ * hd_;
        if (!L.q_norm.empty()) {
          for (int64_t h = 0; h < nh_; ++h) compute::rms_norm(qt + h * hd_, L.q_norm.data(), hd_, eps_, one, qt + h * hd_);
          for (int64_t h = 0; h < nkv_; ++h) compute::rms_norm(kt + h * hd_, L.k_norm.data(), hd_, eps_, one, kt + h * hd_);
        }
        if (pairs_) {
          rope.apply_pairs(qt, nh_, hd_, cs + t * half, sn + t * half);
          rope.apply_pairs(kt, nkv_, hd_, cs + t * half, sn + t * half);
        } else {
          rope.apply(qt, nh_, hd_, cs + t * half, sn + t * half);
          rope.apply(kt, nkv_, hd_, cs + t * half, sn + t * half);
        }
        if (qscale_[t] != 1.0f) compute::scale_inplace(qt, qscale_[t], nh_ * hd_);  // after RoPE, as ministral3
      }
    });
    store_kv_segments(seqs_, li, nkv_, hd_, nh_ * hd_, q_.data(), k_.data(), v_.data(), att_.data(), segs_);
    const compute::AttentionParams ap{.n_heads = nh_, .n_kv_heads = nkv_, .head_dim = hd_, .scale = attn_scale_,
                             .window = L.sliding ? cfg_.sliding_window : 0,
                             .softcap = static_cast<float>(cfg_.attn_logit_softcapping),
                             .sinks = L.sinks.empty() ? nullptr : L.sinks.data()};
    compute::attention_batch(segs_.data(), segs_.size(), ap, pool_);
    L.o(att_.data(), n, tmp_.data(), ctx_);
    if (spec_.sandwich_norms) norm_rows(tmp_.data(), L.post_attn_norm, n);
    add_then_norm(tmp_.data(), spec_.sandwich_norms ? L.pre_ffn_norm : L.post_attn_norm, n);
    if (L.moe) {
      L.moe->forward(xn_.data(), n, tmp_.data(), ctx_, moe_scratch_);
      compute::add_inplace(x_.data(), tmp_.data(), n * H_);
      return;
    }
    // Biases, then libm's exp/tanh per element (outputs stay those of the reference build), per
    // chunk of rows inside the projections' region: for a batch of decodes this is tens of
    // microseconds per layer on one core otherwise, and a region of its own costs a synchronisation.
    const compute::GatedAct act{spec_.act == Activation::GeluTanh ? compute::GatedAct::GeluTanh : compute::GatedAct::Silu};
    compute::matmul_pair({&L.gate.w, gate_.data()}, {&L.up.w, up_.data()}, xn_.data(), n, pool_, ctx_.scratch,
                         [&](int64_t r0, int64_t r1) {
                           compute::gated_act_rows(act, gate_.data(), up_.data(), n, I_, r0, r1,
                                                   L.gate.bias.empty() ? nullptr : L.gate.bias.data(),
                                                   L.up.bias.empty() ? nullptr : L.up.bias.data());
                         },
                         ctx_.path);
    L.down(gate_.data(), n, tmp_.data(), ctx_);
    if (spec_.sandwich_norms) norm_rows(tmp_.data(), L.post_ffn_norm, n);
    each_rows(n, [&](int64_t t0, int64_t t1) {
      compute::add_inplace(x_.data() + t0 * H_, tmp_.data() + t0 * H_, (t1 - t0) * H_);
    });
  }

  std::shared_ptr<Checkpoint> ckpt_;
  ArchSpec spec_;
  ModelOptions opts_;
  ModelConfig cfg_;
  compute::ThreadPool pool_;
  ExecContext ctx_;
  int64_t H_, I_, nh_, nkv_, hd_, V_;
  float eps_, attn_scale_ = 1, embed_scale_ = 1;
  bool pairs_ = false;  // q/k heads in GGUF pair order: RoPE rotates (2j, 2j+1)
  const tensor::Tensor* embed_ = nullptr;
  Linear lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;  // f32 copies in Exact mode
  compute::Rope global_rope_, local_rope_;
  int64_t cap_ = 0;
  std::vector<float> x_, xn_, tmp_, q_, k_, v_, att_, gate_, up_, gcos_, gsin_, lcos_, lsin_, qscale_, logits_buf_;
  MtpHead mtp_;
  std::vector<MtpHead::Rows> mtp_rows_;
  std::vector<Layer> mtp_layers_;
  MoeScratch moe_scratch_;
  std::vector<Seq> seqs_;                // the current batch (valid during forward_batch)
  std::vector<compute::AttentionSegment> segs_;
};

}  // namespace

std::unique_ptr<Model> make_decoder_model(std::shared_ptr<Checkpoint> ckpt, const ArchSpec& spec,
                                          const ModelOptions& opts) {
  return std::make_unique<DecoderModel>(std::move(ckpt), spec, opts);
}

}  // namespace rapid::model
