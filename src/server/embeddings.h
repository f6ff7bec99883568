// POST /v1/embeddings (OpenAI shape) over an EmbeddingEngine: string, list-of-strings or token-id
// inputs, encoding_format float/base64, `dimensions` (Matryoshka: truncate, then re-normalise when
// the model normalises), usage. Without an embedding model the route answers 400 saying so. It
// runs beside the chat models and never acquires one (nor loads one with --models-dir).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "engine/embedding_engine.h"
#include "tokenizer/tokenizer.h"

namespace rapid::server {

class ModelRegistry;

class EmbeddingService {
 public:
  // `shared_with_chat`: the served chat model itself is the embedding model, so its aliases apply.
  EmbeddingService(std::string id, std::shared_ptr<const tok::Tokenizer> tok, std::unique_ptr<engine::EmbeddingEngine> engine,
                   bool shared_with_chat)
      : id_(std::move(id)), tok_(std::move(tok)), engine_(std::move(engine)), shared_with_chat_(shared_with_chat) {}
  const std::string& id() const { return id_; }
  const tok::Tokenizer& tokenizer() const { return *tok_; }
  engine::EmbeddingEngine& engine() { return *engine_; }
  const engine::EmbeddingEngine& engine() const { return *engine_; }
  bool shared_with_chat() const { return shared_with_chat_; }

 private:
  std::string id_;
  std::shared_ptr<const tok::Tokenizer> tok_;
  std::unique_ptr<engine::EmbeddingEngine> engine_;
  bool shared_with_chat_;
};

// `models`: the chat models, whose names (and aliases) a shared_with_chat service also answers to.
void handle_embeddings(const ModelRegistry& models, EmbeddingService* svc, const httplib::Request& req,
                       httplib::Response& res);

// Text that tokenizes to `full` (special tokens included) and `bare` (without them), cut to
// `limit` tokens as sentence-transformers does: the text's tokens are truncated, the special
// tokens around them kept.
std::vector<int32_t> truncate_tokens(const std::vector<int32_t>& full, const std::vector<int32_t>& bare, size_t limit);

// Standard base64 (RFC 4648, padded) of `n` bytes: the encoding_format=base64 payload.
std::string base64_encode(const unsigned char* data, size_t n);

}  // namespace rapid::server
