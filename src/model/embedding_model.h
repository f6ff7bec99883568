// What embeddings need of a model: the final hidden state of every token of a few whole inputs,
// each processed alone (no KV kept, no padding). Decoders (Qwen3-Embedding) provide it through
// their batched forward; encoders (BERT, model/bert.h) are only this.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/arch.h"
#include "model/model.h"

namespace rapid::model {

class EmbeddingModel {
 public:
  virtual ~EmbeddingModel() = default;
  virtual const ModelConfig& config() const = 0;  // hidden_size, vocab_size, architecture
  // The longest input its positions allow (config.max_position_embeddings, less RoBERTa's offset).
  virtual int64_t max_input_tokens() const { return config().max_position_embeddings; }
  // out[i] receives inputs[i].size() * hidden_size floats (token-major). Inputs are non-empty,
  // in the vocabulary and no longer than the model's positions allow (the caller checks).
  virtual void hidden_states(const std::vector<std::span<const int32_t>>& inputs, float* const* out) = 0;
};

// The decoder `model` seen as an EmbeddingModel (its final-normed hidden states).
std::unique_ptr<EmbeddingModel> decoder_embedding_model(std::shared_ptr<Model> model);

// BERT-family encoders (model_type bert) get their encoder, every other architecture its decoder
// (create_model) under decoder_embedding_model.
std::unique_ptr<EmbeddingModel> create_embedding_model(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

}  // namespace rapid::model
