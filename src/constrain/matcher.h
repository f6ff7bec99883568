// Byte-level incremental recognizer for a Grammar.
//
// A parse state is a set of stacks (a pushdown recognizer that follows every alternative at
// once, like llama.cpp's grammar sampler). Stacks are hash-consed into a shared node pool and
// whole stack sets into numbered states, and transitions (state, byte) → state are memoised in a
// table, so the automaton is determinised lazily: after warm-up, one byte costs one array load.
// Right recursion (how repetitions are desugared) is a tail call and does not grow stacks, so a
// long string or array keeps visiting the same few states.
//
// The Automaton is shared by every GrammarMatcher / TokenConstraint copy made from it. It is NOT
// thread-safe: use one Automaton per request (or per thread).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "constrain/grammar.h"

namespace rapid::constrain {

class Automaton {
 public:
  static constexpr uint32_t kDead = 0;

  explicit Automaton(std::shared_ptr<const Grammar> g);

  uint32_t initial() const { return initial_; }
  // The state after `byte`, kDead if the byte is not allowed.
  uint32_t step(uint32_t state, uint8_t byte) {
    int32_t t = trans_[size_t(state) * 256 + byte];
    return t >= 0 ? uint32_t(t) : compute(state, byte);
  }
  bool can_end(uint32_t state) const { return states_[state].accept; }
  // Nothing more can follow: the text so far is a complete match and only that.
  bool is_complete(uint32_t state) const {
    return states_[state].accept && states_[state].stacks.empty();
  }
  size_t num_states() const { return states_.size(); }
  const Grammar& grammar() const { return *g_; }

 private:
  struct Node {
    uint32_t pos;     // index into grammar elems: a kBytes element (stack top) or a kRef (return)
    uint32_t parent;  // node id, 0 = bottom of stack
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted node ids whose element is kBytes
    bool accept = false;
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  uint32_t compute(uint32_t state, uint8_t byte);
  uint32_t node(uint32_t pos, uint32_t parent);
  // Follows references and completions from (pos, parent) until every path stops at a byte
  // element (collected into scratch_stacks_) or at the end of the root (scratch_accept_).
  void close(uint32_t pos, uint32_t parent);
  void run_closure();
  uint32_t intern_state();

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> state_ids_;
  std::vector<int32_t> trans_;  // states × 256, -1 = not computed yet
  uint32_t initial_ = 0;

  // scratch for closure
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> seen_;
  std::vector<uint32_t> scratch_stacks_;
  bool scratch_accept_ = false;
};

// A cursor into an Automaton. Copying a matcher is O(1) (it shares the automaton), which is how
// callers checkpoint and roll back, e.g. for speculative decoding.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);
  explicit GrammarMatcher(std::shared_ptr<Automaton> a);

  // Feeds bytes; on refusal returns false and leaves the state as it was.
  bool accept_bytes(std::string_view bytes);
  bool can_end() const { return a_->can_end(state_); }
  bool is_complete() const { return a_->is_complete(state_); }
  uint32_t state() const { return state_; }
  void set_state(uint32_t s) { state_ = s; }
  Automaton& automaton() const { return *a_; }
  const std::shared_ptr<Automaton>& automaton_ptr() const { return a_; }

 private:
  std::shared_ptr<Automaton> a_;
  uint32_t state_;
};

}  // namespace rapid::constrain
