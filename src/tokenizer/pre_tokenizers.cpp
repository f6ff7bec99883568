// Pre-tokenizers (tokenizers' pre_tokenizers/*): Split, ByteLevel, Metaspace, Whitespace,
// WhitespaceSplit, Digits, Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence.
#include <functional>

#include "common/error.h"
#include "tokenizer/factories.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {
namespace {
using nlohmann::json;

const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

SplitBehavior parse_behavior(const std::string& b) {
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  throw Error("unknown split behavior '" + b + "'");
}

// Every code point for which pred holds is a one-code-point match.
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view s,
                                                    const std::function<bool(uint32_t)>& pred) {
  std::vector<std::pair<size_t, size_t>> m;
  for (size_t i = 0; i < s.size();) {
    size_t b = i;
    uint32_t cp = uni::next_cp(s, i);
    if (pred(cp)) m.emplace_back(b, i);
  }
  return m;
}

void apply_each(std::vector<Split>& splits, const std::function<void(const Split&, std::vector<Split>&)>& f) {
  std::vector<Split> out;
  out.reserve(splits.size() * 2);
  for (auto& s : splits) f(s, out);
  splits.swap(out);
}

class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(const std::string& pattern, SplitBehavior b, bool invert, bool dollar_endonly = false)
      : re_(pattern, dollar_endonly), b_(b), invert_(invert) {}
  void pre_tokenize(std::vector<Split>& splits) const override {
    apply_each(splits, [&](const Split& s, std::vector<Split>& out) {
      split_by_matches(s, re_.find_all(s.text), b_, invert_, out);
    });
  }
 private:
  Regex re_;
  SplitBehavior b_;
  bool invert_;
};

class CharSplit : public PreTokenizer {
 public:
  CharSplit(std::function<bool(uint32_t)> pred, SplitBehavior b) : pred_(std::move(pred)), b_(b) {}
  void pre_tokenize(std::vector<Split>& splits) const override {
    apply_each(splits, [&](const Split& s, std::vector<Split>& out) {
      split_by_matches(s, char_matches(s.text, pred_), b_, false, out);
    });
  }
 private:
  std::function<bool(uint32_t)> pred_;
  SplitBehavior b_;
};

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool prefix, bool use_regex) : prefix_(prefix) {
    if (use_regex) re_ = std::make_unique<Regex>(kGpt2Pattern);
  }
  void pre_tokenize(std::vector<Split>& splits) const override {
    apply_each(splits, [&](const Split& s0, std::vector<Split>& out) {
      Split s = s0;
      if (prefix_ && (s.text.empty() || s.text[0] != ' ')) s.text.insert(0, " ");
      size_t first = out.size();
      if (re_) split_by_matches(s, re_->find_all(s.text), SplitBehavior::Isolated, false, out);
      else if (!s.text.empty()) out.push_back(s);
      for (size_t i = first; i < out.size(); ++i) out[i].text = bytes_to_byte_level(out[i].text);
    });
  }
 private:
  bool prefix_;
  std::unique_ptr<Regex> re_;
};

class MetaspacePre : public PreTokenizer {
 public:
  MetaspacePre(std::string rep, std::string scheme, bool split)
      : rep_(std::move(rep)), scheme_(std::move(scheme)), split_(split) {}
  void pre_tokenize(std::vector<Split>& splits) const override {
    apply_each(splits, [&](const Split& s0, std::vector<Split>& out) {
      Split s{std::string(), s0.at_start};
      for (char c : s0.text) {
        if (c == ' ') s.text += rep_;
        else s.text += c;
      }
      bool starts = s.text.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == "always" || (scheme_ == "first" && s0.at_start)))
        s.text.insert(0, rep_);
      if (!split_) {
        if (!s.text.empty()) out.push_back(s);
        return;
      }
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t p = 0; (p = s.text.find(rep_, p)) != std::string::npos; p += rep_.size())
        m.emplace_back(p, p + rep_.size());
      split_by_matches(s, m, SplitBehavior::MergedWithNext, false, out);
    });
  }
 private:
  std::string rep_, scheme_;
  bool split_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> v) : v_(std::move(v)) {}
  void pre_tokenize(std::vector<Split>& splits) const override {
    for (auto& p : v_) p->pre_tokenize(splits);
  }
 private:
  std::vector<std::unique_ptr<PreTokenizer>> v_;
};

bool is_bert_punct(uint32_t c) { return uni::is_bert_punct(c); }

bool get_bool(const json& j, const char* k, bool def) {
  auto it = j.find(k);
  return (it == j.end() || it->is_null()) ? def : it->get<bool>();
}
}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "Split") {
    return std::make_unique<RegexSplit>(pattern_to_regex(j.at("pattern")),
                                        parse_behavior(j.at("behavior").get<std::string>()),
                                        get_bool(j, "invert", false),
                                        get_bool(j, "dollar_endonly", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(get_bool(j, "add_prefix_space", true),
                                          get_bool(j, "use_regex", true));
  if (type == "Metaspace") {
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      scheme = j["prepend_scheme"].get<std::string>();
    else if (j.contains("add_prefix_space") && !get_bool(j, "add_prefix_space", true))
      scheme = "never";
    return std::make_unique<MetaspacePre>(j.value("replacement", std::string("\u2581")), scheme,
                                          get_bool(j, "split", true));
  }
  if (type == "Whitespace")
    return std::make_unique<RegexSplit>("\\w+|[^\\w\\s]+", SplitBehavior::Removed, true);
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplit>(uni::is_whitespace, SplitBehavior::Removed);
  if (type == "Digits") {
    bool single = get_bool(j, "individual_digits", false);
    return std::make_unique<CharSplit>(uni::is_number, single ? SplitBehavior::Isolated
                                                                : SplitBehavior::Contiguous);
  }
  if (type == "Punctuation")
    return std::make_unique<CharSplit>(is_bert_punct,
                                       parse_behavior(j.value("behavior", std::string("Isolated"))));
  if (type == "CharDelimiterSplit") {
    uint32_t d = uni::to_cps(j.at("delimiter").get<std::string>()).at(0);
    return std::make_unique<CharSplit>([d](uint32_t c) { return c == d; }, SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    v.push_back(std::make_unique<CharSplit>(uni::is_whitespace, SplitBehavior::Removed));
    v.push_back(std::make_unique<CharSplit>(is_bert_punct, SplitBehavior::Isolated));
    return std::make_unique<SequencePre>(std::move(v));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (auto& p : j.at("pretokenizers"))
      if (auto q = make_pre_tokenizer(p)) v.push_back(std::move(q));
    return std::make_unique<SequencePre>(std::move(v));
  }
  throw Error("unsupported pre-tokenizer type '" + type + "'");
}

}  // namespace rapid::tok
