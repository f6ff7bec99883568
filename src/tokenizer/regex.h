// PCRE2 (UTF + UCP, JIT) wrapper for the pre-tokenizer and normalizer patterns. Patterns come in
// Oniguruma syntax (what Hugging Face tokenizers uses); the few differences that matter for
// tokenizer patterns are translated on construction.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rapid::tok {

class Regex {
 public:
  // Throws Error with the PCRE2 message if the pattern does not compile.
  explicit Regex(const std::string& pattern, bool dollar_endonly = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Non-overlapping matches (byte offsets) in a valid UTF-8 string; empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

// Oniguruma's \s is the Unicode White_Space property (PCRE2's lacks U+0085) and its \w is
// Alphabetic|M|Nd|Pc (PCRE2's is L|N|_): rewrites \s, \S, \w, \W.
std::string onig_to_pcre2(const std::string& pattern);

}  // namespace rapid::tok
