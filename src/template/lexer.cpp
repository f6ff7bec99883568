#include "template/lexer.h"

#include <cstring>

#include "template/template_error.h"
#include "template/utf8.h"

namespace rapid::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

[[noreturn]] void syntax(const std::string& msg, int line) {
  throw TemplateError(TemplateError::Kind::Syntax, msg, line);
}

class Lexer {
 public:
  Lexer(const std::string& src, const LexOptions& opt) : opt_(opt) {
    // jinja2 normalises newlines and drops a single trailing newline (keep_trailing_newline=False).
    src_.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_.push_back(src[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    size_t n = src_.size();
    while (pos_ < n) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = n;
        break;
      }
      std::string text = src_.substr(pos_, start - pos_);
      char kind = src_[start + 1];
      char mod = start + 2 < n ? src_[start + 2] : 0;
      if (mod == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      } else if (mod != '+' && opt_.lstrip_blocks && (kind == '%' || kind == '#')) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
        if (l_pos > 0 || line_starting) {
          bool all_ws = true;
          for (size_t k = l_pos; k < text.size() && all_ws; ++k) all_ws = is_ws(text[k]);
          if (all_ws) text.resize(l_pos);
        }
      }
      emit_text(text, pos_);
      line_ = line_at(start);
      size_t body = start + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        lex_comment(body);
      } else if (kind == '%' && try_raw(body)) {
        // raw block consumed
      } else {
        lex_tag(kind, body);
      }
    }
    tokens_.push_back({Tok::Eof, "", line_at(n)});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t n = src_.size();
    for (size_t i = from; i + 1 < n; ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  int line_at(size_t p) {
    // Incremental: positions only move forward.
    for (; line_pos_ < p && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_count_;
    return line_count_;
  }

  void emit_text(const std::string& text, size_t at) {
    if (text.empty()) return;
    tokens_.push_back({Tok::Text, text, line_at(at)});
  }

  // After a block or comment end: `-` strips all following whitespace, `+` keeps it, otherwise
  // trim_blocks removes one newline.
  size_t after_end(size_t p, char mod, bool block) {
    if (mod == '-') {
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (mod != '+' && block && opt_.trim_blocks && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  void lex_comment(size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) syntax("Missing end of comment tag", line_);
    char mod = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    pos_ = after_end(end + 2, mod, true);
  }

  // `{% raw %}...{% endraw %}`: the body is text, no tags inside are interpreted.
  bool try_raw(size_t p) {
    size_t q = p;
    while (q < src_.size() && is_ws(src_[q])) ++q;
    if (src_.compare(q, 3, "raw") != 0 || (q + 3 < src_.size() && is_name_char(src_[q + 3]))) return false;
    q += 3;
    while (q < src_.size() && is_ws(src_[q])) ++q;
    char mod = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) mod = src_[q++];
    if (src_.compare(q, 2, "%}") != 0) return false;
    size_t body = after_end(q + 2, mod, true);
    // Find the matching endraw tag.
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t r = s + 2;
      char bmod = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) bmod = src_[r++];
      while (r < src_.size() && is_ws(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_ws(src_[r])) ++r;
      char emod = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) emod = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, s - body);
      if (bmod == '-') {
        while (!text.empty() && is_ws(text.back())) text.pop_back();
      } else if (bmod != '+' && opt_.lstrip_blocks) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        bool all_ws = true;
        for (size_t k = l_pos; k < text.size() && all_ws; ++k) all_ws = is_ws(text[k]);
        if (all_ws && (l_pos > 0 || src_[body - 1] == '\n')) text.resize(l_pos);
      }
      emit_text(text, body);
      pos_ = after_end(r + 2, emod, true);
      return true;
    }
    syntax("Missing end of raw directive", line_);
  }

  void lex_tag(char kind, size_t p) {
    bool block = kind == '%';
    tokens_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line_});
    std::vector<char> balance;
    const char close = block ? '%' : '}';
    size_t n = src_.size();
    while (true) {
      while (p < n && is_ws(src_[p])) ++p;
      if (p >= n) syntax(block ? "unexpected end of template, expected end of block tag" : "unexpected end of template, expected end of print statement", line_at(p));
      int line = line_at(p);
      if (balance.empty()) {
        char mod = 0;
        size_t q = p;
        if (src_[q] == '-' || src_[q] == '+') mod = src_[q++];
        if (q + 1 < n && src_[q] == close && src_[q + 1] == '}' && !(mod == '+' && !block)) {
          tokens_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line});
          pos_ = after_end(q + 2, mod, block);
          return;
        }
      }
      char c = src_[p];
      if (is_name_start(c)) {
        size_t q = p;
        while (q < n && is_name_char(src_[q])) ++q;
        tokens_.push_back({Tok::Name, src_.substr(p, q - p), line});
        p = q;
      } else if (is_digit(c)) {
        p = lex_number(p, line);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p, line);
      } else {
        static const char* ops2[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (auto* o : ops2)
          if (src_.compare(p, 2, o) == 0) op = o;
        if (op.empty()) {
          if (!std::strchr("+-/*%~[](){}<>=.:|,;", c)) syntax(std::string("unexpected char '") + c + "'", line);
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") {
          balance.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (balance.empty() || balance.back() != op[0]) syntax("unexpected '" + op + "'", line);
          balance.pop_back();
        }
        tokens_.push_back({Tok::Op, op, line});
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p, int line) {
    size_t n = src_.size(), q = p;
    auto digits = [&] {
      while (q < n && (is_digit(src_[q]) || (src_[q] == '_' && q + 1 < n && is_digit(src_[q + 1])))) ++q;
    };
    digits();
    bool is_float = false;
    if (q + 1 < n && src_[q] == '.' && is_digit(src_[q + 1])) {
      is_float = true;
      ++q;
      digits();
    }
    if (q < n && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < n && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < n && is_digit(src_[r])) {
        is_float = true;
        q = r;
        digits();
      }
    }
    std::string text;
    for (size_t k = p; k < q; ++k)
      if (src_[k] != '_') text.push_back(src_[k]);
    tokens_.push_back({is_float ? Tok::Float : Tok::Int, text, line});
    return q;
  }

  size_t lex_string(size_t p, int line) {
    char quote = src_[p];
    size_t n = src_.size(), q = p + 1;
    std::string out;
    auto hexval = [&](size_t at, int count) -> long {
      if (at + count > n) syntax("truncated escape in string", line);
      long v = 0;
      for (int k = 0; k < count; ++k) {
        char h = src_[at + k];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) syntax("invalid escape in string", line);
        v = v * 16 + d;
      }
      return v;
    };
    while (true) {
      if (q >= n) syntax("unexpected end of string", line);
      char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++q;
        continue;
      }
      if (q + 1 >= n) syntax("unexpected end of string", line);
      char e = src_[q + 1];
      q += 2;
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case 'a': out.push_back('\a'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': break;
        case 'x': utf8_append(out, static_cast<char32_t>(hexval(q, 2))); q += 2; break;
        case 'u': utf8_append(out, static_cast<char32_t>(hexval(q, 4))); q += 4; break;
        case 'U': {
          long v = hexval(q, 8);
          if (v > 0x10ffff) syntax("invalid \\U escape in string", line);
          utf8_append(out, static_cast<char32_t>(v));
          q += 8;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && q < n && src_[q] >= '0' && src_[q] <= '7'; ++k) v = v * 8 + (src_[q++] - '0');
            utf8_append(out, static_cast<char32_t>(v));
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    tokens_.push_back({Tok::String, out, line});
    return q + 1;
  }

  std::string src_;
  LexOptions opt_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_pos_ = 0;
  int line_count_ = 1;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& opt) {
  return Lexer(source, opt).run();
}

}  // namespace rapid::jinja
