// The subword models: BPE (merges by rank, optional byte fallback / unk fusing / ignore_merges,
// with a thread-safe word cache) and WordPiece (greedy longest match).
#pragma once
#include <array>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/vocab.h"

namespace rapid::tok {

// Open-addressing map (a, b) -> (rank, merged id): the hot lookup of BPE.
class MergeTable {
 public:
  void reserve(size_t n);
  void insert(int32_t a, int32_t b, int32_t rank, int32_t id);  // keeps the first (lowest rank)
  void shrink_to_fit();  // after loading: the smallest table at load factor <= 1/2
  bool find(int32_t a, int32_t b, int32_t& rank, int32_t& id) const;
  size_t size() const { return count_; }

 private:
  struct Slot { uint64_t key = ~0ull; int32_t rank = 0, id = 0; };
  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
};

// The merges of a vocabulary in which a merge of (a, b) always yields the token whose piece is
// piece(a) + piece(b): looked up by joining the pieces and finding the result in the vocab, then
// checking it against what is stored per result id. 4-6 bytes per token, where a MergeTable of
// every pair costs 32 at its load factor (16 MB for gemma-3's 262k SentencePiece vocab, 8 MB for
// a 151k byte-level one). Lookups hash the joined piece instead of two ids.
struct PieceMerges {
  std::vector<int32_t> rank;  // per id: rank of the (first) merge yielding it; < 0 = none
  // Byte-level BPE: per id, the byte length of the left piece of that merge (pieces are distinct,
  // so the split fixes the pair); further pairs yielding an id that already has one go to `extra`
  // (rare). Empty (SentencePiece): any split of the result at a character boundary into two
  // pieces of the vocab is a merge, at the result's rank.
  std::vector<uint16_t> split;
  MergeTable extra;
  // SentencePiece: a piece listed twice is found at its first id; if only a later id with that
  // piece can be a merge result, merges yield that one.
  std::unordered_map<int32_t, int32_t> alias;
};

struct BpeOptions {
  std::string unk_token;  // "" = none
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
};

class BpeModel : public Model {
 public:
  BpeModel(Vocab vocab, MergeTable merges, BpeOptions opt);
  // Merges keyed by their result instead of a table of pairs (GGUF vocabularies, where every
  // merge result is the token whose piece is piece(a) + piece(b)): see PieceMerges.
  BpeModel(Vocab vocab, PieceMerges merges, BpeOptions opt);
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;
  const Vocab& vocab() const { return vocab_; }

 private:
  void init();
  void merge_word(std::string_view w, std::vector<int32_t>& out) const;
  bool find_merge(int32_t a, int32_t b, int32_t& rank, int32_t& id, std::string& buf) const;
  Vocab vocab_;
  MergeTable merges_;
  bool by_piece_ = false;               // the PieceMerges constructor
  PieceMerges pm_;                      // by_piece_ (its `extra` lives in merges_)
  std::vector<uint32_t> piece_entry_;   // by_piece_: id -> vocab entry (~0u: none); empty = identity
  size_t n_ids_ = 0;                    // by_piece_: ids with a rank
  BpeOptions opt_;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_;  // <0xXX> tokens, -1 if absent
  std::array<int32_t, 128> ascii_ids_;  // single ASCII chars (fast path), -1 if absent

  // Sharded cache of whole-word results (the server tokenizes from several threads).
  static constexpr size_t kShards = 16, kShardCapacity = 4096, kMaxCachedLen = 64;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<Shard, kShards> cache_;
};

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_prefix = "##";
  std::string word_prefix;  // GGUF BERT vocabularies mark word starts with "▁" instead
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel : public Model {
 public:
  WordPieceModel(Vocab vocab, WordPieceOptions opt);
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;

 private:
  Vocab vocab_;
  WordPieceOptions opt_;
  int32_t unk_id_ = -1;
};

}  // namespace rapid::tok
