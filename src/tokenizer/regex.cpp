#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"

namespace rapid::tok {

// Oniguruma's Unicode \w (UTS #18 "word"): Alphabetic | Mark | Nd | Pc | Join_Control.
// Alphabetic = letters, Nl and Other_Alphabetic, whose non-mark members are the circled and
// squared Latin letters listed here.
static const char* kOnigWord =
    "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{24B6}-\\x{24E9}\\x{1F130}-\\x{1F149}\\x{1F150}-\\x{1F169}"
    "\\x{1F170}-\\x{1F189}\\x{200C}\\x{200D}";

std::string onig_to_pcre2(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else if (n == 'w') {
        out += in_class ? kOnigWord : std::string("[") + kOnigWord + "]";
      } else if (n == 'W' && !in_class) {
        out += std::string("[^") + kOnigWord + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') { out += '^'; ++i; }
      if (i + 1 < p.size() && p[i + 1] == ']') { out += "\\]"; ++i; }
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

namespace {
// Per-thread match state; a large JIT stack so long runs (e.g. megabytes of spaces) match.
struct MatchData {
  pcre2_match_data* md = pcre2_match_data_create(64, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  MatchData() { pcre2_jit_stack_assign(ctx, nullptr, stack); }
  ~MatchData() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};
}  // namespace

Regex::Regex(const std::string& pattern, bool dollar_endonly) {
  int err = 0;
  PCRE2_SIZE off = 0;
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  if (dollar_endonly) opts |= PCRE2_DOLLAR_ENDONLY;
  std::string p = onig_to_pcre2(pattern);
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &off,
                             nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw Error("bad regex '" + pattern + "' at offset " + std::to_string(off) + ": " +
                reinterpret_cast<char*>(buf));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT fails
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  thread_local MatchData md;
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                         PCRE2_NO_UTF_CHECK, md.md, md.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // A resource limit: refuse rather than silently split the text differently.
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof buf);
      throw Error(std::string("pre-tokenizer regex failed on a ") + std::to_string(s.size()) +
                  "-byte piece: " + reinterpret_cast<char*>(buf));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {
      // Empty match: step over one code point, as Oniguruma's find_iter does.
      pos = e + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    out.emplace_back(b, e);
    pos = e;
  }
  return out;
}

}  // namespace rapid::tok
