// BERT-family encoders (HF BertModel, model_type "bert"; RoBERTa / XLM-R, "roberta" /
// "xlm-roberta": the same layers, positions offset by padding_idx + 1), as sentence-transformers
// ships them:
// word + absolute position + token-type embeddings and a LayerNorm, then post-norm encoder layers
// (bidirectional self-attention, exact-erf GELU MLP), weights from safetensors (f32/f16/bf16, or
// MLX-quantized linears). Only the last hidden state is computed: the pooler head is not used.
#pragma once
#include <memory>
#include <string>

#include "model/embedding_model.h"

namespace rapid::model {

bool is_bert_architecture(const std::string& model_type);

// Reads the encoder-only settings (layer_norm_eps, hidden_act, position_embedding_type, ...) from
// the checkpoint directory's config.json; an unsupported one is a FileError naming that file.
std::unique_ptr<EmbeddingModel> make_bert_encoder(std::shared_ptr<Checkpoint> ckpt, const ModelOptions& opts);

}  // namespace rapid::model
