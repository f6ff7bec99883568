// Per-step token masks for constrained decoding.
//
// How the engine uses it, per request with a response_format / forced tool call:
//
//   auto vocab = VocabIndex::from_tokenizer(tok);          // once per model, shareable
//   TokenConstraint c(grammar_from_json_schema(schema), vocab);
//   while (!c.finished()) {
//     float* logits = model.forward(...);
//     SampleResult r = sampler.sample(logits, vocab_size, prompt, generated, &c.mask());
//     if (!c.accept(r.token)) { /* cannot happen when sampling under the mask */ }
//     if (is_eos(r.token)) break;
//   }
//
// mask()[id] is true exactly when the bytes of token `id` keep the text a prefix of some string
// of the grammar (so the walk never reaches a dead end: grammars are checked so that every live
// state can still be completed), or when `id` is an EOS token and the text so far is complete.
// Special tokens other than EOS are never allowed. Once finished() (EOS accepted, or the grammar
// admits nothing more), the mask allows EOS only and the engine should stop (with no EOS id in
// the VocabIndex the mask is then empty: pass the format's end-of-turn ids to from_tokenizer).
// Checkpoints: checkpoint()/rollback(), or copy the TokenConstraint (cheap: caches are shared).
// Building: grammar_from_json_schema / grammar_for_json_object (constrain/json_schema.h) for
// response_format, parse_gbnf(gbnf_with_tool_args(tool_call_grammar(...).gbnf, tools, ...)) for
// forced tool calls. Compile errors are GrammarError (answer 400 or run unconstrained); mask()
// can also throw GrammarError for a pathologically ambiguous grammar (bounded work, no hang).
// Not thread-safe: one TokenConstraint (and its copies) per request, used by one thread.
// Cost (bench/constrain_bench.cpp, 50k vocab): ~0.5 ms CPU for a mask inside a free string,
// < 0.05 ms elsewhere; masks are cached per parser state.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/matcher.h"

namespace rapid::tok {
class Tokenizer;
}

namespace rapid::constrain {

// Tokens as a byte trie in pre-order, so one linear scan with subtree skipping visits exactly
// the token prefixes the grammar allows.
class TokenTrie {
 public:
  TokenTrie() = default;
  TokenTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& ids);
  // Sets the bit of every token whose bytes lead from `state` to a live state.
  void walk(Automaton& a, uint32_t state, std::vector<uint64_t>& bits) const;
  size_t nodes() const { return byte_.size(); }

 private:
  // node i consumes byte_[i] at depth_[i] (1-based); its subtree ends at end_[i]
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> tok_begin_;  // tokens ending at node i: tok_ids_[tok_begin_[i]..[i+1])
  std::vector<int32_t> tok_ids_;
  size_t max_depth_ = 0;
};

// The vocabulary as seen by constrained decoding.
class VocabIndex {
 public:
  // token_bytes[id] = raw bytes of token id; `special[id]` true for control tokens (never
  // allowed inside the grammar); `eos` = ids allowed only when the grammar can end.
  VocabIndex(std::vector<std::string> token_bytes, std::vector<bool> special,
             std::vector<int32_t> eos);
  // EOS = tok.eos_ids() plus `extra_end_ids` (e.g. a chat format's end-of-turn token when it
  // differs from the tokenizer's EOS), so the constrained text can end with any of them.
  static std::shared_ptr<const VocabIndex> from_tokenizer(const tok::Tokenizer& tok,
                                                          const std::vector<int32_t>& extra_end_ids = {});

  size_t vocab_size() const { return bytes_.size(); }
  const std::string& token_bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool is_special(int32_t id) const { return special_[size_t(id)]; }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_; }

  // Sets bit `id` of `bits` (vocab-sized, zeroed by the caller) for every non-special token
  // whose bytes lead from `state` to a live state.
  void allowed(Automaton& a, uint32_t state, std::vector<uint64_t>& bits) const;
  size_t trie_nodes() const { return all_.nodes(); }

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::vector<int32_t> eos_;
  TokenTrie all_;
  // Shortcut for free text such as the inside of a JSON string, where most steps are spent: a
  // state that loops to itself on every "plain" byte (printable ASCII but '"' and '\') allows
  // every token made only of plain bytes, so only the other tokens need a walk.
  TokenTrie not_plain_;
  std::vector<uint64_t> plain_bits_;
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> vocab);

  // Vocab-sized, true = allowed; valid until the next accept(). Cached per parser state.
  const std::vector<bool>& mask();
  // The same as packed 64-bit words (bit id%64 of word id/64).
  const std::vector<uint64_t>& mask_bits();
  // Advances by one token. Returns false (state unchanged) if the token is not allowed.
  bool accept(int32_t token);
  // Advances by raw text (e.g. an assistant prefix already in the prompt). False = refused,
  // state unchanged.
  bool accept_text(std::string_view bytes) { return !finished_ && matcher_.accept_bytes(bytes); }
  bool finished() const { return finished_ || matcher_.is_complete(); }
  bool can_end() const { return matcher_.can_end(); }
  const GrammarMatcher& matcher() const { return matcher_; }

  struct Checkpoint {
    uint32_t state;
    bool finished;
  };
  Checkpoint checkpoint() const { return {matcher_.state(), finished_}; }
  void rollback(const Checkpoint& c);

 private:
  struct Shared;  // mask cache, shared by copies
  std::shared_ptr<const VocabIndex> vocab_;
  GrammarMatcher matcher_;
  bool finished_ = false;
  std::shared_ptr<Shared> shared_;
  std::vector<bool> mask_;
  uint64_t mask_key_ = UINT64_MAX;  // which (state, finished) mask_ holds
};

}  // namespace rapid::constrain
