// Builds pipeline stages from their tokenizer.json objects. GGUF vocabularies are described
// with the same JSON so both paths share one implementation. Unknown types throw Error.
#pragma once
#include <memory>

#include <nlohmann/json.hpp>

#include "tokenizer/components.h"

namespace rapid::tok {

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);      // null -> nullptr
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);  // null -> nullptr
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);            // null -> nullptr

// {"String": "..."} or {"Regex": "..."} -> a Regex-ready pattern (literals escaped).
std::string pattern_to_regex(const nlohmann::json& pattern);

}  // namespace rapid::tok
