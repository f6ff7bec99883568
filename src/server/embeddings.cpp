#include "server/embeddings.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "common/error.h"
#include "server/client_liveness.h"
#include "server/handler_context.h"
#include "server/json_access.h"
#include "server/model_registry.h"

namespace rapid::server {
namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on inputs per request

// Token ids of one input given as a JSON array of integers.
std::vector<int32_t> token_input(const json& arr, int64_t vocab, const std::string& where) {
  if (arr.empty()) throw bad_request(where + " is an empty token list", "input");
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& t : arr) {
    if (!t.is_number_integer()) throw bad_request(where + " must hold integer token ids only", "input");
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v >= vocab)
      throw bad_request(where + ": token id " + std::to_string(v) + " is outside the vocabulary (size " +
                            std::to_string(vocab) + ")",
                        "input");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// `limit` > 0: longer text is truncated to it (sentence_bert_config.json's max_seq_length).
std::vector<int32_t> text_input(const json& s, const tok::Tokenizer& tok, size_t limit, const std::string& where) {
  const std::string& text = s.get_ref<const std::string&>();
  if (text.empty()) throw bad_request(where + " is an empty string", "input");
  // As sentence-transformers tokenizes: the tokenizer's own special tokens (Qwen3-Embedding's
  // post-processor appends <|endoftext|>, whose hidden state is the one pooled; BERT's wraps the
  // text in [CLS] ... [SEP]).
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  if (limit == 0 || ids.size() <= limit) return ids;
  return truncate_tokens(ids, tok.encode(text, /*add_special=*/false, /*parse_special=*/true), limit);
}

// `input`: a string, an array of strings, an array of token ids, or an array of such arrays.
std::vector<std::vector<int32_t>> parse_inputs(const json& body, const tok::Tokenizer& tok, int64_t vocab, size_t limit) {
  const json* in = field(body, "input");
  if (!in) throw bad_request("'input' is required", "input");
  std::vector<std::vector<int32_t>> out;
  if (in->is_string()) {
    out.push_back(text_input(*in, tok, limit, "input"));
    return out;
  }
  if (!in->is_array()) throw bad_request("'input' must be a string, an array of strings or of token ids", "input");
  if (in->empty()) throw bad_request("'input' is an empty array", "input");
  if ((*in)[0].is_number()) {
    out.push_back(token_input(*in, vocab, "input"));
    return out;
  }
  if (in->size() > kMaxInputs)
    throw bad_request("'input' has " + std::to_string(in->size()) + " items; at most " + std::to_string(kMaxInputs),
                      "input");
  for (size_t i = 0; i < in->size(); ++i) {
    const json& item = (*in)[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (item.is_string()) out.push_back(text_input(item, tok, limit, where));
    else if (item.is_array()) out.push_back(token_input(item, vocab, where));
    else throw bad_request(where + " must be a string or an array of token ids", "input");
  }
  return out;
}

void check_embedding_model(const ModelRegistry& models, const EmbeddingService& svc, const std::string& model) {
  if (model.empty() || model == svc.id()) return;
  if (svc.shared_with_chat()) {
    if (!models.knows(model)) throw models.not_found(model);
    return;
  }
  throw ApiError(404, "The model '" + model + "' does not exist; this server's embedding model is '" + svc.id() + "'",
                 "model", "model_not_found");
}

// Matryoshka truncation: the first `dims` components, re-normalised when the model normalises
// (as Qwen3-Embedding documents: truncate, then normalise).
void truncate(std::vector<float>& v, size_t dims, bool normalize) {
  v.resize(dims);
  if (normalize) engine::l2_normalize(v.data(), static_cast<int64_t>(dims));
}

}  // namespace

std::vector<int32_t> truncate_tokens(const std::vector<int32_t>& full, const std::vector<int32_t>& bare, size_t limit) {
  auto cut = [&] { return std::vector<int32_t>(full.begin(), full.begin() + std::min(limit, full.size())); };
  if (full.size() <= limit || bare.size() > full.size()) return cut();
  const size_t specials = full.size() - bare.size();
  if (limit <= specials) return cut();
  // Where the text's tokens start among the special ones (BERT: after [CLS]).
  size_t start = 0;
  while (start <= specials && !std::equal(bare.begin(), bare.end(), full.begin() + start)) ++start;
  if (start > specials) return cut();
  std::vector<int32_t> out(full.begin(), full.begin() + start);
  out.insert(out.end(), bare.begin(), bare.begin() + (limit - specials));
  out.insert(out.end(), full.begin() + start + bare.size(), full.end());
  return out;
}

std::string base64_encode(const unsigned char* data, size_t n) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = (uint32_t(data[i]) << 16) | (i + 1 < n ? uint32_t(data[i + 1]) << 8 : 0) |
                       (i + 2 < n ? uint32_t(data[i + 2]) : 0);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(b >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[b & 63] : '=';
  }
  return out;
}

void handle_embeddings(const ModelRegistry& models, EmbeddingService* svc, const httplib::Request& req,
                       httplib::Response& res) {
  json body = parse_json_body(req);
  require_object(body, "the request body");
  const std::string model = opt_string(body, "model").value_or("");
  if (!svc)
    throw bad_request("The model '" + (model.empty() ? models.default_name() : model) +
                          "' does not support embeddings; start the server with --embedding-model PATH (or serve "
                          "an embedding model)",
                      "model", "embeddings_not_supported");
  check_embedding_model(models, *svc, model);
  engine::EmbeddingEngine& eng = svc->engine();
  const int64_t dims = eng.dimensions();
  const std::string format = opt_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("'encoding_format' must be 'float' or 'base64'", "encoding_format");
  const int64_t want = opt_int(body, "dimensions", 1, dims).value_or(dims);
  const int64_t limit = eng.options().max_input_tokens;
  const int64_t seq = eng.options().pooling.max_seq_length;
  const auto text_limit = static_cast<size_t>(seq > 0 ? std::min(seq, limit) : 0);
  std::vector<std::vector<int32_t>> inputs = parse_inputs(body, svc->tokenizer(), eng.vocab_size(), text_limit);
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    if (n > limit)
      throw bad_request("This model's maximum input length is " + std::to_string(limit) + " tokens, but input " +
                            std::to_string(i) + " has " + std::to_string(n) + " tokens",
                        "input", "context_length_exceeded");
    tokens += n;
  }
  std::optional<std::vector<std::vector<float>>> got = eng.embed_until(std::move(inputs), client_gone);
  if (!got) throw ClientGone();  // its inputs not yet computed were dropped
  std::vector<std::vector<float>>& vecs = *got;
  json data = json::array();
  for (size_t i = 0; i < vecs.size(); ++i) {
    std::vector<float>& v = vecs[i];
    if (want < dims) truncate(v, static_cast<size_t>(want), eng.options().pooling.normalize);
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64") {
      // Little-endian float32, as the OpenAI SDK decodes it (numpy frombuffer dtype float32).
      std::vector<unsigned char> bytes(v.size() * sizeof(float));
      std::memcpy(bytes.data(), v.data(), bytes.size());
      item["embedding"] = base64_encode(bytes.data(), bytes.size());
    } else {
      item["embedding"] = v;
    }
    data.push_back(std::move(item));
  }
  send_json(res, 200,
            {{"object", "list"}, {"data", std::move(data)}, {"model", svc->id()},
             {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace rapid::server
