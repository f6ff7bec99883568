#include "cli/embedding_setup.h"

#include "cache/pool_sizing.h"
#include "cli/model_arg.h"
#include "common/log.h"
#include "model/sentence_transformers.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {
namespace {

std::unique_ptr<server::EmbeddingService> make_service(std::shared_ptr<Checkpoint> ckpt,
                                                       std::shared_ptr<const Tokenizer> tok, const std::string& name,
                                                       const EmbeddingPooling& pooling, bool shared,
                                                       const ModelOptions& mo) {
  EmbeddingEngineOptions eo;
  eo.pooling = pooling;
  eo.max_input_tokens = cache::serving_context(0, ckpt->config.max_position_embeddings);
  // Its own Model instance over the same mapped weights: private scratch, no KV pool. An input's
  // KV lives only during its forward, so it is kept in f32 (exact attention, little memory).
  ModelOptions emo = mo;
  emo.kv_dtype = DType::F32;
  auto engine = std::make_unique<EmbeddingEngine>(create_model(ckpt, emo), eo);
  log::info("embeddings: '" + name + "' (" + std::to_string(engine->dimensions()) + " dimensions, " +
            pooling_mode_name(pooling.mode) + " pooling" + (pooling.normalize ? ", normalised" : "") +
            ", inputs up to " + std::to_string(eo.max_input_tokens) + " tokens)");
  return std::make_unique<server::EmbeddingService>(name, std::move(tok), std::move(engine), shared);
}

}  // namespace

std::unique_ptr<server::EmbeddingService> load_embedding_model(const std::string& spec, const ModelOptions& mo) {
  if (spec.empty()) return nullptr;
  const ModelArg arg = resolve_model_arg(spec);
  std::shared_ptr<Checkpoint> ckpt = load_checkpoint(arg.path);
  std::optional<EmbeddingPooling> pooling = read_sentence_transformers(ckpt->path);
  if (!pooling)
    log::warn(arg.path + ": no sentence-transformers modules.json; pooling the last token, normalised "
              "(as Qwen3-Embedding)");
  std::shared_ptr<const Tokenizer> tok = load_tokenizer(ckpt->tokenizer_path);
  return make_service(ckpt, std::move(tok), arg.name, pooling.value_or(EmbeddingPooling{}), false, mo);
}

std::unique_ptr<server::EmbeddingService> embeddings_of_chat_model(std::shared_ptr<Checkpoint> ckpt,
                                                                   std::shared_ptr<const Tokenizer> tok,
                                                                   const std::string& served_name,
                                                                   const ModelOptions& mo) {
  std::optional<EmbeddingPooling> pooling = read_sentence_transformers(ckpt->path);
  if (!pooling) return nullptr;
  return make_service(std::move(ckpt), std::move(tok), served_name, *pooling, true, mo);
}

}  // namespace rapid::cli
