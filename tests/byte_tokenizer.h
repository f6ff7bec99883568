// A byte-level tokenizer for model-free tests: id = byte, 256 = EOS, 257 = BOS.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rapid::testing {

class ByteTokenizer : public tok::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(257);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids)
      if (id < 256) s += char(id);
      else if (!skip_special) s += id == 256 ? "</s>" : "<s>";
    return s;
  }
  int64_t vocab_size() const override { return 258; }
  std::string token_bytes(int32_t id) const override { return id < 256 ? std::string(1, char(id)) : ""; }
  std::string id_to_piece(int32_t id) const override { return decode({id}, false); }
  bool is_special(int32_t id) const override { return id >= 256; }
  std::optional<int32_t> bos_id() const override { return 257; }
  std::vector<int32_t> eos_ids() const override { return {256}; }
  std::string bos_token() const override { return "<s>"; }
  std::string eos_token() const override { return "</s>"; }
  std::string chat_template() const override { return ""; }
};

}  // namespace rapid::testing
