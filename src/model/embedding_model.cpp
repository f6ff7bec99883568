#include "model/embedding_model.h"

#include "common/error.h"
#include "model/bert.h"

namespace rapid::model {
namespace {

class DecoderEmbeddingModel : public EmbeddingModel {
 public:
  explicit DecoderEmbeddingModel(std::shared_ptr<Model> m) : model_(std::move(m)) {
    if (!model_) throw Error("decoder_embedding_model: no model");
  }
  const ModelConfig& config() const override { return model_->config(); }

  void hidden_states(const std::vector<std::span<const int32_t>>& inputs, float* const* out) override {
    std::vector<std::unique_ptr<SequenceState>> states;
    std::vector<BatchEntry> entries;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = static_cast<int64_t>(inputs[i].size());
      states.push_back(model_->new_state(n));
      BatchEntry e;
      e.tokens = inputs[i].data();
      e.n = n;
      e.state = states.back().get();
      e.hidden = out[i];
      entries.push_back(e);
    }
    model_->forward_batch(entries.data(), entries.size());
  }

 private:
  std::shared_ptr<Model> model_;
};

}  // namespace

std::unique_ptr<EmbeddingModel> decoder_embedding_model(std::shared_ptr<Model> model) {
  return std::make_unique<DecoderEmbeddingModel>(std::move(model));
}

std::unique_ptr<EmbeddingModel> create_embedding_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts) {
  if (!ckpt) throw Error("create_embedding_model: no checkpoint");
  if (is_bert_architecture(ckpt->config.architecture)) return make_bert_encoder(std::move(ckpt), opts);
  return decoder_embedding_model(create_model(std::move(ckpt), opts));
}

}  // namespace rapid::model
