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
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;
  const Vocab& vocab() const { return vocab_; }

 private:
  void merge_word(std::string_view w, std::vector<int32_t>& out) const;
  Vocab vocab_;
  MergeTable merges_;
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
