#include "tokenizer/vocab.h"

#include <cstring>

#include <xxhash.h>

#include "common/error.h"

namespace rapid::tok {

static inline uint64_t hash_piece(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

// Power-of-two capacity keeping the load factor at most 3/4 (linear probing stays short).
static size_t capacity_for(size_t n) {
  size_t cap = 16;
  while (cap * 3 < n * 4) cap <<= 1;
  return cap;
}

void Vocab::reserve(size_t n, size_t total_chars) {
  entries_.reserve(n);
  if (total_chars) chars_.reserve(total_chars);
  if (capacity_for(n) > slots_.size()) rehash(capacity_for(n));
}

void Vocab::rehash(size_t cap) {
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (uint32_t e = 0; e < entries_.size(); ++e) {
    uint64_t h = hash_piece(std::string_view(chars_).substr(entries_[e].off, entries_[e].len));
    size_t i = h & mask_;
    while (slots_[i].entry != kEmpty) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), e};
  }
}

bool Vocab::emplace(std::string_view piece, int32_t id) {
  if (capacity_for(entries_.size() + 1) > slots_.size()) rehash(capacity_for(std::max<size_t>(16, entries_.size() * 2)));
  uint64_t h = hash_piece(piece);
  uint32_t tag = static_cast<uint32_t>(h >> 32);
  size_t i = h & mask_;
  for (; slots_[i].entry != kEmpty; i = (i + 1) & mask_) {
    const Entry& e = entries_[slots_[i].entry];
    if (slots_[i].tag == tag && std::string_view(chars_).substr(e.off, e.len) == piece) return false;
  }
  if (chars_.size() + piece.size() > UINT32_MAX || entries_.size() >= UINT32_MAX - 1) throw Error("vocabulary too large");
  slots_[i] = Slot{tag, static_cast<uint32_t>(entries_.size())};
  entries_.push_back(Entry{static_cast<uint32_t>(chars_.size()), static_cast<uint32_t>(piece.size()), id});
  chars_.append(piece);
  return true;
}

int32_t Vocab::find(std::string_view piece) const {
  if (slots_.empty()) return -1;
  uint64_t h = hash_piece(piece);
  uint32_t tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask_; slots_[i].entry != kEmpty; i = (i + 1) & mask_) {
    if (slots_[i].tag != tag) continue;
    const Entry& e = entries_[slots_[i].entry];
    if (e.len == piece.size() && std::memcmp(chars_.data() + e.off, piece.data(), piece.size()) == 0) return e.id;
  }
  return -1;
}

void Vocab::shrink_to_fit() {
  chars_.shrink_to_fit();
  entries_.shrink_to_fit();
  if (capacity_for(entries_.size()) < slots_.size()) {
    std::vector<Slot>().swap(slots_);
    rehash(capacity_for(entries_.size()));
  }
}

void PieceTable::resize(size_t n) { spans_.resize(n); }

void PieceTable::set(size_t id, std::string_view piece) {
  if (id >= spans_.size()) spans_.resize(id + 1);
  if (chars_.size() + piece.size() >= UINT32_MAX) throw Error("vocabulary too large");
  Span& s = spans_[id];
  if (s.len == piece.size() && std::string_view(chars_).substr(s.off, s.len) == piece) return;
  s = Span{static_cast<uint32_t>(chars_.size()), static_cast<uint32_t>(piece.size())};
  chars_.append(piece);
}

}  // namespace rapid::tok
