// Decoders (tokenizers' decoders/*): ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// WordPiece, BPEDecoder, Sequence. Tokens are byte strings; UTF-8 repair happens where
// tokenizers does it (ByteLevel, ByteFallback), except in `mid` mode (raw token bytes).
#include "common/error.h"
#include "tokenizer/factories.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {
namespace {
using nlohmann::json;
const std::string kReplacementChar = "\xEF\xBF\xBD";

class ByteLevelDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    std::string bytes;
    for (auto& t : tokens) {
      std::string b;
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        int v = unicode_to_byte(uni::next_cp(t, i));
        if (v < 0) { ok = false; break; }
        b += static_cast<char>(v);
      }
      bytes += ok ? b : t;
    }
    tokens.assign(1, mid ? bytes : uni::to_valid_utf8(bytes));
  }
};

class ByteFallbackDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t npending = 0;
    auto flush = [&] {
      if (!npending) return;
      if (mid || uni::is_valid_utf8(pending)) out.push_back(pending);
      else
        for (size_t i = 0; i < npending; ++i) out.push_back(kReplacementChar);
      pending.clear();
      npending = 0;
    };
    for (auto& t : tokens) {
      int v = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        int h = hex(t[3]), l = hex(t[4]);
        if (h >= 0 && l >= 0) v = h * 16 + l;
      }
      if (v >= 0) {
        pending += static_cast<char>(v);
        ++npending;
      } else {
        flush();
        out.push_back(t);
      }
    }
    flush();
    tokens.swap(out);
  }
};

class FuseDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    std::string s;
    for (auto& t : tokens) s += t;
    tokens.assign(1, s);
  }
};

class StripDec : public Decoder {
 public:
  StripDec(uint32_t c, size_t start, size_t stop) : c_(c), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    for (auto& t : tokens) {
      if (!uni::is_valid_utf8(t)) continue;
      auto cps = uni::to_cps(t);
      size_t b = 0, e = cps.size();
      if (!mid)
        while (b < start_ && b < e && cps[b] == c_) ++b;
      for (size_t i = 0; i < stop_ && e > b && cps[e - 1] == c_; ++i) --e;
      t = uni::from_cps(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
    }
  }
 private:
  uint32_t c_;
  size_t start_, stop_;
};

class ReplaceDec : public Decoder {
 public:
  ReplaceDec(const json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) literal_ = pattern["String"].get<std::string>();
    else re_ = std::make_unique<Regex>(pattern.at("Regex").get<std::string>());
  }
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (auto& t : tokens) {
      std::string out;
      size_t pos = 0;
      if (re_) {
        if (!uni::is_valid_utf8(t)) continue;
        for (auto [b, e] : re_->find_all(t)) {
          out.append(t, pos, b - pos);
          out += content_;
          pos = e;
        }
      } else if (!literal_.empty()) {
        for (size_t f; (f = t.find(literal_, pos)) != std::string::npos; pos = f + literal_.size()) {
          out.append(t, pos, f - pos);
          out += content_;
        }
      }
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }
 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> re_;
};

class MetaspaceDec : public Decoder {
 public:
  MetaspaceDec(std::string rep, bool strip_first) : rep_(std::move(rep)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string out;
      bool drop = i == 0 && !mid && strip_first_;
      for (size_t p = 0; p < t.size();) {
        if (!rep_.empty() && t.compare(p, rep_.size(), rep_) == 0) {
          if (!drop) out += ' ';
          p += rep_.size();
        } else {
          out += t[p++];
        }
      }
      t = std::move(out);
    }
  }
 private:
  std::string rep_;
  bool strip_first_;
};

class WordPieceDec : public Decoder {
 public:
  WordPieceDec(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0 || mid) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, " ");
      }
      if (cleanup_) t = cleanup(t);
    }
  }
  static std::string cleanup(std::string s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (auto [from, to] : kRules) {
      std::string out;
      std::string_view f(from);
      size_t pos = 0;
      for (size_t k; (k = s.find(f, pos)) != std::string::npos; pos = k + f.size()) {
        out.append(s, pos, k - pos);
        out += to;
      }
      out.append(s, pos, std::string::npos);
      s = std::move(out);
    }
    return s;
  }
 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDec : public Decoder {
 public:
  explicit BpeDec(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens, bool) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string rep = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      size_t pos = 0;
      for (size_t k; !suffix_.empty() && (k = t.find(suffix_, pos)) != std::string::npos;
           pos = k + suffix_.size()) {
        out.append(t, pos, k - pos);
        out += rep;
      }
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }
 private:
  std::string suffix_;
};

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> v) : v_(std::move(v)) {}
  void decode_chain(std::vector<std::string>& tokens, bool mid) const override {
    for (auto& d : v_) d->decode_chain(tokens, mid);
  }
 private:
  std::vector<std::unique_ptr<Decoder>> v_;
};
}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.at("type").get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip") {
    auto cps = uni::to_cps(j.at("content").get<std::string>());
    if (cps.size() != 1) throw Error("Strip decoder content must be one character");
    return std::make_unique<StripDec>(cps[0], j.value("start", size_t{0}), j.value("stop", size_t{0}));
  }
  if (type == "Replace")
    return std::make_unique<ReplaceDec>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "Metaspace") {
    bool strip = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      strip = j["prepend_scheme"].get<std::string>() != "never";
    else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean())
      strip = j["add_prefix_space"].get<bool>();
    return std::make_unique<MetaspaceDec>(j.value("replacement", std::string("\u2581")), strip);
  }
  if (type == "WordPiece")
    return std::make_unique<WordPieceDec>(j.value("prefix", std::string("##")), j.value("cleanup", true));
  if (type == "BPEDecoder") return std::make_unique<BpeDec>(j.value("suffix", std::string("</w>")));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> v;
    for (auto& d : j.at("decoders"))
      if (auto p = make_decoder(d)) v.push_back(std::move(p));
    return std::make_unique<SequenceDec>(std::move(v));
  }
  throw Error("unsupported decoder type '" + type + "'");
}

}  // namespace rapid::tok
