// Incremental decoding: decode a short window of recent ids and emit what it adds to the
// window's previous text, holding back while the text ends in an incomplete UTF-8 sequence
// (decoded as U+FFFD). Decoding the window with its preceding token keeps the decoders'
// first-token rules (e.g. SentencePiece's leading-space strip) consistent with a full decode.
#include "tokenizer/tokenizer.h"

namespace rapid::tok {

static bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special,
                                           std::vector<int32_t> context)
    : tok_(tok), skip_special_(skip_special), ids_(std::move(context)) {
  read_offset_ = ids_.size();
  prefix_offset_ = ids_.size() > 6 ? ids_.size() - 6 : 0;
}

std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::vector<int32_t> prefix(ids_.begin() + prefix_offset_, ids_.begin() + read_offset_);
  std::vector<int32_t> window(ids_.begin() + prefix_offset_, ids_.end());
  std::string prefix_text = tok_.decode(prefix, skip_special_);
  std::string text = tok_.decode(window, skip_special_);
  if (text.size() > prefix_text.size() && !ends_with_replacement(text) &&
      text.compare(0, prefix_text.size(), prefix_text) == 0) {
    std::string delta = text.substr(prefix_text.size());
    prefix_offset_ = read_offset_;
    read_offset_ = ids_.size();
    emitted_ += delta;
    return delta;
  }
  return "";
}

std::string StreamingDetokenizer::flush() {
  if (read_offset_ >= ids_.size()) return "";
  std::vector<int32_t> prefix(ids_.begin() + prefix_offset_, ids_.begin() + read_offset_);
  std::vector<int32_t> window(ids_.begin() + prefix_offset_, ids_.end());
  std::string prefix_text = tok_.decode(prefix, skip_special_);
  std::string text = tok_.decode(window, skip_special_);
  prefix_offset_ = read_offset_ = ids_.size();
  if (text.compare(0, prefix_text.size(), prefix_text) != 0) return "";
  std::string delta = text.substr(prefix_text.size());
  emitted_ += delta;
  return delta;
}

}  // namespace rapid::tok
