// Gemma 4 text (gemma4_text, and the language_model of gemma4 checkpoints; vision and audio
// towers are not loaded). Against Gemma 3 it has: plain-w RMSNorms, attention scale 1 with a
// weightless RMSNorm on values, full-attention layers with a wider head (global_head_dim), their own
// KV heads when keys double as values (attention_k_eq_v), and proportional RoPE rotating only the
// first fraction of frequencies; the last num_kv_shared_layers layers computing no K/V and reading
// those of the last earlier layer of their type; per-layer token embeddings mixed into every layer
// after its MLP (hidden_size_per_layer_input); a learned scalar per layer; 2×-wide MLPs in the
// kv-shared layers (use_double_wide_mlp); in the MoE variant (enable_moe_block, 26B-A4B) routed
// GELU experts beside the dense MLP, each with its own norms (model/moe.h, MoeShape::gemma4).
//
// KV pages: layers differ in K/V width (kv heads × head size), so a page slot is `unit` floats wide
// (the gcd of the widths) and a layer owns width/unit consecutive slots, K in the first half of its
// planes and V in the second. kv-shared layers own none: they read their source layer's pages.
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "common/error.h"
#include "compute/attention.h"
#include "compute/ops.h"
#include "compute/rope.h"
#include "model/arch.h"
#include "model/batch_helpers.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/paged_kv.h"
#include "tensor/dequantize.h"

namespace rapid::model {
namespace {

struct G4Layer {
  std::vector<float> in_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm, q_norm, k_norm, pl_norm;
  Linear q, k, v, o, gate, up, down, pl_gate, pl_proj;
  std::unique_ptr<MoeBlock> moe;  // enable_moe_block: experts beside the dense MLP
  std::vector<float> pre_ffn_norm2, post_ffn_norm1, post_ffn_norm2;
  float scalar = 1.0f;
  bool sliding = false, k_eq_v = false;
  int64_t hd = 0, nkv = 0, inter = 0;
  int32_t kv_src = 0;           // the layer whose K/V this one attends over (itself unless shared)
  int32_t slot0 = 0, slots = 0; // its page slots (kv-owning layers)
};

class Gemma4Model final : public Model {
 public:
  Gemma4Model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts)
      : ckpt_(std::move(ckpt)), opts_(opts), pool_(opts.num_threads) {
    cfg_ = ckpt_->config;
    check_decoder_sizes(cfg_, ckpt_->path, "architecture gemma4");
    H_ = cfg_.hidden_size;
    nh_ = cfg_.num_attention_heads;
    V_ = cfg_.vocab_size;
    L_ = cfg_.num_hidden_layers;
    P_ = cfg_.hidden_size_per_layer_input;
    eps_ = static_cast<float>(cfg_.rms_norm_eps);
    ctx_.pool = &pool_;
    ctx_.path = opts.matmul;
    plan_layers();
    load_weights(ckpt_->weights);
    if (opts.matmul == compute::MatmulPath::Exact) materialize();
    make_ropes();
  }

  const ModelConfig& config() const override { return cfg_; }

  std::unique_ptr<SequenceState> new_state(int64_t max_tokens) override {
    return private_paged_state(*this, max_tokens);
  }

  cache::BlockShape kv_block_shape(int32_t block_size) const override {
    return kv_block_shape_for(total_slots_, 1, unit_, block_size, opts_.kv_dtype);
  }

  std::unique_ptr<SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    return checked_paged_state(*this, std::move(pool), max_tokens, "gemma4");
  }

  void forward_batch(const BatchEntry* entries, size_t count) override {
    if (count == 0) return;
    const int64_t total =
        admit_paged_batch(entries, count, V_, [&](const cache::BlockShape& sh) { check_pool_shape(sh); }, seqs_);
    reserve(total);
    embed(entries, total);
    segs_.resize(count);
    for (int32_t li = 0; li < L_; ++li) run_layer(layers_[static_cast<size_t>(li)], li, total);
    head(entries, count);
  }

 private:
  // Per layer: head geometry, which layer's KV it reads, and its page slots.
  void plan_layers() {
    const auto& c = cfg_;
    layers_.resize(static_cast<size_t>(L_));
    const int64_t first_shared = L_ - c.num_kv_shared_layers;
    int32_t last_of_type[2] = {-1, -1};  // [sliding] → last kv-owning layer of that type
    int64_t unit = 0;
    for (int32_t i = 0; i < L_; ++i) {
      G4Layer& l = layers_[static_cast<size_t>(i)];
      l.sliding = i < static_cast<int64_t>(c.layer_is_sliding.size()) && c.layer_is_sliding[i] && c.sliding_window > 0;
      l.hd = l.sliding ? c.head_dim : c.global_head_dim;
      l.k_eq_v = c.attention_k_eq_v && !l.sliding;
      l.nkv = l.k_eq_v && c.num_global_key_value_heads > 0 ? c.num_global_key_value_heads : c.num_key_value_heads;
      if (l.hd <= 0 || l.hd % 2 || nh_ % l.nkv)
        throw Error(ckpt_->path + ": gemma4 layer " + std::to_string(i) + " has an invalid head geometry");
      if (i < first_shared) {
        l.kv_src = i;
        last_of_type[l.sliding] = i;
        unit = std::gcd(unit, l.nkv * l.hd);
      } else {
        l.kv_src = last_of_type[l.sliding];
        if (l.kv_src < 0)
          throw Error(ckpt_->path + ": gemma4 kv-shared layer " + std::to_string(i) +
                      " has no earlier layer of its type to share with");
        const G4Layer& src = layers_[static_cast<size_t>(l.kv_src)];
        l.hd = src.hd;
        l.nkv = src.nkv;
      }
      max_q_ = std::max(max_q_, nh_ * l.hd);
      max_kv_ = std::max(max_kv_, l.nkv * l.hd);
    }
    unit_ = unit;
    for (int32_t i = 0; i < first_shared; ++i) {
      G4Layer& l = layers_[static_cast<size_t>(i)];
      l.slot0 = total_slots_;
      l.slots = static_cast<int32_t>(l.nkv * l.hd / unit_);
      total_slots_ += l.slots;
    }
  }

  void load_weights(const WeightStore& ws) {
    embed_ = &ws.get("model.embed_tokens.weight");
    if (embed_->rows() != V_ || embed_->cols() != H_)
      throw Error("model.embed_tokens.weight: shape does not match vocab_size x hidden_size");
    if (ws.find("lm_head.weight")) lm_head_ = load_linear(ws, "lm_head", V_, H_);
    else lm_head_.w = compute::WeightView::of(*embed_);
    final_norm_ = load_vector(ws, "model.norm.weight", H_);
    if (P_ > 0) {
      embed_pl_ = &ws.get("model.embed_tokens_per_layer.weight");
      if (embed_pl_->rows() < V_ || embed_pl_->cols() != L_ * P_)
        throw Error("model.embed_tokens_per_layer.weight: expected [>= vocab_size, num_hidden_layers x " +
                    std::to_string(P_) + "]");
      pl_model_proj_ = load_linear(ws, "model.per_layer_model_projection", L_ * P_, H_);
      pl_proj_norm_ = load_vector(ws, "model.per_layer_projection_norm.weight", P_);
    }
    for (int32_t i = 0; i < L_; ++i) load_layer(layers_[static_cast<size_t>(i)], ws, i);
  }

  void load_layer(G4Layer& l, const WeightStore& ws, int32_t i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::pair<std::vector<float>*, const char*> norms[] = {
        {&l.in_norm, "input_layernorm"}, {&l.post_attn_norm, "post_attention_layernorm"},
        {&l.pre_ffn_norm, "pre_feedforward_layernorm"}, {&l.post_ffn_norm, "post_feedforward_layernorm"}};
    for (auto [dst, name] : norms) *dst = load_vector(ws, p + name + ".weight", H_);
    l.q = load_linear(ws, p + "self_attn.q_proj", nh_ * l.hd, H_);
    l.o = load_linear(ws, p + "self_attn.o_proj", H_, nh_ * l.hd);
    l.q_norm = load_vector(ws, p + "self_attn.q_norm.weight", l.hd);
    if (l.kv_src == i) {  // kv-shared layers' k/v weights (present in HF checkpoints) are unused
      l.k = load_linear(ws, p + "self_attn.k_proj", l.nkv * l.hd, H_);
      if (!l.k_eq_v) l.v = load_linear(ws, p + "self_attn.v_proj", l.nkv * l.hd, H_);
      l.k_norm = load_vector(ws, p + "self_attn.k_norm.weight", l.hd);
    }
    // The MLP's width from its weight: 2 × intermediate_size in double-wide kv-shared layers.
    const tensor::Tensor& g = ws.get(p + "mlp.gate_proj.weight");
    l.inter = g.shape.empty() ? 0 : g.shape[0];
    if (l.inter != cfg_.intermediate_size && l.inter != 2 * cfg_.intermediate_size)
      throw Error(g.name + ": " + std::to_string(l.inter) + " rows, expected intermediate_size or twice it");
    l.gate = load_linear(ws, p + "mlp.gate_proj", l.inter, H_);
    l.up = load_linear(ws, p + "mlp.up_proj", l.inter, H_);
    l.down = load_linear(ws, p + "mlp.down_proj", H_, l.inter);
    max_inter_ = std::max(max_inter_, l.inter);
    if (cfg_.enable_moe_block) load_moe(l, ws, p);
    if (P_ > 0) {
      l.pl_gate = load_linear(ws, p + "per_layer_input_gate", P_, H_);
      l.pl_proj = load_linear(ws, p + "per_layer_projection", H_, P_);
      l.pl_norm = load_vector(ws, p + "post_per_layer_input_norm.weight", H_);
    }
    if (ws.find(p + "layer_scalar")) l.scalar = load_vector(ws, p + "layer_scalar", 1)[0];
  }

  void load_moe(G4Layer& l, const WeightStore& ws, const std::string& p) {
    l.pre_ffn_norm2 = load_vector(ws, p + "pre_feedforward_layernorm_2.weight", H_);
    l.post_ffn_norm1 = load_vector(ws, p + "post_feedforward_layernorm_1.weight", H_);
    l.post_ffn_norm2 = load_vector(ws, p + "post_feedforward_layernorm_2.weight", H_);
    const MoeShape sh{.hidden = H_, .experts = cfg_.num_experts, .top_k = cfg_.num_experts_per_tok,
                      .expert_inter = cfg_.moe_intermediate_size, .gemma4 = true, .norm_eps = eps_};
    l.moe = std::make_unique<MoeBlock>(ws, p, sh);
  }

  // Sliding layers: plain RoPE over the whole head. Full layers: "proportional" RoPE, whose
  // frequencies are those of the whole (global) head but only the first partial_rotary_factor of
  // them turn; the rest stay put (cos 1, sin 0: see angles()).
  void make_ropes() {
    const auto& c = cfg_;
    local_rope_ = compute::Rope(rope_params(c, c.head_dim, c.rope_local_base_freq, RopeScaling{}));
    RopeScaling gs;
    if (c.rope_scaling.factor != 1.0) {  // proportional's factor stretches every wavelength
      gs.type = "linear";
      gs.factor = c.rope_scaling.factor;
    }
    global_rope_ = compute::Rope(rope_params(c, c.global_head_dim, c.rope_theta, gs));
    global_turning_ = static_cast<int64_t>(static_cast<double>(c.global_head_dim) * c.global_partial_rotary_factor) / 2;
  }

  void check_pool_shape(const cache::BlockShape& got) const {
    check_block_shape(got, kv_block_shape(got.block_size), "gemma4");
  }

  // Layer l's K/V pages: its slots' planes, K in the first half, V in the second.
  compute::KvView view(PagedKvState& kv, const G4Layer& l) const {
    const G4Layer& src = layers_[static_cast<size_t>(l.kv_src)];
    compute::KvView v = kv.layer(src.slot0);
    const cache::BlockShape& sh = kv.pool().shape();
    const size_t elem = cache::kv_dtype_bytes(sh.dtype);
    v.v_off = v.k_off + static_cast<size_t>(src.slots) * sh.plane_bytes();
    v.slot_stride = static_cast<size_t>(src.hd) * elem;
    v.head_stride = static_cast<size_t>(sh.block_size) * v.slot_stride;
    return v;
  }

  void materialize() {
    materialize_f32(lm_head_, pool_, owned_);
    materialize_f32(pl_model_proj_, pool_, owned_);
    for (auto& l : layers_) {
      for (Linear* x : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.pl_gate, &l.pl_proj})
        materialize_f32(*x, pool_, owned_);
      if (l.moe) l.moe->materialize_f32(pool_, owned_);
    }
  }

  void reserve(int64_t n) {
    if (n <= cap_) return;
    cap_ = n;
    for (auto* b : {&x_, &xn_, &tmp_, &tmp2_}) b->resize(static_cast<size_t>(n * H_));
    q_.resize(static_cast<size_t>(n * max_q_));
    att_.resize(q_.size());
    k_.resize(static_cast<size_t>(n * max_kv_));
    v_.resize(k_.size());
    gate_.resize(static_cast<size_t>(n * max_inter_));
    up_.resize(gate_.size());
    ple_.resize(static_cast<size_t>(n * L_ * P_));
    plg_.resize(static_cast<size_t>(n * P_));
    gcos_.resize(static_cast<size_t>(n * global_rope_.half()));
    gsin_.resize(gcos_.size());
    lcos_.resize(static_cast<size_t>(n * local_rope_.half()));
    lsin_.resize(lcos_.size());
  }

  // Scaled token embeddings, RoPE tables at each row's position, and the per-layer inputs.
  void embed(const BatchEntry* entries, int64_t total) {
    const float scale = static_cast<float>(std::sqrt(static_cast<double>(H_)));
    const int64_t gh = global_rope_.half(), lh = local_rope_.half();
    for (size_t i = 0; i < seqs_.size(); ++i)
      for (int64_t t = 0; t < seqs_[i].n; ++t) {
        const int64_t r = seqs_[i].row + t, pos = seqs_[i].pos0 + t;
        tensor::dequantize_row(*embed_, entries[i].tokens[t], x_.data() + r * H_);
        compute::scale_inplace(x_.data() + r * H_, scale, H_);
        global_rope_.angles(pos, gcos_.data() + r * gh, gsin_.data() + r * gh);
        for (int64_t j = global_turning_; j < gh; ++j) gcos_[r * gh + j] = 1.0f, gsin_[r * gh + j] = 0.0f;
        local_rope_.angles(pos, lcos_.data() + r * lh, lsin_.data() + r * lh);
        if (P_ > 0) dequantize_row(*embed_pl_, entries[i].tokens[t], ple_.data() + r * L_ * P_);
      }
    if (P_ > 0) per_layer_inputs(total);
  }

  // ple_ [n][L][P] holds the token's per-layer embeddings; becomes
  // (norm(projection(x) / sqrt(H)) + embedding · sqrt(P)) / sqrt(2).
  void per_layer_inputs(int64_t n) {
    std::vector<float>& proj = pl_buf_;
    proj.resize(static_cast<size_t>(n * L_ * P_));
    pl_model_proj_(x_.data(), n, proj.data(), ctx_);
    const float emb_scale = static_cast<float>(std::sqrt(static_cast<double>(P_)));
    const float proj_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H_)));
    const float mix = static_cast<float>(1.0 / std::sqrt(2.0));
    for (int64_t r = 0; r < n * L_; ++r) {
      float* pr = proj.data() + r * P_;
      float* e = ple_.data() + r * P_;
      compute::scale_inplace(pr, proj_scale, P_);
      compute::rms_norm(pr, pl_proj_norm_.data(), P_, eps_, false, pr);
      for (int64_t j = 0; j < P_; ++j) e[j] = (pr[j] + e[j] * emb_scale) * mix;
    }
  }

  void norm_rows(float* x, const float* w, int64_t n, int64_t dim) const {
    for (int64_t t = 0; t < n; ++t) compute::rms_norm(x + t * dim, w, dim, eps_, false, x + t * dim);
  }

  // q (and, in kv-owning layers, k and v) of every row, normed and rotated; k/v stored in the pages.
  void project_qkv(const G4Layer& l, int64_t n) {
    const int64_t qd = nh_ * l.hd, kd = l.nkv * l.hd;
    if (l.k.present()) {
      compute::MatmulOut outs[3] = {{&l.q.w, q_.data()}, {&l.k.w, k_.data()}, {&l.v.w, v_.data()}};
      compute::matmul_multi(outs, l.k_eq_v ? 2 : 3, xn_.data(), n, pool_, ctx_.scratch, ctx_.path);
      if (l.k_eq_v) std::memcpy(v_.data(), k_.data(), static_cast<size_t>(n * kd) * sizeof(float));
    } else {
      l.q(xn_.data(), n, q_.data(), ctx_);
    }
    const compute::Rope& rope = l.sliding ? local_rope_ : global_rope_;
    const float* cs = l.sliding ? lcos_.data() : gcos_.data();
    const float* sn = l.sliding ? lsin_.data() : gsin_.data();
    const int64_t half = rope.half();
    norm_rows(q_.data(), l.q_norm.data(), n * nh_, l.hd);
    for (int64_t t = 0; t < n; ++t) rope.apply(q_.data() + t * qd, nh_, l.hd, cs + t * half, sn + t * half);
    if (!l.k.present()) return;
    norm_rows(k_.data(), l.k_norm.data(), n * l.nkv, l.hd);
    norm_rows(v_.data(), nullptr, n * l.nkv, l.hd);
    for (int64_t t = 0; t < n; ++t) rope.apply(k_.data() + t * kd, l.nkv, l.hd, cs + t * half, sn + t * half);
  }

  void run_layer(const G4Layer& l, int32_t li, int64_t n) {
    for (int64_t t = 0; t < n; ++t) compute::rms_norm(x_.data() + t * H_, l.in_norm.data(), H_, eps_, false, xn_.data() + t * H_);
    project_qkv(l, n);
    const int64_t qd = nh_ * l.hd, kd = l.nkv * l.hd;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const PagedSeq& s = seqs_[i];
      compute::AttentionSegment& sg = segs_[i];
      sg.kv = view(*s.kv, l);
      sg.q = q_.data() + s.row * qd;
      sg.out = att_.data() + s.row * qd;
      sg.n = s.n;
      sg.pos0 = s.pos0;
      if (l.kv_src == li)
        kv_store(sg.kv, s.pos0, s.n, l.nkv, l.hd, k_.data() + s.row * kd, v_.data() + s.row * kd);
    }
    const compute::AttentionParams ap{.n_heads = nh_, .n_kv_heads = l.nkv, .head_dim = l.hd, .scale = 1.0f,
                             .window = l.sliding ? cfg_.sliding_window : 0};
    compute::attention_batch(segs_.data(), segs_.size(), ap, pool_);
    l.o(att_.data(), n, tmp_.data(), ctx_);
    norm_rows(tmp_.data(), l.post_attn_norm.data(), n, H_);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
    mlp(l, n);
    if (P_ > 0) per_layer_input(l, li, n);
    if (l.scalar != 1.0f) compute::scale_inplace(x_.data(), l.scalar, n * H_);
  }

  // x += norm(MLP(norm(x))); with experts, the MLP's and the experts' outputs each normed, summed.
  void mlp(const G4Layer& l, int64_t n) {
    for (int64_t t = 0; t < n; ++t)
      compute::rms_norm(x_.data() + t * H_, l.pre_ffn_norm.data(), H_, eps_, false, xn_.data() + t * H_);
    // gelu(gate)·up per chunk of rows, inside the projections' region.
    compute::matmul_pair({&l.gate.w, gate_.data()}, {&l.up.w, up_.data()}, xn_.data(), n, pool_, ctx_.scratch,
                         [&](int64_t r0, int64_t r1) {
                           compute::gated_act_rows({compute::GatedAct::GeluTanh}, gate_.data(), up_.data(), n,
                                                   l.inter, r0, r1);
                         },
                         ctx_.path);
    l.down(gate_.data(), n, tmp_.data(), ctx_);
    if (l.moe) {
      norm_rows(tmp_.data(), l.post_ffn_norm1.data(), n, H_);
      for (int64_t t = 0; t < n; ++t)
        compute::rms_norm(x_.data() + t * H_, l.pre_ffn_norm2.data(), H_, eps_, false, xn_.data() + t * H_);
      l.moe->forward(xn_.data(), n, tmp2_.data(), ctx_, moe_scratch_, x_.data());
      norm_rows(tmp2_.data(), l.post_ffn_norm2.data(), n, H_);
      compute::add_inplace(tmp_.data(), tmp2_.data(), n * H_);
    }
    norm_rows(tmp_.data(), l.post_ffn_norm.data(), n, H_);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
  }

  // x += norm(projection(gelu(gate(x)) · per-layer input of this layer)).
  void per_layer_input(const G4Layer& l, int32_t li, int64_t n) {
    l.pl_gate(x_.data(), n, plg_.data(), ctx_);
    for (int64_t t = 0; t < n; ++t)
      compute::gelu_tanh_mul(plg_.data() + t * P_, ple_.data() + (t * L_ + li) * P_, P_, plg_.data() + t * P_);
    l.pl_proj(plg_.data(), n, tmp_.data(), ctx_);
    norm_rows(tmp_.data(), l.pl_norm.data(), n, H_);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
  }

  void head(const BatchEntry* entries, size_t count) {
    const FinalHead h{.norm = final_norm_, .eps = eps_, .lm_head = lm_head_, .hidden = H_, .vocab = V_,
                      .softcap = static_cast<float>(cfg_.final_logit_softcapping)};
    final_head(h, entries, count, seqs_, x_.data(), xn_.data(), logits_buf_, ctx_);
  }

  std::shared_ptr<Checkpoint> ckpt_;
  ModelOptions opts_;
  ModelConfig cfg_;
  compute::ThreadPool pool_;
  ExecContext ctx_;
  int64_t H_ = 0, nh_ = 0, V_ = 0, P_ = 0;
  int32_t L_ = 0;
  float eps_ = 1e-6f;
  int64_t unit_ = 1, max_q_ = 0, max_kv_ = 0, max_inter_ = 0, global_turning_ = 0;
  int32_t total_slots_ = 0;
  const tensor::Tensor* embed_ = nullptr;
  const tensor::Tensor* embed_pl_ = nullptr;
  Linear lm_head_, pl_model_proj_;
  std::vector<float> final_norm_, pl_proj_norm_;
  std::vector<G4Layer> layers_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;  // f32 copies in Exact mode
  compute::Rope global_rope_, local_rope_;
  int64_t cap_ = 0;
  MoeScratch moe_scratch_;
  std::vector<float> x_, xn_, tmp_, tmp2_, q_, k_, v_, att_, gate_, up_, ple_, plg_, pl_buf_, gcos_, gsin_, lcos_, lsin_,
      logits_buf_;
  std::vector<PagedSeq> seqs_;
  std::vector<compute::AttentionSegment> segs_;
};

}  // namespace

std::unique_ptr<Model> make_gemma4_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  return std::make_unique<Gemma4Model>(std::move(ckpt), opts);
}

}  // namespace rapid::model
