#include "tokenizer/json_sax.h"

#include "common/error.h"

namespace rapid::tok {
namespace {
using json = nlohmann::json;
using Dom = nlohmann::detail::json_sax_dom_parser<json>;

// Forwards events to the DOM builder except inside model.vocab / model.merges.
class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(ParsedTokenizerJson& out) : out_(out), dom_(out.doc, true) {}

  bool null() override { pending_ = kNone; return capture_ ? bad("null in vocab/merges") : dom_.null(); }
  bool boolean(bool v) override { pending_ = kNone; return capture_ ? bad("bool in vocab/merges") : dom_.boolean(v); }
  bool number_integer(number_integer_t v) override {
    if (capture_ == kVocab && depth_in_ == 1) { out_.vocab.emplace_back(std::move(key_), v); return true; }
    pending_ = kNone;
    return capture_ ? bad("number in merges") : dom_.number_integer(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (capture_ == kVocab && depth_in_ == 1) {
      out_.vocab.emplace_back(std::move(key_), static_cast<int64_t>(v > INT64_MAX ? -1 : v));
      return true;
    }
    pending_ = kNone;
    return capture_ ? bad("number in merges") : dom_.number_unsigned(v);
  }
  bool number_float(number_float_t v, const string_t& s) override {
    pending_ = kNone;
    return capture_ ? bad("float in vocab/merges") : dom_.number_float(v, s);
  }
  bool string(string_t& v) override {
    if (capture_ == kMerges) {
      if (depth_in_ == 1) {  // "a b"
        size_t sp = v.find(' ', 1);
        if (sp == std::string::npos) return bad("merge '" + v + "' has no space");
        out_.merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
        return true;
      }
      if (depth_in_ == 2) {  // ["a", "b"]
        pair_.push_back(std::move(v));
        return true;
      }
      return bad("nested merges");
    }
    if (capture_) return bad("string value in vocab");
    pending_ = kNone;
    return dom_.string(v);
  }
  bool binary(binary_t& v) override { return dom_.binary(v); }
  bool start_object(std::size_t n) override {
    if (capture_) return bad("object inside vocab/merges");
    if (pending_ == kVocab) { capture_ = kVocab; depth_in_ = 1; pending_ = kNone; out_.has_vocab = true; return dom_.null(); }
    pending_ = kNone;
    path_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(string_t& k) override {
    if (capture_ == kVocab) { key_ = std::move(k); return true; }
    if (capture_) return bad("key in merges");
    path_.back() = k;
    if (path_.size() == 2 && path_[0] == "model") {
      if (k == "vocab") pending_ = kVocab;
      else if (k == "merges") pending_ = kMerges;
    }
    return dom_.key(k);
  }
  bool end_object() override {
    if (capture_ == kVocab) { capture_ = kNone; return true; }
    path_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override {
    if (capture_ == kMerges) {
      if (depth_in_ != 1) return bad("nested merges");
      depth_in_ = 2;
      pair_.clear();
      return true;
    }
    if (capture_) return bad("array inside vocab");
    if (pending_ == kMerges) { capture_ = kMerges; depth_in_ = 1; pending_ = kNone; out_.has_merges = true; return dom_.null(); }
    pending_ = kNone;
    path_.emplace_back("[]");
    return dom_.start_array(n);
  }
  bool end_array() override {
    if (capture_ == kMerges) {
      if (depth_in_ == 2) {
        if (pair_.size() != 2) return bad("merge pair without two strings");
        out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        depth_in_ = 1;
        return true;
      }
      capture_ = kNone;
      return true;
    }
    path_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& tok, const nlohmann::detail::exception& e) override {
    throw Error(std::string("JSON parse error: ") + e.what());
  }

 private:
  enum Mode { kNone, kVocab, kMerges };
  bool bad(const std::string& why) { throw Error("model vocab/merges: " + why); }
  ParsedTokenizerJson& out_;
  Dom dom_;
  Mode capture_ = kNone, pending_ = kNone;
  int depth_in_ = 0;
  std::string key_;
  std::vector<std::string> pair_;
  std::vector<std::string> path_;
};
}  // namespace

ParsedTokenizerJson parse_tokenizer_json(const std::string& text) {
  ParsedTokenizerJson out;
  Handler h(out);
  if (!json::sax_parse(text, &h)) throw Error("JSON parse error");
  return out;
}

}  // namespace rapid::tok
