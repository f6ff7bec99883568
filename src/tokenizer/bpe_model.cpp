#include <queue>

#include <xxhash.h>

#include "common/error.h"
#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {

static inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
static inline size_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return static_cast<size_t>(k);
}

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
}

void MergeTable::insert(int32_t a, int32_t b, int32_t rank, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) {
    auto old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    for (auto& s : old)
      if (s.key != ~0ull) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.rank, s.id);
  }
  uint64_t k = pair_key(a, b);
  for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == k) return;
    if (slots_[i].key == ~0ull) {
      slots_[i] = Slot{k, rank, id};
      ++count_;
      return;
    }
  }
}

void MergeTable::shrink_to_fit() {
  size_t cap = 16;
  while (cap < count_ * 2) cap <<= 1;
  if (cap >= slots_.size()) return;
  auto old = std::move(slots_);
  reserve(count_);
  for (auto& s : old)
    if (s.key != ~0ull) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.rank, s.id);
}

bool MergeTable::find(int32_t a, int32_t b, int32_t& rank, int32_t& id) const {
  if (slots_.empty()) return false;
  uint64_t k = pair_key(a, b);
  for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key == k) { rank = s.rank; id = s.id; return true; }
    if (s.key == ~0ull) return false;
  }
}

BpeModel::BpeModel(Vocab vocab, MergeTable merges, BpeOptions opt)
    : vocab_(std::move(vocab)), merges_(std::move(merges)), opt_(std::move(opt)) {
  merges_.shrink_to_fit();
  init();
}

BpeModel::BpeModel(Vocab vocab, PieceMerges merges, BpeOptions opt)
    : vocab_(std::move(vocab)), merges_(std::move(merges.extra)), by_piece_(true), pm_(std::move(merges)),
      opt_(std::move(opt)) {
  merges_.shrink_to_fit();
  pm_.rank.shrink_to_fit();
  pm_.split.shrink_to_fit();
  if (!pm_.split.empty() && pm_.split.size() != pm_.rank.size()) throw Error("BPE: merge splits and ranks differ in size");
  // id -> vocab entry; none needed when entry e is id e for every id (a vocab without repeats).
  bool identity = vocab_.size() == pm_.rank.size();
  for (size_t e = 0; identity && e < vocab_.size(); ++e) identity = vocab_.entry_id(e) == static_cast<int32_t>(e);
  n_ids_ = pm_.rank.size();
  if (!identity) {
    piece_entry_.assign(n_ids_, ~0u);
    for (size_t e = 0; e < vocab_.size(); ++e) {
      int32_t id = vocab_.entry_id(e);
      if (id >= 0 && static_cast<size_t>(id) < n_ids_) piece_entry_[id] = static_cast<uint32_t>(e);
    }
  }
  init();
}

bool BpeModel::find_merge(int32_t a, int32_t b, int32_t& rank, int32_t& id, std::string& buf) const {
  if (!by_piece_) return merges_.find(a, b, rank, id);
  const size_t n = n_ids_;
  if (a < 0 || b < 0 || static_cast<size_t>(a) >= n || static_cast<size_t>(b) >= n) return false;
  const uint32_t ea = piece_entry_.empty() ? static_cast<uint32_t>(a) : piece_entry_[a];
  const uint32_t eb = piece_entry_.empty() ? static_cast<uint32_t>(b) : piece_entry_[b];
  if (ea == ~0u || eb == ~0u) return false;
  std::string_view pa = vocab_.entry_piece(ea), pb = vocab_.entry_piece(eb);
  if (pa.empty() || pb.empty()) return false;
  const bool spm = pm_.split.empty();
  if (spm) {
    // The vocab split each token only at character boundaries, stepping from its first byte.
    size_t k = uni::utf8_len(pa[0]);
    while (k < pa.size()) k += uni::utf8_len(pa[k]);
    if (k != pa.size()) return false;
  }
  buf.assign(pa).append(pb);
  int32_t c = vocab_.find(buf);
  if (c < 0 || static_cast<size_t>(c) >= n) return false;
  if (!spm) {
    if (pm_.rank[c] >= 0 && pm_.split[c] == pa.size()) {
      rank = pm_.rank[c];
      id = c;
      return true;
    }
    return merges_.size() != 0 && merges_.find(a, b, rank, id);
  }
  if (pm_.rank[c] < 0) {
    auto it = pm_.alias.find(c);
    if (it == pm_.alias.end()) return false;
    c = it->second;
  }
  rank = pm_.rank[c];
  id = c;
  return rank >= 0;
}

void BpeModel::init() {
  vocab_.shrink_to_fit();
  if (!opt_.unk_token.empty()) {
    unk_id_ = vocab_.find(opt_.unk_token);
    if (unk_id_ < 0) throw Error("BPE unk_token '" + opt_.unk_token + "' is not in the vocab");
  }
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    std::string t = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    byte_ids_[b] = vocab_.find(t);
  }
  for (int c = 0; c < 128; ++c) {
    std::string t(1, static_cast<char>(c));
    ascii_ids_[c] = opt_.continuing_subword_prefix.empty() && opt_.end_of_word_suffix.empty() ? vocab_.find(t) : -1;
  }
}

void BpeModel::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  if (opt_.ignore_merges) {
    if (int32_t id = vocab_.find(w); id >= 0) { out.push_back(id); return; }
  }
  if (w.size() > kMaxCachedLen) { merge_word(w, out); return; }
  Shard& sh = cache_[XXH3_64bits(w.data(), w.size()) % kShards];
  std::string key(w);
  {
    std::lock_guard<std::mutex> lk(sh.mu);
    auto it = sh.map.find(key);
    if (it != sh.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  merge_word(w, out);
  std::lock_guard<std::mutex> lk(sh.mu);
  if (sh.map.size() < kShardCapacity) sh.map.emplace(std::move(key), std::vector<int32_t>(out.begin() + start, out.end()));
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  struct Sym { int32_t id; int32_t prev, next; bool alive; };
  std::vector<Sym> syms;
  syms.reserve(w.size());
  bool last_unk = false;
  bool affixes = !opt_.continuing_subword_prefix.empty() || !opt_.end_of_word_suffix.empty();
  std::string buf;
  for (size_t i = 0; i < w.size();) {
    size_t b = i;
    unsigned char c0 = w[i];
    size_t n = std::min(uni::utf8_len(c0), w.size() - i);
    i += n;
    int32_t id = -1;
    if (n == 1 && c0 < 128 && ascii_ids_[c0] >= 0) {
      id = ascii_ids_[c0];
    } else if (!affixes) {
      id = vocab_.find(w.substr(b, n));
    } else {
      buf.clear();
      if (b != 0) buf += opt_.continuing_subword_prefix;
      buf.append(w.substr(b, n));
      if (i == w.size()) buf += opt_.end_of_word_suffix;
      id = vocab_.find(buf);
    }
    if (id >= 0) {
      syms.push_back({id, 0, 0, true});
      last_unk = false;
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (size_t k = b; k < i; ++k) all = all && byte_ids_[static_cast<unsigned char>(w[k])] >= 0;
      if (all) {
        for (size_t k = b; k < i; ++k) syms.push_back({byte_ids_[static_cast<unsigned char>(w[k])], 0, 0, true});
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (!(opt_.fuse_unk && last_unk)) syms.push_back({unk_id_, 0, 0, true});
      last_unk = true;
    }
  }
  int32_t n = static_cast<int32_t>(syms.size());
  for (int32_t k = 0; k < n; ++k) {
    syms[k].prev = k - 1;
    syms[k].next = k + 1 < n ? k + 1 : -1;
  }
  if (n > 1) {
    // (rank, position, merged id): lowest rank first, then leftmost.
    struct Cand { int32_t rank, pos, id; };
    auto cmp = [](const Cand& x, const Cand& y) {
      return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
    };
    std::vector<Cand> heap;
    heap.reserve(n);
    std::string jbuf;  // find_merge's scratch (SentencePiece: the joined piece)
    int32_t r, id;
    for (int32_t k = 0; k + 1 < n; ++k)
      if (find_merge(syms[k].id, syms[k + 1].id, r, id, jbuf)) heap.push_back({r, k, id});
    std::make_heap(heap.begin(), heap.end(), cmp);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      Cand c = heap.back();
      heap.pop_back();
      Sym& left = syms[c.pos];
      if (!left.alive || left.next < 0) continue;
      Sym& right = syms[left.next];
      int32_t cr, cid;
      if (!find_merge(left.id, right.id, cr, cid, jbuf) || cid != c.id) continue;
      left.id = c.id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) syms[right.next].prev = c.pos;
      if (left.prev >= 0 && find_merge(syms[left.prev].id, left.id, r, id, jbuf)) {
        heap.push_back({r, left.prev, id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
      if (left.next >= 0 && find_merge(left.id, syms[left.next].id, r, id, jbuf)) {
        heap.push_back({r, c.pos, id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
  for (auto& s : syms)
    if (s.alive) out.push_back(s.id);
}

WordPieceModel::WordPieceModel(Vocab vocab, WordPieceOptions opt)
    : vocab_(std::move(vocab)), opt_(std::move(opt)) {
  vocab_.shrink_to_fit();
  unk_id_ = vocab_.find(opt_.unk_token);
  if (unk_id_ < 0) throw Error("WordPiece unk_token '" + opt_.unk_token + "' is not in the vocab");
}

void WordPieceModel::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  std::vector<size_t> bounds;  // code point boundaries
  for (size_t i = 0; i < w.size();) {
    bounds.push_back(i);
    i += std::min(uni::utf8_len(w[i]), w.size() - i);
  }
  bounds.push_back(w.size());
  if (bounds.size() - 1 > opt_.max_input_chars_per_word) { out.push_back(unk_id_); return; }
  std::vector<int32_t> res;
  size_t s = 0;
  std::string buf;
  while (s + 1 < bounds.size()) {
    int32_t found = -1;
    size_t e = bounds.size() - 1;
    for (; e > s; --e) {
      buf = s == 0 ? opt_.word_prefix : opt_.continuing_prefix;
      buf.append(w.substr(bounds[s], bounds[e] - bounds[s]));
      if (int32_t id = vocab_.find(buf); id >= 0) { found = id; break; }
    }
    if (found < 0) { out.push_back(unk_id_); return; }
    res.push_back(found);
    s = e;
  }
  out.insert(out.end(), res.begin(), res.end());
}

}  // namespace rapid::tok
