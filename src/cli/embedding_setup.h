// `serve`'s embedding model: --embedding-model PATH beside the chat model, or the chat model
// itself when its files say it is a sentence-transformers embedding model (modules.json).
#pragma once
#include <memory>
#include <string>

#include "model/arch.h"
#include "model/weights.h"
#include "server/embeddings.h"

namespace rapid::cli {

// The service for `spec` (a path or hub id, as --model takes), or null when `spec` is empty.
// Without sentence-transformers files the pooling is Qwen3-Embedding's (last token, normalised).
std::unique_ptr<server::EmbeddingService> load_embedding_model(const std::string& spec, const ModelOptions& mo);

// The service over the already loaded chat checkpoint when it is an embedding model, else null.
std::unique_ptr<server::EmbeddingService> embeddings_of_chat_model(std::shared_ptr<Checkpoint> ckpt,
                                                                   std::shared_ptr<const Tokenizer> tok,
                                                                   const std::string& served_name,
                                                                   const ModelOptions& mo);

}  // namespace rapid::cli
