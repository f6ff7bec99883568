#include <algorithm>
#include <array>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {
namespace {
// GPT-2's table: printable bytes map to themselves, the others to U+0100 upwards in order.
struct ByteMap {
  std::array<std::string, 256> to_str;
  std::array<int16_t, 512> from_cp;
  ByteMap() {
    from_cp.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? b : 256 + n++;
      to_str[b].clear();
      uni::append_utf8(to_str[b], cp);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return map().to_str[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? map().from_cp[cp] : -1; }

std::string bytes_to_byte_level(std::string_view s) {
  const auto& m = map();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) out += m.to_str[c];
  return out;
}

void split_by_matches(const Split& s, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<Split>& out) {
  // (begin, end, is_match) covering the whole string, as tokenizers' Pattern::find_matches.
  struct Piece { size_t b, e; bool m; };
  std::vector<Piece> ps;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) ps.push_back({prev, b, false});
    ps.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.text.size()) ps.push_back({prev, s.text.size(), false});
  if (invert)
    for (auto& p : ps) p.m = !p.m;

  std::vector<Piece> res;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (auto& p : ps)
        if (!p.m) res.push_back(p);
      break;
    case SplitBehavior::Isolated:
      res = ps;
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool prev_match = false;
      for (auto& p : ps) {
        if (p.m && !prev_match && !res.empty()) res.back().e = p.e;
        else res.push_back(p);
        prev_match = p.m;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t i = ps.size(); i-- > 0;) {
        auto& p = ps[i];
        if (p.m && !prev_match && !res.empty()) res.back().b = p.b;
        else res.push_back(p);
        prev_match = p.m;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      int prev_m = -1;
      for (auto& p : ps) {
        if (prev_m == static_cast<int>(p.m) && !res.empty()) res.back().e = p.e;
        else res.push_back(p);
        prev_m = p.m;
      }
      break;
    }
  }
  for (auto& p : res)
    if (p.e > p.b) out.push_back({s.text.substr(p.b, p.e - p.b), s.at_start && p.b == 0});
}

}  // namespace rapid::tok
