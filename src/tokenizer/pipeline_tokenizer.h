// The one Tokenizer implementation: a pipeline of stages (components.h) plus added tokens and
// the post-processor's special-token wrapping. Loaders (tokenizer.json, GGUF) fill it in.
#pragma once
#include <unordered_set>

#include "tokenizer/added_vocab.h"
#include "tokenizer/components.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace rapid::tok {

class PipelineTokenizer : public rapid::tok::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces.size()); }
  std::string token_bytes(int32_t id) const override;
  std::string id_to_piece(int32_t id) const override;
  bool is_special(int32_t id) const override { return special_ids.count(id) != 0; }
  std::optional<int32_t> bos_id() const override { return bos; }
  std::vector<int32_t> eos_ids() const override { return eos; }
  std::string bos_token() const override { return bos_text; }
  std::string eos_token() const override { return eos_text; }
  std::string chat_template() const override { return chat_tmpl; }

  // Registers added tokens (after normalizer is set: normalized ones are matched normalized).
  void add_tokens(const std::vector<AddedToken>& toks);

  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<Decoder> decoder;
  std::vector<int32_t> prefix_ids, suffix_ids;  // added around the ids when add_special
  PieceTable pieces;                             // id -> vocab string, with holes
  std::unordered_set<int32_t> special_ids;
  std::optional<int32_t> bos;
  std::vector<int32_t> eos;
  std::string bos_text, eos_text, chat_tmpl;

 private:
  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  AddedMatcher raw_matcher_, norm_matcher_;
};

}  // namespace rapid::tok
