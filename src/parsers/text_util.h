// Small text helpers every reader in this module uses: whitespace, trimming, the hold-back rules
// of streamed text (a possible marker prefix, an incomplete UTF-8 sequence), XML attributes and
// compact JSON text.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rapid::parsers {

inline constexpr size_t npos = std::string::npos;

bool is_ws(char c);
std::string trim(std::string_view s);

// Length of the longest suffix of s[from..] that is a proper prefix of m (may still become m).
size_t tail_prefix(std::string_view s, size_t from, std::string_view m);

// Where a search for a marker of length `len` resumes when s was searched up to `scanned`
// (a match may straddle the old end), never before `floor`.
inline size_t resume_at(size_t scanned, size_t len, size_t floor) {
  return std::max(floor, scanned >= len ? scanned - len + 1 : size_t(0));
}

// End of s[begin..r) moved back so that it does not split a UTF-8 sequence.
size_t utf8_cut(std::string_view s, size_t begin, size_t r);

// Value of key="..." in an XML-ish tag, "" when absent.
std::string attr_of(std::string_view tag, std::string_view key);

// Kimi K2 writes "functions.NAME:IDX" as the call's name: the function name between.
std::string kimi_name(const std::string& raw);

// Compact JSON text (invalid UTF-8 replaced; an ordered_json keeps its key order), and a
// string's JSON escaping without the quotes.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);
std::string json_escape(std::string_view s);

// Blocks that run to the end of the reply read their body with wrapper markers (the block's
// openers, the strip tokens) turned into spaces: "<function_call> {..}\n<function_call> {..}".
// Resumable: feed the body as it grows; a possible marker prefix at the end waits unless `final`.
class MarkerBlanker {
 public:
  MarkerBlanker(const std::vector<std::string>& a, const std::vector<std::string>& b) : a_(&a), b_(&b) {}
  std::string_view feed(std::string_view body, bool final);
  const std::string& text() const { return out_; }

 private:
  const std::vector<std::string>* a_;
  const std::vector<std::string>* b_;
  std::string out_;
  size_t in_ = 0;  // bytes of the body already blanked into out_
};

}  // namespace rapid::parsers
