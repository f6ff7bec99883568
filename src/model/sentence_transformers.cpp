#include "model/sentence_transformers.h"

#include <filesystem>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"

namespace rapid::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json parse_file(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw FileError(path, std::string("not valid JSON: ") + e.what());
  }
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The one pooling mode a Pooling module's config.json turns on. Older sentence-transformers
// write one boolean per mode (pooling_mode_lasttoken, ...); newer ones a "pooling_mode" string.
PoolingMode read_pooling(const std::string& path) {
  const json cfg = parse_file(path);
  if (!cfg.is_object()) throw FileError(path, "not a JSON object");
  std::vector<std::string> on;
  if (auto it = cfg.find("pooling_mode"); it != cfg.end() && it->is_string()) on.push_back(it->get<std::string>());
  static const std::pair<const char*, const char*> kFlags[] = {
      {"pooling_mode_cls_token", "cls"}, {"pooling_mode_mean_tokens", "mean"},
      {"pooling_mode_max_tokens", "max"}, {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"},
      {"pooling_mode_weightedmean_tokens", "weightedmean"}, {"pooling_mode_lasttoken", "lasttoken"}};
  for (const auto& [key, mode] : kFlags)
    if (auto it = cfg.find(key); it != cfg.end() && it->is_boolean() && it->get<bool>()) on.push_back(mode);
  if (on.size() != 1)
    throw FileError(path, on.empty() ? "no pooling mode is set" : "several pooling modes at once are not supported");
  if (on[0] == "lasttoken") return PoolingMode::LastToken;
  if (on[0] == "mean") return PoolingMode::Mean;
  if (on[0] == "cls") return PoolingMode::Cls;
  throw FileError(path, "pooling mode '" + on[0] + "' is not supported (lasttoken, mean, cls)");
}

// sentence_bert_config.json (optional): the truncation length; do_lower_case (sentence-transformers
// lowercases the text before its tokenizer) is refused rather than silently ignored.
int64_t read_max_seq_length(const std::string& dir) {
  const std::string path = (fs::path(dir) / "sentence_bert_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  const json cfg = parse_file(path);
  if (!cfg.is_object()) throw FileError(path, "not a JSON object");
  if (auto it = cfg.find("do_lower_case"); it != cfg.end() && it->is_boolean() && it->get<bool>())
    throw FileError(path, "do_lower_case is not supported");
  auto it = cfg.find("max_seq_length");
  if (it == cfg.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) throw FileError(path, "max_seq_length must be a positive integer");
  return it->get<int64_t>();
}

}  // namespace

const char* pooling_mode_name(PoolingMode m) {
  switch (m) {
    case PoolingMode::LastToken: return "lasttoken";
    case PoolingMode::Mean: return "mean";
    case PoolingMode::Cls: return "cls";
  }
  return "?";
}

std::optional<EmbeddingPooling> read_sentence_transformers(const std::string& model_dir) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) return std::nullopt;
  const std::string modules_path = (fs::path(model_dir) / "modules.json").string();
  if (!fs::exists(modules_path, ec)) return std::nullopt;
  const json modules = parse_file(modules_path);
  if (!modules.is_array()) throw FileError(modules_path, "not a JSON array of modules");
  std::optional<PoolingMode> mode;
  bool normalize = false;
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string())
      throw FileError(modules_path, "a module without a \"type\" string");
    const std::string type = m["type"].get<std::string>();
    const std::string sub = m.value("path", "");
    if (sub.find("..") != std::string::npos || (!sub.empty() && sub[0] == '/'))
      throw FileError(modules_path, "module path '" + sub + "' leaves the model directory");
    if (ends_with(type, ".Transformer")) continue;
    if (ends_with(type, ".Normalize")) {
      normalize = true;
    } else if (ends_with(type, ".Pooling")) {
      if (mode) throw FileError(modules_path, "more than one Pooling module");
      mode = read_pooling((fs::path(model_dir) / sub / "config.json").string());
    } else {
      throw FileError(modules_path, "module type '" + type + "' is not supported (Transformer, Pooling, Normalize)");
    }
  }
  if (!mode) throw FileError(modules_path, "no Pooling module");
  return EmbeddingPooling{*mode, normalize, read_max_seq_length(model_dir)};
}

}  // namespace rapid::model
