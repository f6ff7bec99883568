// Normalizers (tokenizers' normalizers/*): Unicode forms, Replace, Prepend, Strip, Lowercase,
// StripAccents, BertNormalizer, Sequence.
#include "common/error.h"
#include "tokenizer/factories.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {
namespace {
using nlohmann::json;

class FormNorm : public Normalizer {
 public:
  explicit FormNorm(uni::NormForm f) : f_(f) {}
  std::string normalize(std::string s) const override { return uni::normalize(s, f_); }
 private:
  uni::NormForm f_;
};

class LowercaseNorm : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return uni::lowercase(s); }
};

std::string strip_accents(std::string_view s, bool bert = false) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = uni::next_cp(s, i);
    if (!(bert ? uni::is_bert_strippable_accent(cp) : uni::is_strippable_accent(cp))) uni::append_utf8(out, cp);
  }
  return out;
}

class StripAccentsNorm : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return strip_accents(s); }
};

class StripNorm : public Normalizer {
 public:
  StripNorm(bool l, bool r) : l_(l), r_(r) {}
  std::string normalize(std::string s) const override {
    auto cps = uni::to_cps(s);
    size_t b = 0, e = cps.size();
    if (l_) while (b < e && uni::is_whitespace(cps[b])) ++b;
    if (r_) while (e > b && uni::is_whitespace(cps[e - 1])) --e;
    return uni::from_cps(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
  }
 private:
  bool l_, r_;
};

class ReplaceNorm : public Normalizer {
 public:
  ReplaceNorm(const json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) literal_ = pattern["String"].get<std::string>();
    else re_ = std::make_unique<Regex>(pattern.at("Regex").get<std::string>());
  }
  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    if (!re_) {
      if (literal_.empty()) return s;
      size_t pos = 0;
      for (size_t f; (f = s.find(literal_, pos)) != std::string::npos; pos = f + literal_.size()) {
        out.append(s, pos, f - pos);
        out += content_;
      }
      out.append(s, pos, std::string::npos);
      return out;
    }
    size_t pos = 0;
    for (auto [b, e] : re_->find_all(s)) {
      out.append(s, pos, b - pos);
      out += content_;
      pos = e;
    }
    out.append(s, pos, std::string::npos);
    return out;
  }
 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> re_;
};

class PrependNorm : public Normalizer {
 public:
  explicit PrependNorm(std::string p) : p_(std::move(p)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : p_ + s; }
 private:
  std::string p_;
};

class ByteLevelNorm : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return bytes_to_byte_level(s); }
};

bool is_chinese(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNorm : public Normalizer {
 public:
  BertNorm(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      uint32_t cp = uni::next_cp(s, i);
      if (clean_) {
        if (uni::is_bert_dropped(cp)) continue;
        if (uni::is_bert_space(cp)) cp = ' ';
      }
      if (chinese_ && is_chinese(cp)) {
        out += ' ';
        uni::append_utf8(out, cp);
        out += ' ';
      } else {
        uni::append_utf8(out, cp);
      }
    }
    if (strip_) out = strip_accents(uni::normalize(out, uni::NormForm::NFD), true);
    if (lower_) out = uni::lowercase(out);
    return out;
  }
 private:
  bool clean_, chinese_, strip_, lower_;
};

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> v) : v_(std::move(v)) {}
  std::string normalize(std::string s) const override {
    for (auto& n : v_) s = n->normalize(std::move(s));
    return s;
  }
 private:
  std::vector<std::unique_ptr<Normalizer>> v_;
};

bool get_bool(const json& j, const char* k, bool def) {
  auto it = j.find(k);
  return (it == j.end() || it->is_null()) ? def : it->get<bool>();
}
}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "NFC") return std::make_unique<FormNorm>(uni::NormForm::NFC);
  if (type == "NFD") return std::make_unique<FormNorm>(uni::NormForm::NFD);
  if (type == "NFKC") return std::make_unique<FormNorm>(uni::NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<FormNorm>(uni::NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNorm>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNorm>();
  if (type == "Strip")
    return std::make_unique<StripNorm>(get_bool(j, "strip_left", true), get_bool(j, "strip_right", true));
  if (type == "Replace")
    return std::make_unique<ReplaceNorm>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "Prepend") return std::make_unique<PrependNorm>(j.at("prepend").get<std::string>());
  if (type == "ByteLevel") return std::make_unique<ByteLevelNorm>();
  if (type == "BertNormalizer") {
    bool lower = get_bool(j, "lowercase", true);
    return std::make_unique<BertNorm>(get_bool(j, "clean_text", true),
                                      get_bool(j, "handle_chinese_chars", true),
                                      get_bool(j, "strip_accents", lower), lower);
  }
  if (type == "Precompiled") {
    auto it = j.find("precompiled_charsmap");
    if (it == j.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()))
      return nullptr;
    throw Error("normalizer 'Precompiled' (SentencePiece charsmap) is not supported");
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> v;
    for (auto& n : j.at("normalizers"))
      if (auto p = make_normalizer(n)) v.push_back(std::move(p));
    return std::make_unique<SequenceNorm>(std::move(v));
  }
  throw Error("unsupported normalizer type '" + type + "'");
}

std::string pattern_to_regex(const json& pattern) {
  if (pattern.contains("Regex")) return pattern["Regex"].get<std::string>();
  std::string lit = pattern.at("String").get<std::string>(), out;
  for (char c : lit) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace rapid::tok
