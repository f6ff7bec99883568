// Qwen3.5 (model_type qwen3_5 / qwen3_5_text / qwen3_5_moe) and Qwen3-Next (qwen3_next): a hybrid
// of Gated DeltaNet layers (linear attention with a recurrent state) and gated full-attention
// layers, dense or MoE MLPs, after mlx-lm's qwen3_5.py and qwen3_next.py. The two families differ
// only in how the DeltaNet input projections are stored (fused and interleaved per key head in
// Qwen3-Next's HF/MLX checkpoints, see split_fused; separate in its GGUF files) and in which layers route (config: layer_is_moe). A sequence's state is the KV pages of the full-attention layers plus, per DeltaNet
// layer, the convolution tail and the f32 recurrent state (HybridState). Decode runs the
// recurrence; prefill too, or its chunk-parallel form (ModelOptions::chunked_deltanet).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "compute/attention.h"
#include "tensor/dequantize.h"
#include "compute/gated_delta.h"
#include "compute/ops.h"
#include "compute/rope.h"
#include "model/arch.h"
#include "model/layers.h"
#include "model/mtp_head.h"
#include "model/moe.h"
#include "model/paged_kv.h"

namespace rapid::model {
namespace {

class Qwen35Model;

// KV pages of the full-attention layers (the PagedKvState base, so the engine's paged
// bookkeeping applies unchanged) + conv and recurrent state of the DeltaNet layers.
//
// Rollback (speculative verification): a forward that asks for every row's logits over more than
// one token records a window — the DeltaNet state before it plus, per DeltaNet layer, the inputs of
// the recurrence (the pre-conv q/k/v projections and the gates). truncate() to a length inside that
// window restores the state and replays only the conv and the recurrence over the kept positions
// (no projections, no attention, no MLP), which yields exactly the state a forward over the kept
// tokens alone would have left. The KV pages are truncated as for any model. Any other length
// but 0 cannot be reached and is refused.
class HybridState final : public PagedKvState {
 public:
  HybridState(Qwen35Model* model, std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens, int64_t n_linear,
              int64_t conv_floats, int64_t ssm_floats)
      : PagedKvState(std::move(pool), max_tokens), model_(model), n_linear_(n_linear), conv_floats_(conv_floats),
        ssm_floats_(ssm_floats), conv_(static_cast<size_t>(n_linear * conv_floats), 0.0f),
        ssm_(static_cast<size_t>(n_linear * ssm_floats), 0.0f) {}

  void truncate(int64_t n) override;

  // conv tails then SSM states, f32 host order (checkpoints never leave this machine's format:
  // the disk store's directory key covers the weights and the page layout).
  size_t recurrent_bytes() const override { return (conv_.size() + ssm_.size()) * sizeof(float); }
  void save_recurrent(uint8_t* out) const override {
    std::memcpy(out, conv_.data(), conv_.size() * sizeof(float));
    std::memcpy(out + conv_.size() * sizeof(float), ssm_.data(), ssm_.size() * sizeof(float));
  }
  void restore_recurrent(const uint8_t* bytes, size_t n) override {
    if (n != recurrent_bytes())
      throw Error("recurrent state of " + std::to_string(n) + " bytes for a model whose state is " +
                  std::to_string(recurrent_bytes()) + " bytes");
    std::memcpy(conv_.data(), bytes, conv_.size() * sizeof(float));
    std::memcpy(ssm_.data(), bytes + conv_.size() * sizeof(float), ssm_.size() * sizeof(float));
  }

  PagedKvState& kv() { return *this; }
  float* conv(int64_t l) { return conv_.data() + l * conv_floats_; }
  float* ssm(int64_t l) { return ssm_.data() + l * ssm_floats_; }

  // The recorded window (see above): positions [pos0, pos0 + n) of the last forward.
  struct Window {
    int64_t pos0 = 0, n = 0;
    std::vector<float> conv0, ssm0;   // the DeltaNet state before that forward
    std::vector<float> qkv, g, beta;  // per DeltaNet layer: [n][C] projections, [n][Hv] gates
  };
  // Called at the start of every forward of this state: drops the old window, and when `record`,
  // snapshots the state for a new one over n tokens from the current length.
  void begin_window(bool record, int64_t n, int64_t C, int64_t Hv) {
    win_.n = 0;
    if (!record) return;
    win_.pos0 = length();
    win_.n = n;
    win_.conv0.assign(conv_.begin(), conv_.end());
    win_.ssm0.assign(ssm_.begin(), ssm_.end());
    win_.qkv.resize(static_cast<size_t>(n_linear_ * n * C));
    win_.g.resize(static_cast<size_t>(n_linear_ * n * Hv));
    win_.beta.resize(static_cast<size_t>(n_linear_ * n * Hv));
  }
  const Window& window() const { return win_; }
  Window& window() { return win_; }

 private:
  Qwen35Model* model_;
  int64_t n_linear_, conv_floats_, ssm_floats_;
  std::vector<float> conv_, ssm_;
  Window win_;
};

struct Layer {
  bool linear = false;
  int32_t index = 0;  // among the layers of its kind (KV layer / DeltaNet state slot)
  std::vector<float> in_norm, post_norm;
  Linear gate, up, down;
  std::unique_ptr<MoeBlock> moe;  // qwen3_5_moe: routed + shared experts instead of gate/up/down
  // Gated DeltaNet: separate projections (Qwen3.5) or fused qkvz / ba (Qwen3-Next)
  Linear qkv, z, b, a, out;
  Linear qkvz, ba;
  std::vector<float> conv_w, A_log, dt_bias, gnorm;
  // Gated full attention (q_proj rows: per head, the query then its output gate)
  Linear q, k, v, o;
  std::vector<float> q_norm, k_norm;
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts)
      : ckpt_(std::move(ckpt)), opts_(opts), pool_(opts.num_threads) {
    cfg_ = ckpt_->config;
    read_geometry();
    ctx_.pool = &pool_;
    ctx_.path = opts.matmul;
    const WeightStore& ws = ckpt_->weights;
    hf_layout_ = has_hf_layout(ws);
    fused_ = has_fused_projections(ws);
    if (fused_ && gd_.tiled)  // split_fused groups value heads by key head (project_head relies on it)
      throw Error(ckpt_->path + ": fused DeltaNet projections with tiled value heads");
    embed_ = &ws.get("model.embed_tokens.weight");
    if (embed_->rows() != V_ || embed_->cols() != H_)
      throw Error("model.embed_tokens.weight: shape does not match vocab_size x hidden_size");
    if (ws.find("lm_head.weight") && !cfg_.tie_word_embeddings) lm_head_ = load_linear(ws, "lm_head", V_, H_);
    else lm_head_.w = compute::WeightView::of(*embed_);
    final_norm_ = norm(ws, "model.norm.weight", H_);
    layers_.resize(static_cast<size_t>(cfg_.num_hidden_layers));
    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      Layer& L = layers_[static_cast<size_t>(i)];
      L.linear = cfg_.layer_is_linear[static_cast<size_t>(i)];
      L.index = static_cast<int32_t>(L.linear ? n_linear_++ : n_full_++);
      const bool moe = i < static_cast<int64_t>(cfg_.layer_is_moe.size()) && cfg_.layer_is_moe[static_cast<size_t>(i)];
      load_layer(ws, "model.layers." + std::to_string(i) + ".", L, moe);
    }
    if (n_full_ == 0) throw Error(ckpt_->path + ": Qwen3.5 config has no full-attention layer");
    load_mtp(ws);
    if (opts.matmul == compute::MatmulPath::Exact) {
      materialize_f32(lm_head_, pool_, owned_);
      materialize_f32(mtp_.fc(), pool_, owned_);
      for (auto* group : {&layers_, &mtp_layers_})
        for (auto& L : *group) {
          for (Linear* l :
               {&L.gate, &L.up, &L.down, &L.qkv, &L.z, &L.b, &L.a, &L.qkvz, &L.ba, &L.out, &L.q, &L.k, &L.v, &L.o})
            materialize_f32(*l, pool_, owned_);
          if (L.moe) L.moe->materialize_f32(pool_, owned_);
        }
    }
    rope_ = compute::Rope(rope_params(cfg_, rot_, cfg_.rope_theta, cfg_.rope_scaling));
  }

  const ModelConfig& config() const override { return cfg_; }
  bool has_recurrent_state() const override { return true; }
  size_t recurrent_state_bytes() const override {
    return static_cast<size_t>(n_linear_ * ((K_ - 1) * C_ + gd_.state_floats())) * sizeof(float);
  }

  std::unique_ptr<SequenceState> new_state(int64_t max_tokens) override {
    if (max_tokens <= 0) throw Error("new_state: max_tokens must be positive");
    cache::BlockShape sh = kv_block_shape(kPrivateBlock);
    const uint64_t blocks = static_cast<uint64_t>((max_tokens + kPrivateBlock - 1) / kPrivateBlock);
    return new_paged_state(std::make_shared<cache::BlockPool>(sh, blocks * sh.block_bytes()), max_tokens);
  }

  cache::BlockShape kv_block_shape(int32_t block_size) const override {
    return kv_block_shape_for(static_cast<int32_t>(n_full_), nkv_, hd_, block_size, opts_.kv_dtype);
  }

  std::unique_ptr<SequenceState> new_paged_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    if (!pool) throw Error("new_paged_state: no block pool");
    const cache::BlockShape want = kv_block_shape(pool->shape().block_size), &got = pool->shape();
    if (got.num_layers != want.num_layers || got.kv_heads != want.kv_heads || got.head_dim != want.head_dim ||
        got.dtype != want.dtype)
      throw Error("KV pool shape does not match the model's full-attention layers");
    return std::make_unique<HybridState>(this, std::move(pool), max_tokens, n_linear_, (K_ - 1) * C_,
                                         gd_.state_floats());
  }

  int mtp_layers() const override { return static_cast<int>(mtp_layers_.size()); }
  cache::BlockShape mtp_block_shape(int32_t block_size) const override {
    if (mtp_layers_.empty()) return Model::mtp_block_shape(block_size);
    return kv_block_shape_for(mtp_layers(), nkv_, hd_, block_size, opts_.kv_dtype);
  }
  std::unique_ptr<SequenceState> new_mtp_state(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens) override {
    if (mtp_layers_.empty()) return Model::new_mtp_state(pool, max_tokens);
    if (!pool) throw Error("new_mtp_state: no block pool");
    check_mtp_shape(pool->shape());
    return std::make_unique<PagedKvState>(std::move(pool), max_tokens);
  }

  // The MTP head (vLLM's Qwen3NextMultiTokenPredictor): fc over [norm(embed(token)), norm(hidden)],
  // one gated full-attention layer of this model's kind with its own KV, mtp.norm, the lm_head.
  void forward_mtp(const MtpEntry* entries, size_t count) override {
    if (mtp_layers_.empty()) return Model::forward_mtp(entries, count);
    if (count == 0) return;
    const int64_t total = mtp_.admit(entries, count, mtp_layers(), V_,
                                     [&](const cache::BlockShape& got) { check_mtp_shape(got); }, mtp_rows_);
    reserve(total);
    seqs_.clear();
    for (const MtpHead::Rows& s : mtp_rows_) {
      seqs_.push_back(Seq{nullptr, s.kv, entries[&s - mtp_rows_.data()].tokens, s.pos0, s.row, s.n});
      for (int64_t t = 0; t < s.n; ++t)
        rope_.angles(s.pos0 + t, cos_.data() + (s.row + t) * rope_.half(), sin_.data() + (s.row + t) * rope_.half());
    }
    mtp_.input(entries, mtp_rows_, total, [&](int32_t tok, float* out) { tensor::dequantize_row(*embed_, tok, out); },
               x_.data(), ctx_);
    run_layer(mtp_layers_[static_cast<size_t>(entries[0].layer)], total);
    mtp_.output(entries, mtp_rows_, x_.data(), lm_head_, V_, ctx_);
  }

  // HybridState::truncate inside the recorded window: the state before it, then the conv and the
  // recurrence of every DeltaNet layer over the first `keep` positions from the recorded inputs.
  void replay(HybridState& st, int64_t keep) {
    const HybridState::Window& w = st.window();
    const int64_t Hv = gd_.v_heads;
    reserve(keep);
    for (const Layer& L : layers_) {
      if (!L.linear) continue;
      const int64_t l = L.index;
      std::copy_n(w.conv0.begin() + l * (K_ - 1) * C_, (K_ - 1) * C_, st.conv(l));
      std::copy_n(w.ssm0.begin() + l * gd_.state_floats(), gd_.state_floats(), st.ssm(l));
      if (keep == 0) continue;
      const DeltaSeq d{st.conv(l), st.ssm(l), w.qkv.data() + l * w.n * C_, keep, w.g.data() + l * w.n * Hv,
                       w.beta.data() + l * w.n * Hv, w2_.data(), w1_.data(), nullptr, false};
      pool_.parallel_for(gd_.k_heads, 1, [&](int64_t k0, int64_t k1) {
        for (int64_t kh = k0; kh < k1; ++kh) head_task(L, d, kh);
      });
    }
  }

  void forward_batch(const BatchEntry* entries, size_t count) override {
    if (count == 0) return;
    const int64_t total = admit(entries, count);
    reserve(total);
    const int64_t half = rope_.half();
    for (const Seq& s : seqs_)
      for (int64_t t = 0; t < s.n; ++t) {
        const int64_t r = s.row + t;
        tensor::dequantize_row(*embed_, s.tokens[t], x_.data() + r * H_);
        rope_.angles(s.pos0 + t, cos_.data() + r * half, sin_.data() + r * half);
      }
    for (const Layer& L : layers_) run_layer(L, total);
    write_logits(entries, count);
  }

 private:
  static constexpr int32_t kPrivateBlock = 16;
  // With ModelOptions::chunked_deltanet, runs of at least this many tokens of one sequence take
  // the chunked DeltaNet form (decode steps and short speculation windows stay recurrent).
  static constexpr int64_t kChunkedMin = 16;

  struct Seq {
    HybridState* st;  // null for the MTP head's rows (KV only)
    PagedKvState* kv;
    const int32_t* tokens;
    int64_t pos0, row, n;
    bool record = false;  // keep a rollback window (HybridState)
  };

  void read_geometry() {
    check_decoder_sizes(cfg_, ckpt_->path, "Qwen3.5");
    const auto& c = cfg_;
    if (static_cast<int64_t>(c.layer_is_linear.size()) != c.num_hidden_layers || c.linear_num_key_heads <= 0 ||
        c.linear_key_head_dim <= 0 || c.linear_value_head_dim <= 0 || c.linear_conv_kernel_dim <= 0)
      throw Error(ckpt_->path + ": config lacks the linear-attention (Gated DeltaNet) geometry of Qwen3.5");
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      throw Error(ckpt_->path + ": linear_num_value_heads is not a multiple of linear_num_key_heads");
    H_ = c.hidden_size;
    I_ = c.intermediate_size;
    V_ = c.vocab_size;
    nh_ = c.num_attention_heads;
    nkv_ = cfg_.num_key_value_heads;
    hd_ = cfg_.head_dim;
    rot_ = static_cast<int64_t>(static_cast<double>(hd_) * c.partial_rotary_factor);
    if (rot_ <= 0 || rot_ % 2 != 0) throw Error(ckpt_->path + ": rotary dimension must be even and positive");
    gd_ = compute::GatedDeltaShape{c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
                          c.linear_value_head_dim, c.linear_v_heads_tiled};
    key_dim_ = gd_.k_heads * gd_.k_dim;
    value_dim_ = gd_.v_heads * gd_.v_dim;
    C_ = 2 * key_dim_ + value_dim_;
    K_ = c.linear_conv_kernel_dim;
    eps_ = static_cast<float>(c.rms_norm_eps);
    attn_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)));
  }

  // mlx-lm's sanitize moves conv1d weights to [C, K, 1] and folds the (1 + w) norm offsets; a
  // checkpoint whose conv weights are still [C, 1, K] is in the Hugging Face layout.
  static bool has_hf_layout(const WeightStore& ws) {
    for (auto& [name, t] : ws.all())
      if (name.find("conv1d.weight") != std::string::npos && !t.shape.empty() && t.shape.back() != 1) return true;
    return false;
  }

  // Qwen3-Next's HF and MLX checkpoints fuse the DeltaNet input projections (in_proj_qkvz,
  // in_proj_ba); its GGUF files (llama.cpp's converter) store them as Qwen3.5's separate ones.
  static bool has_fused_projections(const WeightStore& ws) {
    for (auto& [name, t] : ws.all())
      if (name.find("linear_attn.in_proj_qkvz.") != std::string::npos) return true;
    return false;
  }

  // A (1 + w) RMSNorm weight as the multiplier itself.
  std::vector<float> norm(const WeightStore& ws, const std::string& name, int64_t n) const {
    std::vector<float> w = load_vector(ws, name, n);
    if (hf_layout_)
      for (float& x : w) x += 1.0f;
    return w;
  }

  // The MTP head, if the checkpoint ships one (Hugging Face layout only: mlx-lm's sanitize drops
  // `mtp.*`). Its layers are gated full-attention layers whose KV is the head's own (index i).
  void load_mtp(const WeightStore& ws) {
    const int n = MtpHead::count_layers(ws);
    if (n == 0) {
      if (ws.find("mtp.fc.weight")) throw Error(ckpt_->path + ": mtp.fc.weight without any mtp.layers.N");
      return;
    }
    mtp_.load(ws, H_, eps_, false, [&](const std::string& name) { return norm(ws, name, H_); });
    mtp_layers_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      mtp_layers_[i].index = i;
      const std::string p = "mtp.layers." + std::to_string(i) + ".";
      load_layer(ws, p, mtp_layers_[i], cfg_.num_experts > 0 && ws.find(p + "mlp.gate.weight"));
    }
  }

  void check_mtp_shape(const cache::BlockShape& got) const {
    const cache::BlockShape want = mtp_block_shape(got.block_size);
    if (got.num_layers != want.num_layers || got.kv_heads != want.kv_heads || got.head_dim != want.head_dim ||
        got.dtype != want.dtype)
      throw Error("MTP KV pool shape does not match the model's MTP layers");
  }

  void load_layer(const WeightStore& ws, const std::string& p, Layer& L, bool moe) {
    L.in_norm = norm(ws, p + "input_layernorm.weight", H_);
    L.post_norm = norm(ws, p + "post_attention_layernorm.weight", H_);
    if (moe) {
      const MoeShape sh{.hidden = H_, .experts = cfg_.num_experts, .top_k = cfg_.num_experts_per_tok,
                        .expert_inter = cfg_.moe_intermediate_size,
                        .shared_inter = cfg_.shared_expert_intermediate_size, .norm_topk = cfg_.norm_topk_prob};
      L.moe = std::make_unique<MoeBlock>(ws, p + "mlp.", sh);
    } else {
      L.gate = load_linear(ws, p + "mlp.gate_proj", I_, H_);
      L.up = load_linear(ws, p + "mlp.up_proj", I_, H_);
      L.down = load_linear(ws, p + "mlp.down_proj", H_, I_);
    }
    if (L.linear) {
      const std::string a = p + "linear_attn.";
      if (fused_) {
        L.qkvz = load_linear(ws, a + "in_proj_qkvz", C_ + value_dim_, H_);
        L.ba = load_linear(ws, a + "in_proj_ba", 2 * gd_.v_heads, H_);
      } else {
        L.qkv = load_linear(ws, a + "in_proj_qkv", C_, H_);
        L.z = load_linear(ws, a + "in_proj_z", value_dim_, H_);
        L.b = load_linear(ws, a + "in_proj_b", gd_.v_heads, H_);
        L.a = load_linear(ws, a + "in_proj_a", gd_.v_heads, H_);
      }
      L.out = load_linear(ws, a + "out_proj", H_, value_dim_);
      // [C, K, 1] (MLX) and [C, 1, K] (HF) both flatten to w[c*K + j].
      L.conv_w = load_vector(ws, a + "conv1d.weight", C_ * K_);
      L.A_log = load_vector(ws, a + "A_log", gd_.v_heads);
      L.dt_bias = load_vector(ws, a + "dt_bias", gd_.v_heads);
      L.gnorm = load_vector(ws, a + "norm.weight", gd_.v_dim);  // a plain w norm in both layouts
    } else {
      const std::string a = p + "self_attn.";
      L.q = load_linear(ws, a + "q_proj", nh_ * hd_ * 2, H_);
      L.k = load_linear(ws, a + "k_proj", nkv_ * hd_, H_);
      L.v = load_linear(ws, a + "v_proj", nkv_ * hd_, H_);
      L.o = load_linear(ws, a + "o_proj", H_, nh_ * hd_);
      L.q_norm = norm(ws, a + "q_norm.weight", hd_);
      L.k_norm = norm(ws, a + "k_norm.weight", hd_);
    }
  }

  // Checks every entry before touching any state (a refused batch changes nothing), then
  // reserves KV slots. Returns the number of rows.
  int64_t admit(const BatchEntry* entries, size_t count) {
    seqs_.clear();
    int64_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      const BatchEntry& e = entries[i];
      auto* st = dynamic_cast<HybridState*>(e.state);
      if (!st) throw Error("forward: sequence state was not created by this model");
      if (e.n <= 0) throw Error("forward: no tokens");
      if (!e.tokens || !e.logits) throw Error("forward: null tokens or logits");
      for (const Seq& s : seqs_)
        if (s.st == st) throw Error("forward_batch: the same sequence appears twice in a batch");
      PagedKvState& kv = st->kv();
      if (kv.length() + e.n > kv.capacity())
        throw Error("forward: " + std::to_string(kv.length() + e.n) + " tokens exceed the sequence's capacity of " +
                    std::to_string(kv.capacity()));
      for (int64_t t = 0; t < e.n; ++t)
        if (e.tokens[t] < 0 || e.tokens[t] >= V_)
          throw Error("forward: token id " + std::to_string(e.tokens[t]) + " outside the vocabulary (size " +
                      std::to_string(V_) + ")");
      seqs_.push_back(Seq{st, &kv, e.tokens, kv.length(), total, e.n, e.all_logits && e.n > 1});
      total += e.n;
    }
    // Free blocks per pool, summed over the entries that share it.
    for (size_t i = 0; i < seqs_.size(); ++i) {
      cache::BlockPool* pool = &seqs_[i].st->kv().pool();
      int64_t need = 0;
      bool seen = false;
      for (size_t j = 0; j < seqs_.size(); ++j) {
        if (&seqs_[j].st->kv().pool() != pool) continue;
        if (j < i) seen = true;
        need += seqs_[j].st->kv().blocks_needed(seqs_[j].n);
      }
      if (!seen && need > static_cast<int64_t>(pool->free_count()))
        throw Error("forward: KV pool has " + std::to_string(pool->free_count()) + " free blocks, " +
                    std::to_string(need) + " needed");
    }
    for (size_t i = 0; i < seqs_.size(); ++i) {
      seqs_[i].st->begin_window(seqs_[i].record, seqs_[i].n, C_, gd_.v_heads);
      try {
        seqs_[i].kv->append(seqs_[i].n);
      } catch (...) {  // the DeltaNet state is untouched yet: only the KV goes back
        for (size_t j = 0; j <= i; ++j) seqs_[j].kv->PagedKvState::truncate(seqs_[j].pos0);
        throw;
      }
    }
    return total;
  }

  void reserve(int64_t n) {
    if (n <= cap_) return;
    cap_ = n;
    const int64_t wide = std::max({C_, 2 * nh_ * hd_, I_, H_});
    x_.resize(n * H_);
    xn_.resize(n * H_);
    tmp_.resize(n * H_);
    w1_.resize(n * wide);
    w2_.resize(n * wide);
    w3_.resize(n * std::max({value_dim_, I_, nh_ * hd_}));
    y_.resize(n * value_dim_);
    if (fused_) fused_buf_.resize(n * (C_ + value_dim_ + 2 * gd_.v_heads));
    k_.resize(n * nkv_ * hd_);
    v_.resize(n * nkv_ * hd_);
    b_.resize(n * gd_.v_heads);
    a_.resize(n * gd_.v_heads);
    g_.resize(n * gd_.v_heads);
    beta_.resize(n * gd_.v_heads);
    cos_.resize(n * rope_.half());
    sin_.resize(n * rope_.half());
  }

  void run_layer(const Layer& L, int64_t n) {
    for (int64_t t = 0; t < n; ++t) compute::rms_norm(x_.data() + t * H_, L.in_norm.data(), H_, eps_, false, xn_.data() + t * H_);
    if (L.linear) delta_net(L, n);
    else full_attention(L, n);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
    mlp(L, n);
    compute::add_inplace(x_.data(), tmp_.data(), n * H_);
  }

  // Gated DeltaNet in one region (besides out_proj): per key head, its rows of the input
  // projections for all n rows (x quantized once, MatmulPlan) and its value heads' gates, then per
  // sequence its conv, l2 norms, recurrence and gated norm (head_task). Result in tmp_.
  void delta_net(const Layer& L, int64_t n) {
    float* qkv = w1_.data();   // [n][C] projections, then the conv output in w2_
    float* conv = w2_.data();
    float* z = w3_.data();     // [n][value_dim]
    float* fz = fused_buf_.data();  // Qwen3-Next: [n][C + value_dim] then [n][2 Hv]
    float* fba = fused_ ? fz + n * (C_ + value_dim_) : nullptr;
    const compute::MatmulOut fused[2] = {{&L.qkvz.w, fz}, {&L.ba.w, fba}};
    const compute::MatmulOut split[4] = {{&L.qkv.w, qkv}, {&L.z.w, z}, {&L.b.w, b_.data()}, {&L.a.w, a_.data()}};
    const compute::MatmulPlan plan(fused_ ? fused : split, fused_ ? 2 : 4, xn_.data(), n, ctx_.scratch, ctx_.path,
                                   ctx_.pool);
    const int64_t Hv = gd_.v_heads;
    // y [n][value_dim] goes to a buffer of its own: the projections stay intact until every
    // sequence has read its rows (and the rollback window has copied them).
    float* y = y_.data();
    dseqs_.clear();
    for (const Seq& s : seqs_)
      dseqs_.push_back(DeltaSeq{s.st->conv(L.index), s.st->ssm(L.index), qkv + s.row * C_, s.n, g_.data() + s.row * Hv,
                                beta_.data() + s.row * Hv, conv + s.row * C_, y + s.row * value_dim_,
                                z + s.row * value_dim_, opts_.chunked_deltanet && !s.record && s.n >= kChunkedMin});
    pool_.parallel_for(gd_.k_heads, 1, [&](int64_t k0, int64_t k1) {
      for (int64_t kh = k0; kh < k1; ++kh) {
        project_head(L, plan, kh, n, qkv, z, fz, fba);
        for (const DeltaSeq& d : dseqs_) head_task(L, d, kh);
      }
    });
    for (const Seq& s : seqs_) {
      if (!s.record) continue;  // the recurrence's inputs, for a rollback inside this window
      HybridState::Window& w = s.st->window();
      std::copy_n(qkv + s.row * C_, s.n * C_, w.qkv.begin() + L.index * s.n * C_);
      std::copy_n(g_.data() + s.row * Hv, s.n * Hv, w.g.begin() + L.index * s.n * Hv);
      std::copy_n(beta_.data() + s.row * Hv, s.n * Hv, w.beta.begin() + L.index * s.n * Hv);
    }
    L.out(y, n, tmp_.data(), ctx_);
  }

  // Key head kh's share of the input projections over all n rows: its q and k channels, its
  // value heads' v channels, z, b and a (Qwen3-Next: its block of the fused rows, split), then
  // those value heads' gates.
  void project_head(const Layer& L, const compute::MatmulPlan& plan, int64_t kh, int64_t n, float* qkv, float* z,
                    const float* fz, const float* fba) {
    const int64_t r = gd_.v_heads / gd_.k_heads, dk = gd_.k_dim, dv = gd_.v_dim, Hv = gd_.v_heads;
    if (fused_) {
      const int64_t per = 2 * dk + 2 * r * dv;
      plan.rows(0, kh * per, (kh + 1) * per);
      plan.rows(1, kh * 2 * r, (kh + 1) * 2 * r);
      split_fused(fz, fba, n, qkv, z, kh, kh + 1);
    } else {
      plan.rows(0, kh * dk, (kh + 1) * dk);
      plan.rows(0, key_dim_ + kh * dk, key_dim_ + (kh + 1) * dk);
      value_heads(kh, [&](int64_t h, int64_t m) {
        plan.rows(0, 2 * key_dim_ + h * dv, 2 * key_dim_ + (h + m) * dv);
        plan.rows(1, h * dv, (h + m) * dv);
        plan.rows(2, h, h + m);
        plan.rows(3, h, h + m);
      });
    }
    value_heads(kh, [&](int64_t h, int64_t m) {
      for (int64_t t = 0; t < n; ++t)
        compute::gated_delta_gates(a_.data() + t * Hv + h, b_.data() + t * Hv + h, L.A_log.data() + h,
                                   L.dt_bias.data() + h, m, g_.data() + t * Hv + h, beta_.data() + t * Hv + h);
    });
  }

  // Calls fn(h, m) over the value heads of key head kh, m consecutive ones at a time: r in one
  // run, or one by one (every Hk-th) when tiled. Qwen3-Next's fused rows are never tiled.
  template <class Fn>
  void value_heads(int64_t kh, Fn&& fn) const {
    const int64_t Hk = gd_.k_heads, r = gd_.v_heads / Hk;
    if (gd_.tiled)
      for (int64_t j = 0; j < r; ++j) fn(kh + j * Hk, 1);
    else
      fn(kh * r, r);
  }

  // Qwen3-Next's fused projections hold, per key head h, [q_h, k_h, v, z of its Hv/Hk value
  // heads] (in_proj_qkvz) and [b, a of those value heads] (in_proj_ba). Regrouped into Qwen3.5's
  // order: qkv [n][C] = all q heads, all k heads, all v heads; z [n][value_dim]; b_, a_ [n][Hv].
  // Splitting the outputs (not the weights) keeps the checkpoint's mapping as it is and costs a
  // copy of the rows, small beside the matmul.
  // Key heads [h0, h1) only.
  void split_fused(const float* fz, const float* fba, int64_t n, float* qkv, float* z, int64_t h0, int64_t h1) {
    const int64_t Hk = gd_.k_heads, dk = gd_.k_dim, r = gd_.v_heads / Hk, rv = r * gd_.v_dim;
    const int64_t per = 2 * dk + 2 * rv;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = h0; h < h1; ++h) {
        const float* src = fz + t * (C_ + value_dim_) + h * per;
        float* row = qkv + t * C_;
        std::copy_n(src, dk, row + h * dk);
        std::copy_n(src + dk, dk, row + key_dim_ + h * dk);
        std::copy_n(src + 2 * dk, rv, row + 2 * key_dim_ + h * rv);
        std::copy_n(src + 2 * dk + rv, rv, z + t * value_dim_ + h * rv);
        const float* ba = fba + (t * Hk + h) * 2 * r;
        std::copy_n(ba, r, b_.data() + t * gd_.v_heads + h * r);
        std::copy_n(ba + r, r, a_.data() + t * gd_.v_heads + h * r);
      }
  }

  // One sequence's n rows of a DeltaNet layer, from its projections qkv [n][C] and gates g, beta
  // [n][Hv]: the causal conv advances conv_state (output in conv [n][C]), q/k are l2-normed per
  // head, the recurrence runs over ssm (y [n][value_dim]), then, when z is given, the gated norm
  // y ← norm(y)·silu(z). `chunked`: the chunk-parallel form instead of the recurrence.
  struct DeltaSeq {
    float* conv_state;
    float* ssm;
    const float* qkv;
    int64_t n;
    const float* g;
    const float* beta;
    float* conv;
    float* y;
    const float* z;
    bool chunked;
  };

  // Key head kh of one sequence: the conv of its q/k channels and of its value heads' v
  // channels, the l2 norms, the recurrence and the gated norm of those value heads. Each channel
  // and head is computed as it would be alone, so results do not depend on how heads are grouped
  // into tasks; the forward and the rollback replay share it, so both leave bit-identical states.
  void head_task(const Layer& L, const DeltaSeq& d, int64_t kh) {
    const int64_t dk = gd_.k_dim, dv = gd_.v_dim;
    const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
    auto conv = [&](int64_t c0, int64_t len) {
      compute::causal_conv1d_silu(L.conv_w.data(), C_, K_, d.conv_state, d.qkv, d.n, d.conv, c0, c0 + len);
    };
    conv(kh * dk, dk);
    conv(key_dim_ + kh * dk, dk);
    value_heads(kh, [&](int64_t h, int64_t m) { conv(2 * key_dim_ + h * dv, m * dv); });
    for (int64_t t = 0; t < d.n; ++t) {
      float* row = d.conv + t * C_;
      compute::l2norm_scaled(row + kh * dk, dk, q_scale, 1e-6f);
      compute::l2norm_scaled(row + key_dim_ + kh * dk, dk, 1.0f, 1e-6f);
    }
    value_heads(kh, [&](int64_t h, int64_t m) {
      if (d.chunked)
        compute::gated_delta_chunked(gd_, d.conv, C_, d.g, d.beta, d.n, d.ssm, d.y, value_dim_, h, h + m);
      else
        compute::gated_delta_recurrent(gd_, d.conv, C_, d.g, d.beta, d.n, d.ssm, d.y, value_dim_, h, h + m);
      if (!d.z) return;
      for (int64_t t = 0; t < d.n; ++t)
        for (int64_t v = h; v < h + m; ++v) {
          float* yv = d.y + t * value_dim_ + v * dv;
          compute::gated_rms_norm(yv, d.z + t * value_dim_ + v * dv, L.gnorm.data(), dv, eps_, yv);
        }
    });
  }

  // Gated full attention: q_proj gives per head the query and a sigmoid output gate; q/k
  // RMS-normed per head, partial RoPE, GQA over the paged KV. Result in tmp_.
  void full_attention(const Layer& L, int64_t n) {
    float* qg = w1_.data();  // [n][nh][2*hd]
    float* q = w2_.data();   // [n][nh*hd]
    float* att = w3_.data();
    {
      compute::MatmulOut outs[3] = {{&L.q.w, qg}, {&L.k.w, k_.data()}, {&L.v.w, v_.data()}};
      compute::matmul_multi(outs, 3, xn_.data(), n, pool_, ctx_.scratch, ctx_.path);
    }
    const int64_t half = rope_.half();
    for (int64_t t = 0; t < n; ++t) {
      float* qt = q + t * nh_ * hd_;
      float* kt = k_.data() + t * nkv_ * hd_;
      for (int64_t h = 0; h < nh_; ++h)
        compute::rms_norm(qg + (t * nh_ + h) * 2 * hd_, L.q_norm.data(), hd_, eps_, false, qt + h * hd_);
      for (int64_t h = 0; h < nkv_; ++h) compute::rms_norm(kt + h * hd_, L.k_norm.data(), hd_, eps_, false, kt + h * hd_);
      rope_.apply(qt, nh_, hd_, cos_.data() + t * half, sin_.data() + t * half);
      rope_.apply(kt, nkv_, hd_, cos_.data() + t * half, sin_.data() + t * half);
    }
    segs_.resize(seqs_.size());
    for (size_t i = 0; i < seqs_.size(); ++i) {
      const Seq& s = seqs_[i];
      compute::AttentionSegment& sg = segs_[i];
      sg.kv = s.kv->layer(L.index);
      sg.q = q + s.row * nh_ * hd_;
      sg.out = att + s.row * nh_ * hd_;
      sg.n = s.n;
      sg.pos0 = s.pos0;
      sg.gate = qg + s.row * nh_ * 2 * hd_ + hd_;  // the sigmoid output gate, in attention's tasks
      sg.gate_ld = nh_ * 2 * hd_;
      sg.gate_hs = 2 * hd_;
      compute::kv_store(sg.kv, s.pos0, s.n, nkv_, hd_, k_.data() + s.row * nkv_ * hd_, v_.data() + s.row * nkv_ * hd_);
    }
    const compute::AttentionParams ap{.n_heads = nh_, .n_kv_heads = nkv_, .head_dim = hd_, .scale = attn_scale_};
    compute::attention_batch(segs_.data(), segs_.size(), ap, pool_);
    L.o(att, n, tmp_.data(), ctx_);
  }

  void mlp(const Layer& L, int64_t n) {
    for (int64_t t = 0; t < n; ++t)
      compute::rms_norm(x_.data() + t * H_, L.post_norm.data(), H_, eps_, false, xn_.data() + t * H_);
    if (L.moe) return L.moe->forward(xn_.data(), n, tmp_.data(), ctx_, moe_scratch_);
    float* gate = w1_.data();
    float* up = w3_.data();
    // silu(gate)·up per chunk of rows, inside the projections' region.
    compute::matmul_pair({&L.gate.w, gate}, {&L.up.w, up}, xn_.data(), n, pool_, ctx_.scratch,
                         [&](int64_t r0, int64_t r1) { compute::gated_act_rows({}, gate, up, n, I_, r0, r1); },
                         ctx_.path);
    L.down(gate, n, tmp_.data(), ctx_);
  }

  // Final norm + lm_head over the rows whose logits are wanted (and the normed hidden states an
  // entry asks for).
  void write_logits(const BatchEntry* entries, size_t count) {
    for (size_t i = 0; i < count; ++i)
      if (entries[i].hidden)
        for (int64_t t = 0; t < seqs_[i].n; ++t)
          compute::rms_norm(x_.data() + (seqs_[i].row + t) * H_, final_norm_.data(), H_, eps_, false, entries[i].hidden + t * H_);
    int64_t rows = 0;
    for (size_t i = 0; i < count; ++i) {
      const Seq& s = seqs_[i];
      for (int64_t t = entries[i].all_logits ? 0 : s.n - 1; t < s.n; ++t, ++rows)
        compute::rms_norm(x_.data() + (s.row + t) * H_, final_norm_.data(), H_, eps_, false, xn_.data() + rows * H_);
    }
    float* out = entries[0].logits;
    if (count > 1) {
      logits_buf_.resize(static_cast<size_t>(rows * V_));
      out = logits_buf_.data();
    }
    lm_head_(xn_.data(), rows, out, ctx_);
    if (count > 1) {
      int64_t r = 0;
      for (size_t i = 0; i < count; ++i) {
        const int64_t k = entries[i].all_logits ? entries[i].n : 1;
        std::memcpy(entries[i].logits, out + r * V_, static_cast<size_t>(k * V_) * sizeof(float));
        r += k;
      }
    }
  }

  std::shared_ptr<Checkpoint> ckpt_;
  ModelOptions opts_;
  ModelConfig cfg_;
  compute::ThreadPool pool_;
  ExecContext ctx_;
  int64_t H_ = 0, I_ = 0, V_ = 0, nh_ = 0, nkv_ = 0, hd_ = 0, rot_ = 0;
  compute::GatedDeltaShape gd_;
  int64_t key_dim_ = 0, value_dim_ = 0, C_ = 0, K_ = 0;
  int64_t n_linear_ = 0, n_full_ = 0;
  float eps_ = 1e-6f, attn_scale_ = 1.0f;
  bool hf_layout_ = false;
  bool fused_ = false;  // Qwen3-Next: in_proj_qkvz / in_proj_ba
  const tensor::Tensor* embed_ = nullptr;
  Linear lm_head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  MtpHead mtp_;
  std::vector<MtpHead::Rows> mtp_rows_;
  std::vector<Layer> mtp_layers_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;  // f32 copies in Exact mode
  compute::Rope rope_;
  int64_t cap_ = 0;
  std::vector<float> fused_buf_;  // Qwen3-Next's fused projections before split_fused
  std::vector<float> x_, xn_, tmp_, w1_, w2_, w3_, k_, v_, b_, a_, g_ /* log decay */, beta_, cos_, sin_, logits_buf_, y_;
  MoeScratch moe_scratch_;
  std::vector<Seq> seqs_;
  std::vector<DeltaSeq> dseqs_;
  std::vector<compute::AttentionSegment> segs_;
};

void HybridState::truncate(int64_t n) {
  if (n == length()) return;
  if (n == 0) {
    PagedKvState::truncate(0);
    std::fill(conv_.begin(), conv_.end(), 0.0f);
    std::fill(ssm_.begin(), ssm_.end(), 0.0f);
    win_.n = 0;
    return;
  }
  if (win_.n > 0 && length() == win_.pos0 + win_.n && n >= win_.pos0 && n < length()) {
    model_->replay(*this, n - win_.pos0);
    PagedKvState::truncate(n);
    win_.n = 0;  // the inputs after n are gone with the KV: no second rollback
    return;
  }
  throw Error("hybrid (Gated DeltaNet) state cannot roll back from " + std::to_string(length()) + " to " +
              std::to_string(n) + " tokens");
}

}  // namespace

std::unique_ptr<Model> make_qwen3_5_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  return std::make_unique<Qwen35Model>(std::move(ckpt), opts);
}

}  // namespace rapid::model
