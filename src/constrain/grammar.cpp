// Grammar building and the static checks that let the matcher run without guards at each step.
#include "constrain/grammar.h"

#include <algorithm>
#include <functional>
#include "common/utf8.h"

namespace rapid::constrain {

namespace {
constexpr size_t kMaxGrammarSymbols = 4'000'000;  // refuses runaway {m,n} expansions
}

int Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].name == name) return int(i);
  return -1;
}

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto [it, inserted] = ids_.try_emplace(std::string(name), uint32_t(names_.size()));
  if (!inserted) return it->second;
  names_.emplace_back(name);
  alts_.emplace_back();
  defined_.push_back(false);
  return uint32_t(names_.size() - 1);
}

uint32_t GrammarBuilder::fresh_rule(std::string_view base) {
  // Helper names contain a '#', which GBNF identifiers cannot, so they never collide.
  names_.push_back(std::string(base) + "#" + std::to_string(fresh_counter_++));
  alts_.emplace_back();
  defined_.push_back(false);
  return uint32_t(names_.size() - 1);
}

void GrammarBuilder::define(uint32_t r, std::vector<Seq> alts) {
  if (defined_[r]) throw GrammarError("rule '" + names_[r] + "' is defined twice");
  for (const auto& a : alts) total_syms_ += a.size() + 1;
  if (total_syms_ > kMaxGrammarSymbols)
    throw GrammarError("grammar too large (over " + std::to_string(kMaxGrammarSymbols) +
                       " symbols; reduce repetition counts)");
  defined_[r] = true;
  alts_[r] = std::move(alts);
}

uint32_t GrammarBuilder::byte_set(const ByteSet& s) {
  auto [it, inserted] = set_ids_.try_emplace(s, uint32_t(sets_.size()));
  if (inserted) sets_.push_back(s);
  return it->second;
}

GrammarBuilder::Seq GrammarBuilder::literal(std::string_view bytes) {
  Seq s;
  for (unsigned char c : bytes) {
    ByteSet b;
    b.set(c);
    s.push_back(this->bytes(b));
  }
  return s;
}

namespace {

// Rules for which `pred` holds, by a linear worklist fixpoint: a rule has the property when one
// of its alternatives has it for all symbols (bytes decided by `bytes_ok`).
std::vector<bool> rule_fixpoint(const std::vector<std::vector<GrammarBuilder::Seq>>& alts,
                                const std::function<bool(uint32_t)>& bytes_ok) {
  const size_t n = alts.size();
  std::vector<bool> has(n, false);
  struct Alt {
    uint32_t rule;
    size_t remaining;
  };
  std::vector<Alt> all;
  std::vector<std::vector<uint32_t>> users(n);
  std::vector<uint32_t> queue;
  for (uint32_t r = 0; r < n; ++r) {
    for (const auto& seq : alts[r]) {
      size_t remaining = 0;
      bool blocked = false;
      for (const auto& s : seq) {
        if (s.is_ref) ++remaining;
        else if (!bytes_ok(s.id)) blocked = true;
      }
      if (blocked) continue;
      uint32_t ai = uint32_t(all.size());
      all.push_back({r, remaining});
      for (const auto& s : seq)
        if (s.is_ref) users[s.id].push_back(ai);
      if (remaining == 0 && !has[r]) {
        has[r] = true;
        queue.push_back(r);
      }
    }
  }
  while (!queue.empty()) {
    uint32_t r = queue.back();
    queue.pop_back();
    for (uint32_t ai : users[r]) {
      if (--all[ai].remaining == 0 && !has[all[ai].rule]) {
        has[all[ai].rule] = true;
        queue.push_back(all[ai].rule);
      }
    }
  }
  return has;
}

}  // namespace

std::shared_ptr<const Grammar> GrammarBuilder::build(std::string_view root_name) {
  const size_t n = names_.size();
  uint32_t root = uint32_t(n);
  for (uint32_t i = 0; i < n; ++i)
    if (names_[i] == root_name) root = i;
  if (root == n || !defined_[root])
    throw GrammarError("grammar has no rule '" + std::string(root_name) + "'");
  for (uint32_t r = 0; r < n; ++r)
    if (!defined_[r]) throw GrammarError("rule '" + names_[r] + "' is used but never defined");

  // Drop alternatives that can never match (empty byte sets, rules that cannot finish), so that
  // every state the matcher reaches can still be completed.
  auto productive = rule_fixpoint(alts_, [&](uint32_t set) { return sets_[set] != ByteSet{}; });
  if (!productive[root])
    throw GrammarError("rule '" + names_[root] + "' cannot match any finite text");
  for (uint32_t r = 0; r < n; ++r) {
    auto& a = alts_[r];
    a.erase(std::remove_if(a.begin(), a.end(),
                           [&](const Seq& seq) {
                             for (const auto& s : seq) {
                               if (s.is_ref ? !productive[s.id] : sets_[s.id] == ByteSet{})
                                 return true;
                             }
                             return false;
                           }),
            a.end());
  }

  // Left recursion would make the matcher's prediction loop forever: refuse it.
  auto nullable = rule_fixpoint(alts_, [](uint32_t) { return false; });
  std::vector<std::vector<uint32_t>> starts(n);  // rule → rules it can begin with
  for (uint32_t r = 0; r < n; ++r)
    for (const auto& seq : alts_[r])
      for (const auto& s : seq) {
        if (!s.is_ref) break;
        starts[r].push_back(s.id);
        if (!nullable[s.id]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on stack, 2 done
  for (uint32_t r0 = 0; r0 < n; ++r0) {
    if (color[r0]) continue;
    std::vector<std::pair<uint32_t, size_t>> stack{{r0, 0}};
    color[r0] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == starts[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      uint32_t next = starts[r][i++];
      if (color[next] == 1)
        throw GrammarError("rule '" + names_[next] + "' is left-recursive (directly or through '" +
                           names_[r] + "'); rewrite it with repetition");
      if (color[next] == 0) {
        color[next] = 1;
        stack.push_back({next, 0});
      }
    }
  }

  auto g = std::make_shared<Grammar>();
  g->sets = sets_;
  g->root = root;
  g->rules.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    g->rules[r].name = names_[r];
    for (const auto& seq : alts_[r]) {
      g->rules[r].alts.push_back(uint32_t(g->elems.size()));
      for (const auto& s : seq)
        g->elems.push_back({s.is_ref ? Grammar::kRef : Grammar::kBytes, s.id});
      g->elems.push_back({Grammar::kEnd, 0});
    }
  }
  return g;
}

std::string utf8_encode(uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) throw GrammarError("surrogate code point in grammar");
  if (cp > 0x10FFFF) throw GrammarError("code point above U+10FFFF in grammar");
  std::string out;
  append_utf8(out, cp);
  return out;
}

namespace {

// Splits [lo, hi] (same encoded length, no surrogates) until every piece encodes as a plain
// product of byte ranges, the classic construction behind UTF-8 regex automata.
void split_range(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (uint32_t b : bounds) {
    if (lo <= b && hi > b) {
      split_range(lo, b, out);
      split_range(b + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a = utf8_encode(lo), b = utf8_encode(hi);
  std::vector<ByteRange> seq;
  for (size_t i = 0; i < a.size(); ++i) seq.push_back({uint8_t(a[i]), uint8_t(b[i])});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(
    std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  // Normalise: clip, sort, merge, cut out the surrogate block.
  std::vector<std::pair<uint32_t, uint32_t>> r;
  for (auto [lo, hi] : ranges) {
    if (lo > hi || lo > 0x10FFFF) continue;
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) r.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) r.push_back({0xE000, hi});
    } else {
      r.push_back({lo, hi});
    }
  }
  std::sort(r.begin(), r.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto p : r) {
    if (!merged.empty() && p.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, p.second);
    else
      merged.push_back(p);
  }
  std::vector<std::vector<ByteRange>> out;
  for (auto [lo, hi] : merged) split_range(lo, hi, out);
  return out;
}

}  // namespace rapid::constrain
