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
    for (int n = min_n_; n <= max_n_ && n <= e; ++n) tables_[n][hash(tokens.data() + e - n, n)] = e;
  indexed_ = std::max<int64_t>(indexed_, L);
}

std::vector<int32_t> NgramProposer::propose(const std::vector<int32_t>& tokens, int k) const {
  std::vector<int32_t> out;
  const int64_t L = int64_t(tokens.size());
  if (k <= 0) return out;
  for (int n = std::min<int64_t>(max_n_, L - 1); n >= min_n_; --n) {
    auto it = tables_[n].find(hash(tokens.data() + L - n, n));
    if (it == tables_[n].end()) continue;
    const int64_t e = it->second;  // the match is tokens[e-n, e); propose tokens[e, e+k)
    if (e >= L || !std::equal(tokens.begin() + (e - n), tokens.begin() + e, tokens.begin() + (L - n))) continue;
    const int64_t m = std::min<int64_t>(k, L - e);
    out.assign(tokens.begin() + e, tokens.begin() + e + m);
    return out;
  }
  return out;
}

}  // namespace rapid::engine
