// Compact token stores. A 262k-token vocabulary (gemma-3) held as std::string per token plus an
// unordered_map node per token cost ~25 MB; here all strings share one buffer and lookups go
// through a flat open-addressing index, a few bytes per token.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::tok {

// piece -> id. The first id added for a piece wins (as unordered_map::emplace did).
class Vocab {
 public:
  void reserve(size_t n, size_t total_chars = 0);
  bool emplace(std::string_view piece, int32_t id);  // false if the piece was already there
  int32_t find(std::string_view piece) const;        // -1 if absent
  size_t size() const { return entries_.size(); }
  void shrink_to_fit();  // drops growth slack once loading is done
  // Entries in insertion order, one per distinct piece (for models that need id -> piece).
  std::string_view entry_piece(size_t e) const { return std::string_view(chars_).substr(entries_[e].off, entries_[e].len); }
  int32_t entry_id(size_t e) const { return entries_[e].id; }

 private:
  struct Entry { uint32_t off, len; int32_t id; };
  struct Slot { uint32_t tag = 0, entry = kEmpty; };  // tag: high hash bits, skips most compares
  static constexpr uint32_t kEmpty = ~0u;
  void rehash(size_t cap);
  std::string chars_;
  std::vector<Entry> entries_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// id -> piece with holes (ids without a piece), all pieces in one buffer.
class PieceTable {
 public:
  void resize(size_t n);  // new ids are holes
  void reserve_chars(size_t n) { chars_.reserve(n); }
  void set(size_t id, std::string_view piece);  // resizes if needed; re-setting appends anew
  size_t size() const { return spans_.size(); }
  bool has(size_t id) const { return id < spans_.size() && spans_[id].len != kHole; }
  std::string_view get(size_t id) const {  // "" for holes and out-of-range ids
    return has(id) ? std::string_view(chars_).substr(spans_[id].off, spans_[id].len) : std::string_view();
  }
  void shrink_to_fit() { chars_.shrink_to_fit(); spans_.shrink_to_fit(); }

 private:
  struct Span { uint32_t off = 0, len = kHole; };
  static constexpr uint32_t kHole = ~0u;
  std::string chars_;
  std::vector<Span> spans_;
};

}  // namespace rapid::tok
