// Parses tokenizer.json with the model's vocab and merges streamed straight into flat vectors:
// building nlohmann's DOM for 100k+ vocab entries dominated load time.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rapid::tok {

struct ParsedTokenizerJson {
  nlohmann::json doc;  // everything, with model.vocab / model.merges replaced by null
  std::vector<std::pair<std::string, int64_t>> vocab;  // if model.vocab was an object
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_vocab = false, has_merges = false;
};

// Throws Error on malformed JSON.
ParsedTokenizerJson parse_tokenizer_json(const std::string& text);

}  // namespace rapid::tok
