#include "model/bert.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "compute/kernels.h"
#include "compute/ops.h"
#include "model/layers.h"

namespace rapid::model {
namespace {

using json = nlohmann::json;

// What config.json says beyond the sizes every model has (ModelConfig).
struct EncoderSettings {
  float eps = 1e-12f;
  int64_t type_vocab_size = 2;
  // RoBERTa / XLM-R: positions count from padding_idx + 1 (pad tokens sit at padding_idx).
  std::optional<int32_t> padding_idx;
};

bool is_roberta(const std::string& arch) { return arch == "roberta" || arch == "xlm-roberta"; }

EncoderSettings read_settings(const std::string& dir, const std::string& arch) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw FileError(path, std::string("invalid JSON: ") + e.what());
  }
  EncoderSettings s;
  if (auto it = j.find("layer_norm_eps"); it != j.end() && it->is_number()) s.eps = it->get<float>();
  if (auto it = j.find("type_vocab_size"); it != j.end() && it->is_number_integer()) s.type_vocab_size = it->get<int64_t>();
  const std::string act = j.value("hidden_act", std::string("gelu"));
  if (act != "gelu") throw FileError(path, "hidden_act '" + act + "' is not supported for BERT encoders (gelu)");
  const std::string pos = j.value("position_embedding_type", std::string("absolute"));
  if (pos != "absolute")
    throw FileError(path, "position_embedding_type '" + pos + "' is not supported (absolute)");
  if (s.type_vocab_size <= 0) throw FileError(path, "type_vocab_size must be positive");
  if (is_roberta(arch)) {
    s.padding_idx = 1;
    if (auto it = j.find("pad_token_id"); it != j.end() && it->is_number_integer()) s.padding_idx = it->get<int32_t>();
    if (*s.padding_idx < 0) throw FileError(path, "pad_token_id must not be negative");
  }
  return s;
}

struct LayerNormWeights {
  std::vector<float> w, b;
  void operator()(const float* x, int64_t rows, int64_t h, float eps, float* out) const {
    for (int64_t t = 0; t < rows; ++t) compute::layer_norm(x + t * h, w.data(), b.data(), h, eps, out + t * h);
  }
};

struct EncoderLayer {
  Linear q, k, v, o, up, down;
  LayerNormWeights attn_norm, out_norm;
};

// Full (non-causal) multi-head attention of one sequence of n tokens: q, k, v, out [n][heads*hd].
void bidirectional_attention(const float* q, const float* k, const float* v, int64_t n, int64_t heads, int64_t hd,
                             float* out, compute::ThreadPool& pool) {
  const int64_t w = heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const compute::Kernels& kern = compute::kernels();
  pool.parallel_for(heads * n, 4, [&](int64_t b, int64_t e) {
    std::vector<float> p(static_cast<size_t>(n));
    for (int64_t task = b; task < e; ++task) {
      const int64_t h = task / n, i = task % n;
      const float* qi = q + i * w + h * hd;
      for (int64_t j = 0; j < n; ++j) p[j] = kern.dot_f32(qi, k + j * w + h * hd, hd) * scale;
      compute::softmax(p.data(), n);
      float* o = out + i * w + h * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = 0.0f;
      for (int64_t j = 0; j < n; ++j) kern.axpy_f32(p[j], v + j * w + h * hd, o, hd);
    }
  });
}

class BertEncoder : public EmbeddingModel {
 public:
  BertEncoder(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts)
      : ckpt_(std::move(ckpt)), cfg_(ckpt_->config), pool_(opts.num_threads) {
    ctx_.pool = &pool_;
    ctx_.path = opts.matmul;
    if (ckpt_->path.ends_with(".gguf") || !std::filesystem::is_directory(ckpt_->path))
      throw FileError(ckpt_->path, "BERT encoders load from a model directory (config.json + safetensors)");
    settings_ = read_settings(ckpt_->path, cfg_.architecture);
    if (cfg_.vocab_size <= 0 || cfg_.intermediate_size <= 0 || max_input_tokens() <= 0 ||
        cfg_.hidden_size % cfg_.num_attention_heads != 0)
      throw FileError(ckpt_->path + "/config.json", "inconsistent BERT sizes (vocab, intermediate, positions, heads)");
    try {
      load_weights();
    } catch (const FileError&) {
      throw;
    } catch (const Error& e) {
      throw FileError(ckpt_->path, e.what());
    }
  }

  const ModelConfig& config() const override { return cfg_; }
  int64_t max_input_tokens() const override {
    return cfg_.max_position_embeddings - (settings_.padding_idx ? *settings_.padding_idx + 1 : 0);
  }

  void hidden_states(const std::vector<std::span<const int32_t>>& inputs, float* const* out) override {
    const int64_t H = cfg_.hidden_size;
    int64_t total = 0;
    for (const auto& in : inputs) total += static_cast<int64_t>(in.size());
    x_.resize(static_cast<size_t>(total * H));
    embed(inputs);
    for (const EncoderLayer& L : layers_) layer(L, inputs, total);
    int64_t row = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = static_cast<int64_t>(inputs[i].size());
      std::copy(x_.begin() + row * H, x_.begin() + (row + n) * H, out[i]);
      row += n;
    }
  }

 private:
  const WeightStore& ws() const { return ckpt_->weights; }

  // "embeddings.*" (sentence-transformers' BertModel) or under a task model's "bert." prefix.
  std::string prefix() const {
    for (const char* p : {"", "bert.", "roberta."})
      if (ws().find(std::string(p) + "embeddings.word_embeddings.weight")) return p;
    throw Error("no embeddings.word_embeddings.weight tensor (not a BERT checkpoint)");
  }

  // LayerNorm weights; old checkpoints name them gamma/beta.
  LayerNormWeights load_norm(const std::string& name) const {
    const int64_t H = cfg_.hidden_size;
    if (ws().find(name + ".gamma")) return {load_vector(ws(), name + ".gamma", H), load_vector(ws(), name + ".beta", H)};
    return {load_vector(ws(), name + ".weight", H), load_vector(ws(), name + ".bias", H)};
  }

  compute::WeightView table(const std::string& name, int64_t rows) const {
    const tensor::Tensor& t = ws().get(name);
    if (t.shape.size() != 2 || t.rows() < rows || t.cols() != cfg_.hidden_size)
      throw Error("tensor " + name + " does not have " + std::to_string(rows) + " rows of " +
                  std::to_string(cfg_.hidden_size));
    return compute::WeightView::of(t);
  }

  void load_weights() {
    const std::string p = prefix();
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    word_ = table(p + "embeddings.word_embeddings.weight", cfg_.vocab_size);
    position_ = table(p + "embeddings.position_embeddings.weight", cfg_.max_position_embeddings);
    const compute::WeightView types = table(p + "embeddings.token_type_embeddings.weight", settings_.type_vocab_size);
    type0_.resize(static_cast<size_t>(H));  // every input is one segment (token type 0)
    compute::weight_row_f32(types, 0, type0_.data());
    emb_norm_ = load_norm(p + "embeddings.LayerNorm");
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
      const std::string b = p + "encoder.layer." + std::to_string(l) + ".";
      EncoderLayer L;
      L.q = load_linear(ws(), b + "attention.self.query", H, H, true);
      L.k = load_linear(ws(), b + "attention.self.key", H, H, true);
      L.v = load_linear(ws(), b + "attention.self.value", H, H, true);
      L.o = load_linear(ws(), b + "attention.output.dense", H, H, true);
      L.attn_norm = load_norm(b + "attention.output.LayerNorm");
      L.up = load_linear(ws(), b + "intermediate.dense", I, H, true);
      L.down = load_linear(ws(), b + "output.dense", H, I, true);
      L.out_norm = load_norm(b + "output.LayerNorm");
      layers_.push_back(std::move(L));
    }
  }

  // x = LayerNorm(word[id] + position[p] + token_type[0]) for every token, positions per input
  // (RoBERTa: padding_idx + 1 + the non-pad tokens before, as transformers numbers them).
  void embed(const std::vector<std::span<const int32_t>>& inputs) {
    const int64_t H = cfg_.hidden_size;
    std::vector<float> pos(static_cast<size_t>(H));
    int64_t row = 0;
    for (const auto& in : inputs) {
      int64_t counted = 0;
      for (size_t p = 0; p < in.size(); ++p, ++row) {
        float* x = x_.data() + row * H;
        compute::weight_row_f32(word_, in[p], x);
        int64_t at = static_cast<int64_t>(p);
        if (const auto pad = settings_.padding_idx) at = in[p] == *pad ? *pad : *pad + ++counted;
        compute::weight_row_f32(position_, at, pos.data());
        for (int64_t j = 0; j < H; ++j) x[j] += pos[j] + type0_[j];
        compute::layer_norm(x, emb_norm_.w.data(), emb_norm_.b.data(), H, settings_.eps, x);
      }
    }
  }

  // Post-norm: x = LN(x + O·attn(x)); x = LN(x + down·gelu(up·x)). Linears run once over every
  // input's tokens; attention stays within each input.
  void layer(const EncoderLayer& L, const std::vector<std::span<const int32_t>>& inputs, int64_t total) {
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    const auto sz = static_cast<size_t>(total * H);
    q_.resize(sz), k_.resize(sz), v_.resize(sz), att_.resize(sz), tmp_.resize(sz);
    mid_.resize(static_cast<size_t>(total * I));
    compute::MatmulOut outs[3] = {{&L.q.w, q_.data()}, {&L.k.w, k_.data()}, {&L.v.w, v_.data()}};
    compute::matmul_multi(outs, 3, x_.data(), total, pool_, ctx_.scratch, ctx_.path);
    L.q.add_bias(q_.data(), total);
    L.k.add_bias(k_.data(), total);
    L.v.add_bias(v_.data(), total);
    const int64_t heads = cfg_.num_attention_heads, hd = H / heads;
    int64_t row = 0;
    for (const auto& in : inputs) {
      const int64_t n = static_cast<int64_t>(in.size()), off = row * H;
      bidirectional_attention(q_.data() + off, k_.data() + off, v_.data() + off, n, heads, hd, att_.data() + off, pool_);
      row += n;
    }
    L.o(att_.data(), total, tmp_.data(), ctx_);
    compute::add_inplace(tmp_.data(), x_.data(), total * H);
    L.attn_norm(tmp_.data(), total, H, settings_.eps, x_.data());
    L.up(x_.data(), total, mid_.data(), ctx_);
    pool_.parallel_for(total * I, 4096, [&](int64_t b, int64_t e) { compute::gelu_erf_inplace(mid_.data() + b, e - b); });
    L.down(mid_.data(), total, tmp_.data(), ctx_);
    compute::add_inplace(tmp_.data(), x_.data(), total * H);
    L.out_norm(tmp_.data(), total, H, settings_.eps, x_.data());
  }

  std::shared_ptr<Checkpoint> ckpt_;
  ModelConfig cfg_;
  EncoderSettings settings_;
  compute::ThreadPool pool_;
  ExecContext ctx_;
  compute::WeightView word_, position_;
  std::vector<float> type0_;
  LayerNormWeights emb_norm_;
  std::vector<EncoderLayer> layers_;
  std::vector<float> x_, q_, k_, v_, att_, tmp_, mid_;  // scratch, [tokens][width]
};

}  // namespace

bool is_bert_architecture(const std::string& model_type) { return model_type == "bert" || is_roberta(model_type); }

std::unique_ptr<EmbeddingModel> make_bert_encoder(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  return std::make_unique<BertEncoder>(std::move(ckpt), opts);
}

}  // namespace rapid::model
