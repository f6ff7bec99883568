// Lazily determinised pushdown recognizer (see matcher.h).
#include "constrain/matcher.h"

#include <algorithm>

namespace rapid::constrain {

namespace {
// A closure that touches more than this many (position, stack) pairs means a grammar far beyond
// anything a schema produces; refuse rather than stall the server.
constexpr size_t kMaxClosure = 2'000'000;
}

size_t Automaton::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
  return size_t(h ^ (h >> 29));
}

Automaton::Automaton(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  nodes_.push_back({0, 0});        // node 0: bottom of every stack
  states_.push_back({});           // state 0: dead
  state_ids_[{}] = kDead;
  trans_.assign(256, int32_t(kDead));
  // The start: the root rule called from the bottom of the stack, as if by a tail call.
  scratch_stacks_.clear();
  scratch_accept_ = false;
  for (uint32_t a : g_->rules[g_->root].alts) work_.push_back({a, 0});
  run_closure();
  initial_ = intern_state();
}

uint32_t Automaton::node(uint32_t pos, uint32_t parent) {
  uint64_t key = (uint64_t(pos) << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, uint32_t(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void Automaton::run_closure() {
  seen_.clear();
  while (!work_.empty()) {
    auto [pos, parent] = work_.back();
    work_.pop_back();
    uint64_t key = (uint64_t(pos) << 32) | parent;
    // Paths that meet at the same (position, stack) continue identically: follow one.
    if (!seen_.insert(key).second) continue;
    if (seen_.size() > kMaxClosure)
      throw GrammarError("grammar too ambiguous: one step explores over 2M parser positions");
    const Grammar::Elem& e = g_->elems[pos];
    switch (e.kind) {
      case Grammar::kBytes:
        scratch_stacks_.push_back(node(pos, parent));
        break;
      case Grammar::kEnd:
        if (parent == 0) {
          scratch_accept_ = true;
        } else {
          const Node& n = nodes_[parent];
          work_.push_back({n.pos + 1, n.parent});
        }
        break;
      case Grammar::kRef: {
        // A reference in last position returns straight to our caller (tail call).
        uint32_t ret = g_->elems[pos + 1].kind == Grammar::kEnd ? parent : node(pos, parent);
        for (uint32_t a : g_->rules[e.arg].alts) work_.push_back({a, ret});
        break;
      }
    }
  }
}

uint32_t Automaton::intern_state() {
  std::sort(scratch_stacks_.begin(), scratch_stacks_.end());
  scratch_stacks_.erase(std::unique(scratch_stacks_.begin(), scratch_stacks_.end()),
                        scratch_stacks_.end());
  if (scratch_stacks_.empty() && !scratch_accept_) return kDead;
  // The accept flag is part of the identity: append a marker that is never a node id.
  std::vector<uint32_t> key = scratch_stacks_;
  if (scratch_accept_) key.push_back(UINT32_MAX);
  auto [it, inserted] = state_ids_.try_emplace(std::move(key), uint32_t(states_.size()));
  if (inserted) {
    states_.push_back({scratch_stacks_, scratch_accept_});
    trans_.resize(trans_.size() + 256, -1);
  }
  return it->second;
}

uint32_t Automaton::compute(uint32_t state, uint8_t byte) {
  scratch_stacks_.clear();
  scratch_accept_ = false;
  for (uint32_t id : states_[state].stacks) {
    const Node n = nodes_[id];
    if (g_->sets[g_->elems[n.pos].arg].test(byte)) work_.push_back({n.pos + 1, n.parent});
  }
  run_closure();
  uint32_t next = intern_state();
  trans_[size_t(state) * 256 + byte] = int32_t(next);
  return next;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g)
    : GrammarMatcher(std::make_shared<Automaton>(std::move(g))) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<Automaton> a)
    : a_(std::move(a)), state_(a_->initial()) {}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  uint32_t s = state_;
  for (unsigned char c : bytes) {
    s = a_->step(s, c);
    if (s == Automaton::kDead) return false;
  }
  state_ = s;
  return true;
}

}  // namespace rapid::constrain
