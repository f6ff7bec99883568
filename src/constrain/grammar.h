// A context-free grammar over BYTES, the form every constraint (GBNF text, JSON schema, tool-call
// formats) is compiled to. Unicode character classes are lowered to UTF-8 byte sequences when the
// grammar is built, so the matcher and the vocabulary trie work byte by byte and tokens that end
// in the middle of a UTF-8 character need no special case.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace rapid::constrain {

// Malformed grammar text or schema, or a grammar the matcher cannot run (left recursion, a rule
// that can never finish). The message names the rule / position / schema path.
class GrammarError : public Error {
 public:
  using Error::Error;
};

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  bool operator==(const ByteSet&) const = default;
};

// Flat form: every alternative of every rule is a run of elements in `elems` ended by kEnd, so a
// parser position is one index. Repetitions and groups were already turned into helper rules.
struct Grammar {
  enum Kind : uint8_t { kEnd, kBytes, kRef };
  struct Elem {
    Kind kind;
    uint32_t arg;  // kBytes: index into `sets`; kRef: index into `rules`
  };
  struct Rule {
    std::string name;
    std::vector<uint32_t> alts;  // start index in `elems` of each alternative
  };
  std::vector<Elem> elems;
  std::vector<ByteSet> sets;
  std::vector<Rule> rules;
  uint32_t root = 0;

  int find_rule(std::string_view name) const;  // -1 if absent
};

// Builds a Grammar from rules given as alternatives of symbol sequences, then checks it can run.
class GrammarBuilder {
 public:
  struct Sym {
    bool is_ref;
    uint32_t id;  // rule id or byte-set id
  };
  using Seq = std::vector<Sym>;

  uint32_t rule(std::string_view name);  // id of the rule (declared on first mention)
  uint32_t fresh_rule(std::string_view base);  // a new helper rule with a unique name
  void define(uint32_t rule, std::vector<Seq> alts);  // throws if defined twice
  bool defined(uint32_t rule) const { return defined_[rule]; }
  uint32_t byte_set(const ByteSet& s);
  Sym bytes(const ByteSet& s) { return {false, byte_set(s)}; }
  Sym ref(uint32_t rule) { return {true, rule}; }
  Seq literal(std::string_view bytes);
  const std::string& name(uint32_t rule) const { return names_[rule]; }
  size_t size() const { return total_syms_; }

  // Checks: every referenced rule is defined, no left recursion, every rule reachable from the
  // root can derive a finite string. Throws GrammarError otherwise.
  std::shared_ptr<const Grammar> build(std::string_view root);

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<Seq>> alts_;
  std::vector<bool> defined_;
  std::vector<ByteSet> sets_;
  struct SetHash {
    size_t operator()(const ByteSet& b) const {
      return size_t(b.w[0] * 0x9E3779B97F4A7C15ull ^ b.w[1] * 0xC2B2AE3D27D4EB4Full ^ b.w[2] * 0x165667B19E3779F9ull ^ b.w[3]);
    }
  };
  std::unordered_map<ByteSet, uint32_t, SetHash> set_ids_;
  size_t total_syms_ = 0;
  uint32_t fresh_counter_ = 0;
};

// Code-point ranges (inclusive) → the UTF-8 byte-range sequences that encode exactly those code
// points (surrogates excluded). Each inner vector holds 1–4 byte ranges, one per byte.
using ByteRange = std::pair<uint8_t, uint8_t>;
std::vector<std::vector<ByteRange>> utf8_sequences(std::vector<std::pair<uint32_t, uint32_t>> ranges);

// Encodes one code point as UTF-8 (throws GrammarError for surrogates / > U+10FFFF).
std::string utf8_encode(uint32_t cp);

}  // namespace rapid::constrain
