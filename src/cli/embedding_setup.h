// `serve`'s embedding model: --embedding-model PATH beside the chat model, or the first --model
// itself when its files say it is a sentence-transformers embedding model (modules.json). An
// encoder (BERT) cannot chat: as the first --model it serves embeddings only.
#pragma once
#include <memory>
#include <string>

#include "model/arch.h"
#include "model/weights.h"
#include "server/embeddings.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {

// The service for `spec` (a path or hub id, as --model takes), or null when `spec` is empty.
// Without sentence-transformers files the pooling is Qwen3-Embedding's (last token, normalised).
std::unique_ptr<server::EmbeddingService> load_embedding_model(const std::string& spec, const model::ModelOptions& mo);

// The checkpoint at `path` when it is a sentence-transformers model directory, else null (not
// loaded): loaded once, for both its embeddings and (a decoder) its chat engine.
std::shared_ptr<model::Checkpoint> sentence_transformers_checkpoint(const std::string& path);

// Whether the checkpoint is an encoder (embeddings only, no chat).
bool is_encoder_only(const model::Checkpoint& ckpt);

// The service over the already loaded checkpoint when it is an embedding model, else null.
// `shared_with_chat`: the chat registry serves the same model (its aliases apply). `tok`: the chat
// engine's tokenizer of the same checkpoint, shared rather than loaded again (null: load it).
std::unique_ptr<server::EmbeddingService> embeddings_of_model(std::shared_ptr<model::Checkpoint> ckpt,
                                                              const std::string& served_name, bool shared_with_chat,
                                                              const model::ModelOptions& mo,
                                                              std::shared_ptr<const tok::Tokenizer> tok = nullptr);

}  // namespace rapid::cli
