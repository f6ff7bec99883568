#include "tokenizer/unicode.h"

#include <algorithm>

namespace rapid::tok::uni {
namespace {
#include "tokenizer/unicode_data.inc"

template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) { return N; }

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t ccc(uint32_t cp) {
  auto* b = kCccCp;
  auto* e = kCccCp + count_of(kCccCp);
  auto it = std::lower_bound(b, e, cp);
  return (it != e && *it == cp) ? kCccVal[it - b] : 0;
}
}  // namespace

Cat category(uint32_t cp) {
  if (cp >= 0x110000) return Cn;
  auto* b = kCatRunStart;
  auto* e = kCatRunStart + count_of(kCatRunStart);
  auto it = std::upper_bound(b, e, cp);
  return static_cast<Cat>(kCatRunCat[(it - b) - 1]);
}

bool is_strippable_accent(uint32_t cp) {
  if (cp < 0x300) return false;
  return std::binary_search(kStripCp, kStripCp + count_of(kStripCp), cp);
}

bool is_bert_strippable_accent(uint32_t cp) {
  if (cp < 0x300) return false;
  return std::binary_search(kBertStripCp, kBertStripCp + count_of(kBertStripCp), cp);
}

template <size_t N>
static bool in_ranges(const uint32_t (&lo)[N], const uint32_t (&hi)[N], uint32_t cp) {
  auto it = std::upper_bound(lo, lo + N, cp);
  return it != lo && cp <= hi[(it - lo) - 1];
}
bool is_bert_dropped(uint32_t cp) { return in_ranges(kBertDropLo, kBertDropHi, cp); }
bool is_bert_space(uint32_t cp) { return in_ranges(kBertSpaceLo, kBertSpaceHi, cp); }
bool is_bert_punct(uint32_t cp) { return in_ranges(kBertPunctLo, kBertPunctHi, cp); }

bool is_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') ||
                        (cp >= 'A' && cp <= 'Z') || cp == '_';
  Cat c = category(cp);
  return (c >= Lu && c <= Me) || c == Nd || c == Pc || c == Nl;
}

size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

uint32_t next_cp(std::string_view s, size_t& i) {
  unsigned char c = s[i];
  size_t n = utf8_len(c);
  if (n == 1 || i + n > s.size()) { ++i; return c; }
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}



// Length of the valid sequence at s[i], or 0 with `bad` = length of the maximal invalid
// subpart (Unicode "best practice" for U+FFFD substitution).
static size_t valid_seq(std::string_view s, size_t i, size_t& bad) {
  auto b = [&](size_t k) -> unsigned { return static_cast<unsigned char>(s[k]); };
  unsigned c = b(i);
  size_t n = s.size();
  bad = 1;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    if (i + 1 < n && (b(i + 1) & 0xC0) == 0x80) return 2;
    return 0;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (i + 1 >= n || b(i + 1) < lo || b(i + 1) > hi) return 0;
    if (i + 2 >= n || (b(i + 2) & 0xC0) != 0x80) { bad = 2; return 0; }
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (i + 1 >= n || b(i + 1) < lo || b(i + 1) > hi) return 0;
    if (i + 2 >= n || (b(i + 2) & 0xC0) != 0x80) { bad = 2; return 0; }
    if (i + 3 >= n || (b(i + 3) & 0xC0) != 0x80) { bad = 3; return 0; }
    return 4;
  }
  return 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0, bad;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    size_t n = valid_seq(s, i, bad);
    if (!n) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0, bad;
  while (i < s.size()) {
    size_t n = valid_seq(s, i, bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

std::vector<uint32_t> to_cps(std::string_view s) {
  std::vector<uint32_t> v;
  v.reserve(s.size());
  for (size_t i = 0; i < s.size();) v.push_back(next_cp(s, i));
  return v;
}

std::string from_cps(const std::vector<uint32_t>& cps) {
  std::string s;
  s.reserve(cps.size());
  for (uint32_t c : cps) append_utf8(s, c);
  return s;
}

std::vector<uint32_t> decompose(const std::vector<uint32_t>& cps, bool compat) {
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
      uint32_t si = cp - kSBase;
      out.push_back(kLBase + si / kNCount);
      out.push_back(kVBase + (si % kNCount) / kTCount);
      if (si % kTCount) out.push_back(kTBase + si % kTCount);
      continue;
    }
    auto* b = kDecompCp;
    auto* e = kDecompCp + count_of(kDecompCp);
    auto it = std::lower_bound(b, e, cp);
    bool done = false;
    // Entries for one cp: canonical (compat=0) first, then compat (compat=1).
    for (; it != e && *it == cp; ++it) {
      size_t k = it - b;
      if (kDecompCompat[k] && !compat) continue;
      // With compat, prefer the compat entry when present (it follows the canonical one).
      if (compat && !kDecompCompat[k] && it + 1 != e && *(it + 1) == cp) continue;
      out.insert(out.end(), kDecompPool + kDecompOff[k], kDecompPool + kDecompOff[k] + kDecompLen[k]);
      done = true;
      break;
    }
    if (!done) out.push_back(cp);
  }
  // Canonical ordering: stable sort runs of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (ccc(out[i]) == 0) { ++i; continue; }
    size_t j = i;
    while (j < out.size() && ccc(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + i, out.begin() + j,
                     [](uint32_t a, uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  return out;
}

static bool compose_pair(uint32_t a, uint32_t b, uint32_t& c) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    c = kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    return true;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    c = a + (b - kTBase);
    return true;
  }
  uint64_t key = (static_cast<uint64_t>(a) << 21) | b;
  auto* be = kCompKey;
  auto* e = kCompKey + count_of(kCompKey);
  auto it = std::lower_bound(be, e, key);
  if (it != e && *it == key) { c = kCompVal[it - be]; return true; }
  return false;
}

static std::vector<uint32_t> compose(std::vector<uint32_t> v) {
  if (v.empty()) return v;
  size_t starter = 0;
  bool have_starter = ccc(v[0]) == 0;
  std::vector<uint32_t> out;
  out.reserve(v.size());
  out.push_back(v[0]);
  int last_ccc = have_starter ? 0 : 256;
  if (!have_starter) last_ccc = ccc(v[0]);
  for (size_t i = 1; i < v.size(); ++i) {
    uint32_t c = v[i];
    int cc = ccc(c);
    uint32_t comp;
    bool blocked = out.size() - 1 != starter && (last_ccc == 0 || last_ccc >= cc);
    if (have_starter && !blocked && compose_pair(out[starter], c, comp)) {
      out[starter] = comp;
      continue;
    }
    if (cc == 0) {
      starter = out.size();
      have_starter = true;
    }
    last_ccc = cc;
    out.push_back(c);
  }
  return out;
}

std::string normalize(std::string_view s, NormForm form) {
  bool ascii = true;
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) { ascii = false; break; }
  if (ascii) return std::string(s);
  bool compat = form == NormForm::NFKC || form == NormForm::NFKD;
  auto d = decompose(to_cps(s), compat);
  if (form == NormForm::NFC || form == NormForm::NFKC) d = compose(std::move(d));
  return from_cps(d);
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char ch = s[i];
    if (ch < 0x80) {
      out += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch + 32) : static_cast<char>(ch);
      ++i;
      continue;
    }
    uint32_t cp = next_cp(s, i);
    auto* b = kLowerCp;
    auto* e = kLowerCp + count_of(kLowerCp);
    auto it = std::lower_bound(b, e, cp);
    if (it != e && *it == cp) {
      size_t k = it - b;
      for (size_t j = 0; j < kLowerLen[k]; ++j) append_utf8(out, kLowerPool[kLowerOff[k] + j]);
    } else {
      append_utf8(out, cp);
    }
  }
  return out;
}

}  // namespace rapid::tok::uni
