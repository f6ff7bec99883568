#include "engine/ngram_proposer.h"

#include <algorithm>
#include <cstring>

namespace rapid::engine {

uint64_t NgramProposer::hash(const int32_t* p, int n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(n);
  for (int i = 0; i < n; ++i) {
    h ^= uint64_t(uint32_t(p[i])) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return h;
}

void NgramProposer::update(const std::vector<int32_t>& tokens) {
  const int64_t L = int64_t(tokens.size());
  if (L < indexed_) {  // the sequence shrank (never in normal use): rebuild
    for (auto& t : tables_) t.clear();
    indexed_ = 0;
  }
  // tables_ hold n-grams [e-n, e) for e < L, i.e. those followed by a token. The one ending at L
  // is the current suffix: it is only looked up, never found as its own match.
  for (int64_t e = std::max<int64_t>(indexed_, 1); e < L; ++e)
    for (int n = min_n_; n <= max_n_ && n <= e; ++n) {
      auto [it, fresh] = tables_[n].try_emplace(hash(tokens.data() + e - n, n), Ends{e, -1});
      if (!fresh) it->second = Ends{e, it->second.latest};
    }
  indexed_ = std::max<int64_t>(indexed_, L);
}

std::vector<int32_t> NgramProposer::propose(const std::vector<int32_t>& tokens, int k) const {
  std::vector<int32_t> out;
  const int64_t L = int64_t(tokens.size());
  if (k <= 0) return out;
  auto same = [&](int64_t a, int64_t b, int n) {  // tokens[a-n, a) == tokens[b-n, b) (hashes collide)
    return std::equal(tokens.begin() + (a - n), tokens.begin() + a, tokens.begin() + (b - n));
  };
  for (int n = std::min<int64_t>(max_n_, L - 1); n >= min_n_; --n) {
    auto it = tables_[n].find(hash(tokens.data() + L - n, n));
    if (it == tables_[n].end()) continue;
    const int64_t e = it->second.latest;  // the match is tokens[e-n, e); propose tokens[e, e+k)
    if (e >= L || !same(e, L, n)) continue;
    int64_t m = std::min<int64_t>(k, L - e);
    // Seen twice before: the guess goes only as far as those two continuations agree.
    const int64_t p = it->second.before;
    if (p >= n && same(p, L, n)) {
      int64_t g = 0;
      while (g < m && tokens[size_t(p + g)] == tokens[size_t(e + g)]) ++g;
      m = g;
    }
    out.assign(tokens.begin() + e, tokens.begin() + e + m);
    return out;
  }
  return out;
}

}  // namespace rapid::engine
