// How an embedding model turns per-token hidden states into one vector, as its
// sentence-transformers files say (modules.json → the Pooling module's config.json, and whether a
// Normalize module follows). Qwen3-Embedding: last-token pooling, then L2 normalisation.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace rapid::model {

enum class PoolingMode { LastToken, Mean, Cls };

struct EmbeddingPooling {
  PoolingMode mode = PoolingMode::LastToken;
  bool normalize = true;
  // sentence_bert_config.json's max_seq_length: longer text is truncated to it, as
  // sentence-transformers does (0: not given).
  int64_t max_seq_length = 0;
};

const char* pooling_mode_name(PoolingMode m);

// The pooling of the sentence-transformers model in `model_dir`; nullopt when the directory has
// no modules.json (not a sentence-transformers model, or a .gguf path). A pipeline this server
// cannot reproduce (max / weighted pooling, a Dense projection, several modes at once, lowercasing
// in sentence_bert_config.json) or a
// malformed file is a FileError naming the file and the reason.
std::optional<EmbeddingPooling> read_sentence_transformers(const std::string& model_dir);

}  // namespace rapid::model
