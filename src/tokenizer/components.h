// The stages of a Hugging Face style tokenization pipeline: normalizer -> pre-tokenizer ->
// model -> post-processor, and the decoder chain for the way back. Each is built from its
// tokenizer.json object (components_json.cpp) or assembled for a GGUF vocabulary.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

// A piece of text still to be split; at_start: it begins at offset 0 of the original input
// (Metaspace prepend_scheme "first" depends on it).
struct Split {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<Split>& splits) const = 0;
};

// Tokens are byte strings here; `mid` = these tokens follow other text (used for per-token
// bytes: no first-token space stripping, no lossy UTF-8 repair).
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens, bool mid) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& out) const = 0;
};

// How a split of matches and non-matches is regrouped (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Regroups `s` given ascending non-overlapping match ranges, appending non-empty pieces.
void split_by_matches(const Split& s, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<Split>& out);

// GPT-2 byte <-> printable code point map.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped code point
int unicode_to_byte(uint32_t cp);               // -1 if cp is not in the map
std::string bytes_to_byte_level(std::string_view s);

}  // namespace rapid::tok
