#include "tokenizer/added_vocab.h"

#include "tokenizer/unicode.h"

namespace rapid::tok {

int32_t AddedMatcher::child(int32_t n, unsigned char c) const {
  for (auto& [k, v] : nodes_[n].kids)
    if (k == c) return v;
  return -1;
}

void AddedMatcher::add(const std::string& pattern, const AddedToken& tok) {
  if (pattern.empty()) return;
  int32_t n = 0;
  for (unsigned char c : pattern) {
    int32_t k = child(n, c);
    if (k < 0) {
      k = static_cast<int32_t>(nodes_.size());
      nodes_[n].kids.emplace_back(c, k);
      nodes_.emplace_back();
    }
    n = k;
  }
  if (nodes_[n].tok >= 0) return;  // first definition wins
  nodes_[n].tok = static_cast<int32_t>(toks_.size());
  toks_.push_back(tok);
  first_[static_cast<unsigned char>(pattern[0])] = true;
}

static bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  size_t j = i;
  return uni::is_word_char(uni::next_cp(s, j));
}

static bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return uni::is_word_char(uni::next_cp(s, i));
}

std::vector<Segment> AddedMatcher::split(std::string_view s, bool parse_special) const {
  std::vector<Segment> out;
  size_t start_offset = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (!first_[static_cast<unsigned char>(s[i])]) { ++i; continue; }
    // Longest pattern starting at i.
    int32_t n = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < s.size(); ++k) {
      n = child(n, static_cast<unsigned char>(s[k]));
      if (n < 0) break;
      if (nodes_[n].tok >= 0) { best = nodes_[n].tok; best_end = k + 1; }
    }
    if (best < 0) { ++i; continue; }
    const AddedToken& t = toks_[best];
    size_t b = i, e = best_end;
    i = best_end;  // matches never overlap, even when this one is then ignored
    if (t.special && !parse_special) continue;
    if (t.single_word && ((b > 0 && ends_with_word(s.substr(0, b))) || starts_with_word(s.substr(e))))
      continue;
    if (t.lstrip) {
      size_t nb = b;
      while (nb > start_offset) {
        size_t p = nb - 1;
        while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
        size_t q = p;
        if (!uni::is_whitespace(uni::next_cp(s, q))) break;
        nb = p;
      }
      b = nb;
    }
    if (t.rstrip) {
      while (e < s.size()) {
        size_t q = e;
        if (!uni::is_whitespace(uni::next_cp(s, q))) break;
        e = q;
      }
      i = e;
    }
    if (start_offset < b) out.push_back({start_offset, b, -1});
    out.push_back({b, e, t.id});
    start_offset = e;
  }
  if (start_offset < s.size()) out.push_back({start_offset, s.size(), -1});
  return out;
}

}  // namespace rapid::tok
