#include "tokenizer/pipeline_tokenizer.h"

#include "tokenizer/unicode.h"

namespace rapid::tok {

void PipelineTokenizer::add_tokens(const std::vector<AddedToken>& toks) {
  for (auto& t : toks) {
    if (t.special) special_ids.insert(t.id);
    if (t.normalized && normalizer) norm_matcher_.add(normalizer->normalize(t.content), t);
    else if (t.normalized) norm_matcher_.add(t.content, t);
    else raw_matcher_.add(t.content, t);
  }
}

void PipelineTokenizer::encode_text(std::string_view text, bool at_start,
                                    std::vector<int32_t>& out) const {
  std::vector<Split> splits{Split{std::string(text), at_start}};
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(splits);
  for (auto& s : splits) model->tokenize(s.text, out);
}

std::vector<int32_t> PipelineTokenizer::encode(std::string_view input, bool add_special,
                                               bool parse_special) const {
  // Hugging Face tokenizers takes str: invalid UTF-8 becomes U+FFFD as Python's
  // bytes.decode('utf-8', errors='replace') would do.
  std::string text = uni::to_valid_utf8(input);
  std::vector<int32_t> out;
  if (add_special) out = prefix_ids;
  auto segs = raw_matcher_.split(text, parse_special);
  for (auto& seg : segs) {
    if (seg.id >= 0) { out.push_back(seg.id); continue; }
    std::string_view part = std::string_view(text).substr(seg.begin, seg.end - seg.begin);
    bool at_start = seg.begin == 0;
    std::string norm = normalizer ? normalizer->normalize(std::string(part)) : std::string(part);
    if (norm_matcher_.empty()) {
      if (!norm.empty()) encode_text(norm, at_start, out);
      continue;
    }
    for (auto& s2 : norm_matcher_.split(norm, parse_special)) {
      if (s2.id >= 0) { out.push_back(s2.id); continue; }
      if (s2.end > s2.begin)
        encode_text(std::string_view(norm).substr(s2.begin, s2.end - s2.begin),
                    at_start && s2.begin == 0, out);
    }
  }
  if (add_special) out.insert(out.end(), suffix_ids.begin(), suffix_ids.end());
  return out;
}

std::string PipelineTokenizer::id_to_piece(int32_t id) const {
  return id < 0 ? std::string() : std::string(pieces.get(id));
}

std::string PipelineTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || !pieces.has(id)) continue;
    if (skip_special && special_ids.count(id)) continue;
    toks.emplace_back(pieces.get(id));
  }
  if (!decoder) {
    std::string s;
    for (size_t i = 0; i < toks.size(); ++i) {
      if (i) s += ' ';
      s += toks[i];
    }
    return s;
  }
  decoder->decode_chain(toks, false);
  std::string s;
  for (auto& t : toks) s += t;
  return s;
}

std::string PipelineTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || !pieces.has(id)) return "";
  std::vector<std::string> toks{std::string(pieces.get(id))};
  if (decoder) decoder->decode_chain(toks, true);
  std::string s;
  for (auto& t : toks) s += t;
  return s;
}

}  // namespace rapid::tok
