// Recursive-descent parser for GBNF text into a GrammarBuilder.
#include "constrain/gbnf.h"

#include <algorithm>
#include <map>

namespace rapid::constrain {

namespace {

constexpr int kMaxNesting = 200;        // parentheses depth: deeper input is refused, not recursed
constexpr uint64_t kMaxRepeat = 100000;  // {m,n} bounds

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  std::shared_ptr<const Grammar> parse(std::string_view root) {
    skip_space();
    if (pos_ >= s_.size()) fail("empty grammar");
    while (pos_ < s_.size()) {
      std::string name = parse_name();
      if (name.empty()) fail("expected a rule name");
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      uint32_t r = b_.rule(name);
      if (b_.defined(r)) fail("rule '" + name + "' is defined twice");
      auto alts = parse_alternates(0);
      b_.define(r, std::move(alts));
      skip_space();
    }
    return b_.build(root);
  }

 private:
  using Seq = GrammarBuilder::Seq;

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("GBNF " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // True if the text at pos_ is `name ::=` (the start of the next rule).
  bool at_rule_start() {
    size_t save = pos_;
    std::string name = parse_name();
    bool yes = false;
    if (!name.empty()) {
      skip_space();
      yes = s_.substr(pos_, 3) == "::=";
    }
    pos_ = save;
    return yes;
  }

  std::vector<Seq> parse_alternates(int depth) {
    if (depth > kMaxNesting) fail("groups nested too deeply");
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(depth));
    while (true) {
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        alts.push_back(parse_sequence(depth));
      } else {
        break;
      }
    }
    return alts;
  }

  Seq parse_sequence(int depth) {
    Seq seq;
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      Seq item = parse_atom(depth);
      item = parse_postfix(std::move(item));
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  Seq parse_atom(int depth) {
    char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= s_.size()) fail("unterminated string literal");
        if (s_[pos_] == '"') {
          ++pos_;
          break;
        }
        bytes += utf8_encode(parse_char());
      }
      return b_.literal(bytes);
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_syms({{0, 0x10FFFF}});
    }
    if (c == '(') {
      ++pos_;
      auto alts = parse_alternates(depth + 1);
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') fail("expected ')'");
      ++pos_;
      if (alts.size() == 1) return alts[0];
      uint32_t r = b_.fresh_rule("group");
      b_.define(r, std::move(alts));
      return {b_.ref(r)};
    }
    if (is_name_char(c)) return {b_.ref(b_.rule(parse_name()))};
    if (c == '<') fail("token references <...> are not supported");
    fail(std::string("unexpected character '") + c + "'");
  }

  Seq parse_postfix(Seq item) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '*') {
        ++pos_;
        item = repeat(item, 0, kMaxRepeat + 1);
      } else if (c == '+') {
        ++pos_;
        item = repeat(item, 1, kMaxRepeat + 1);
      } else if (c == '?') {
        ++pos_;
        item = repeat(item, 0, 1);
      } else if (c == '{') {
        ++pos_;
        skip_space();
        uint64_t m = parse_int();
        uint64_t n = m;
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          skip_space();
          if (pos_ < s_.size() && s_[pos_] == '}') n = kMaxRepeat + 1;
          else n = parse_int();
        }
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}' closing repetition");
        ++pos_;
        if (n < m) fail("repetition {m,n} with n < m");
        item = repeat(item, m, n);
      } else {
        break;
      }
    }
    return item;
  }

  uint64_t parse_int() {
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + uint64_t(s_[pos_] - '0');
      if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in repetition");
    return v;
  }

  // `n` > kMaxRepeat means unbounded. Desugars into right-recursive helper rules (the matcher
  // turns right recursion into a loop, so long repetitions keep the stack flat).
  Seq repeat(const Seq& item, uint64_t m, uint64_t n) {
    Seq out;
    for (uint64_t i = 0; i < m; ++i) {
      out.insert(out.end(), item.begin(), item.end());
      if (out.size() > 4'000'000) fail("repetition too large");
    }
    if (n > kMaxRepeat) {
      uint32_t r = b_.fresh_rule("star");
      Seq loop = item;
      loop.push_back(b_.ref(r));
      b_.define(r, {loop, Seq{}});
      out.push_back(b_.ref(r));
    } else if (n > m) {
      // opt_k ::= item opt_{k-1} | ε, built from the inside out.
      int64_t prev = -1;
      for (uint64_t k = 0; k < n - m; ++k) {
        uint32_t r = b_.fresh_rule("rep");
        Seq body = item;
        if (prev >= 0) body.push_back(b_.ref(uint32_t(prev)));
        b_.define(r, {body, Seq{}});
        prev = r;
      }
      out.push_back(b_.ref(uint32_t(prev)));
    }
    return out;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) fail("truncated hex escape");
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail("bad hex digit in escape");
    }
    return v;
  }

  // One (possibly escaped) code point of a literal or class.
  uint32_t parse_char() {
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) fail("truncated escape");
      char e = s_[pos_++];
      uint32_t cp = 0;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/':
          return uint32_t(e);
        case 'x': cp = parse_hex(2); break;
        case 'u': cp = parse_hex(4); break;
        case 'U': cp = parse_hex(8); break;
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("escape is not a Unicode scalar value");
      return cp;
    }
    // Decode one UTF-8 character of the grammar text itself.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + size_t(len) > s_.size()) fail("invalid UTF-8 in grammar text");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      unsigned char d = static_cast<unsigned char>(s_[pos_ + size_t(i)]);
      if ((d & 0xC0) != 0x80) fail("invalid UTF-8 in grammar text");
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("invalid UTF-8 in grammar text");
    pos_ += size_t(len);
    return cp;
  }

  Seq parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated character class");
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      uint32_t lo = parse_char(), hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    if (negate) {
      std::sort(ranges.begin(), ranges.end());
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (auto [lo, hi] : ranges) {
        if (lo > next) inv.push_back({next, lo - 1});
        next = std::max(next, hi + 1);
      }
      if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
      ranges = std::move(inv);
    }
    return class_syms(ranges);
  }

  // A code-point class as grammar symbols: one byte set when it is all ASCII, else a helper
  // rule whose alternatives are the UTF-8 byte sequences (memoised: classes repeat a lot).
  Seq class_syms(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    auto seqs = utf8_sequences(ranges);
    auto key = seqs;
    auto it = class_cache_.find(key);
    if (it != class_cache_.end()) return it->second;
    ByteSet single;
    std::vector<Seq> alts;
    for (const auto& seq : seqs) {
      if (seq.size() == 1) {
        single.set_range(seq[0].first, seq[0].second);
      } else {
        Seq s;
        for (auto [lo, hi] : seq) {
          ByteSet b;
          b.set_range(lo, hi);
          s.push_back(b_.bytes(b));
        }
        alts.push_back(std::move(s));
      }
    }
    Seq result;
    if (alts.empty()) {
      result = {b_.bytes(single)};  // may be empty: the builder prunes such dead branches
    } else {
      if (single != ByteSet{}) alts.insert(alts.begin(), Seq{b_.bytes(single)});
      uint32_t r = b_.fresh_rule("class");
      b_.define(r, std::move(alts));
      result = {b_.ref(r)};
    }
    class_cache_[key] = result;
    return result;
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder b_;
  std::map<std::vector<std::vector<ByteRange>>, Seq> class_cache_;
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).parse(root);
}

}  // namespace rapid::constrain
