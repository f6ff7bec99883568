#include "cli/embedding_setup.h"

#include <filesystem>

#include "cache/pool_sizing.h"
#include "cli/model_arg.h"
#include "common/log.h"
#include "model/bert.h"
#include "model/embedding_model.h"
#include "model/sentence_transformers.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {
namespace {

std::unique_ptr<server::EmbeddingService> make_service(std::shared_ptr<model::Checkpoint> ckpt, const std::string& name,
                                                       const model::EmbeddingPooling& pooling, bool shared,
                                                       const model::ModelOptions& mo,
                                                       std::shared_ptr<const tok::Tokenizer> tok = nullptr) {
  if (!tok) tok = tok::load_tokenizer(ckpt->tokenizer_path);
  // Its own model instance over the same mapped weights: private scratch, no KV pool. A decoder
  // input's KV lives only during its forward, so it is kept in f32 (exact attention, little memory).
  model::ModelOptions emo = mo;
  emo.kv_dtype = tensor::DType::F32;
  std::unique_ptr<model::EmbeddingModel> model = model::create_embedding_model(ckpt, emo);
  engine::EmbeddingEngineOptions eo;
  eo.pooling = pooling;
  eo.max_input_tokens = cache::serving_context(0, model->max_input_tokens());
  auto engine = std::make_unique<engine::EmbeddingEngine>(std::move(model), eo);
  const int64_t trunc = pooling.max_seq_length > 0 ? std::min(pooling.max_seq_length, eo.max_input_tokens) : 0;
  log::info("embeddings: '" + name + "' (" + ckpt->config.architecture + ", " + std::to_string(engine->dimensions()) +
            " dimensions, " + model::pooling_mode_name(pooling.mode) + " pooling" + (pooling.normalize ? ", normalised" : "") +
            ", inputs up to " + std::to_string(eo.max_input_tokens) + " tokens" +
            (trunc ? ", text truncated to " + std::to_string(trunc) : std::string()) + ")");
  return std::make_unique<server::EmbeddingService>(name, std::move(tok), std::move(engine), shared);
}

}  // namespace

std::unique_ptr<server::EmbeddingService> load_embedding_model(const std::string& spec, const model::ModelOptions& mo) {
  if (spec.empty()) return nullptr;
  const ModelArg arg = resolve_model_arg(spec);
  std::shared_ptr<model::Checkpoint> ckpt = model::load_checkpoint(arg.path);
  std::optional<model::EmbeddingPooling> pooling = model::read_sentence_transformers(ckpt->path);
  if (!pooling)
    log::warn(arg.path + ": no sentence-transformers modules.json; pooling the last token, normalised "
              "(as Qwen3-Embedding)");
  return make_service(ckpt, arg.name, pooling.value_or(model::EmbeddingPooling{}), false, mo);
}

std::shared_ptr<model::Checkpoint> sentence_transformers_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(path) / "modules.json", ec)) return nullptr;
  return model::load_checkpoint(path);
}

bool is_encoder_only(const model::Checkpoint& ckpt) { return model::is_bert_architecture(ckpt.config.architecture); }

std::unique_ptr<server::EmbeddingService> embeddings_of_model(std::shared_ptr<model::Checkpoint> ckpt,
                                                              const std::string& served_name, bool shared_with_chat,
                                                              const model::ModelOptions& mo,
                                                              std::shared_ptr<const tok::Tokenizer> tok) {
  std::optional<model::EmbeddingPooling> pooling = model::read_sentence_transformers(ckpt->path);
  if (!pooling) return nullptr;
  return make_service(std::move(ckpt), served_name, *pooling, shared_with_chat, mo, std::move(tok));
}

}  // namespace rapid::cli
