#include "cache/radix_cache.h"

#include <algorithm>
#include <iterator>
#include <queue>

#include "common/error.h"

namespace rapid::cache {

struct RadixNode {
  RadixNode* parent = nullptr;
  std::vector<std::unique_ptr<RadixNode>> children;
  std::vector<Token> tokens;    // edge label; starts at a block boundary
  std::vector<BlockId> blocks;  // ceil(tokens.size() / block_size), one pool reference each
  int32_t locks = 0;
  uint64_t last_access = 0;
  int64_t start = 0;            // absolute position of the edge's first token
  // Recurrent checkpoints at positions in (start, start + tokens.size()], ascending.
  std::vector<std::shared_ptr<StateSnapshot>> states;
  std::vector<uint64_t> hashes;  // chained hash of each full block of the edge (while recording events)
  size_t announced = 0;          // leading blocks of `hashes` announced as stored
  int64_t deepest = 0;           // deepest checkpoint position in this subtree (0: none)
};

namespace {
// n's deepest checkpoint from its own and its children's (which must be current).
void refresh_deepest(RadixNode* n) {
  n->deepest = n->states.empty() ? 0 : n->states.back()->position;
  for (auto& c : n->children) n->deepest = std::max(n->deepest, c->deepest);
}

size_t lcp(const std::vector<Token>& edge, const std::vector<Token>& q, size_t pos) {
  size_t n = std::min(edge.size(), q.size() - pos), i = 0;
  while (i < n && edge[i] == q[pos + i]) ++i;
  return i;
}

// Child with the longest common prefix with q[pos..]; siblings may share < block_size tokens.
// With `state`: the deepest checkpoint any child holds within its common prefix with q (a
// sibling that diverges sooner may hold one the best child does not).
RadixNode* best_child(RadixNode* node, const std::vector<Token>& q, size_t pos, size_t& best_len,
                      std::shared_ptr<StateSnapshot>* state = nullptr) {
  RadixNode* best = nullptr;
  best_len = 0;
  for (auto& c : node->children) {
    if (c->tokens[0] != q[pos]) continue;
    size_t l = lcp(c->tokens, q, pos);
    if (l > best_len) { best_len = l; best = c.get(); }
    if (state)
      for (auto& st : c->states)
        if (st->position <= c->start + int64_t(l) && (!*state || st->position > (*state)->position)) *state = st;
  }
  return best;
}
}  // namespace

RadixCache::RadixCache(BlockPool& pool)
    : pool_(pool), bs_(pool.shape().block_size), root_(std::make_unique<RadixNode>()) {}

RadixCache::~RadixCache() { free_subtree(root_.get()); }

void RadixCache::free_subtree(RadixNode* n) {
  for (auto& c : n->children) free_subtree(c.get());
  for (BlockId b : n->blocks) pool_.decref(b);
  n->blocks.clear();
}

PrefixMatch RadixCache::match_prefix(const std::vector<Token>& tokens, bool count) {
  PrefixMatch m;
  if (count) st_.queried_tokens += tokens.size();
  RadixNode* node = root_.get();
  size_t pos = 0;
  uint64_t now = ++clock_;
  while (pos < tokens.size()) {
    size_t l;
    RadixNode* c = best_child(node, tokens, pos, l, &m.state);
    if (!c) break;
    c->last_access = now;
    size_t nb = (l + bs_ - 1) / bs_;
    m.blocks.insert(m.blocks.end(), c->blocks.begin(), c->blocks.begin() + nb);
    pos += l;
    m.node = c;
    if (l < c->tokens.size()) break;
    node = c;
  }
  m.matched = int64_t(pos);
  if (count) st_.hit_tokens += pos;
  return m;
}

RadixNode* RadixCache::split(RadixNode* child, size_t at) {
  auto mid = std::make_unique<RadixNode>();
  RadixNode* p = child->parent;
  mid->parent = p;
  mid->locks = child->locks;  // every lock through child also passes through mid
  mid->last_access = child->last_access;
  mid->start = child->start;
  child->start += int64_t(at);
  auto first_kept = std::find_if(child->states.begin(), child->states.end(),
                                 [&](auto& st) { return st->position > child->start; });
  mid->states.assign(std::make_move_iterator(child->states.begin()), std::make_move_iterator(first_kept));
  child->states.erase(child->states.begin(), first_kept);
  mid->tokens.assign(child->tokens.begin(), child->tokens.begin() + at);
  child->tokens.erase(child->tokens.begin(), child->tokens.begin() + at);
  size_t nb = at / bs_;
  mid->blocks.assign(child->blocks.begin(), child->blocks.begin() + nb);
  child->blocks.erase(child->blocks.begin(), child->blocks.begin() + nb);
  size_t nh = std::min(nb, child->hashes.size());
  mid->hashes.assign(child->hashes.begin(), child->hashes.begin() + nh);
  child->hashes.erase(child->hashes.begin(), child->hashes.begin() + nh);
  // Announcements follow their blocks; the states that moved to mid end at or before child's
  // start, so they never covered child's blocks and coverage is unchanged by the split.
  mid->announced = std::min(child->announced, nh);
  child->announced -= mid->announced;
  mid->deepest = child->deepest;
  refresh_deepest(child);
  RadixNode* raw = mid.get();
  for (auto& slot : p->children) {
    if (slot.get() == child) {
      mid->children.push_back(std::move(slot));
      slot = std::move(mid);
      break;
    }
  }
  child->parent = raw;
  ++nodes_;
  return raw;
}

int64_t RadixCache::insert(const std::vector<Token>& tokens, const std::vector<BlockId>& blocks,
                           std::shared_ptr<StateSnapshot> state) {
  size_t n = tokens.size();
  if (blocks.size() != (n + bs_ - 1) / bs_)
    throw Error("RadixCache::insert: " + std::to_string(blocks.size()) + " blocks for " +
                std::to_string(n) + " tokens (block size " + std::to_string(bs_) + ")");
  if (state && (state->position < 1 || state->position > int64_t(n)))
    throw Error("RadixCache::insert: recurrent checkpoint position " + std::to_string(state->position) +
                " outside the " + std::to_string(n) + " inserted tokens");
  ++st_.inserts;
  const int64_t added = insert_kv(tokens, blocks);
  if (state) attach(tokens, std::move(state));
  return added;
}

int64_t RadixCache::insert_kv(const std::vector<Token>& tokens, const std::vector<BlockId>& blocks) {
  const size_t n = tokens.size();
  RadixNode* node = root_.get();
  size_t pos = 0;
  uint64_t now = ++clock_;
  while (pos < n) {
    size_t l;
    RadixNode* c = best_child(node, tokens, pos, l);
    if (c) c->last_access = now;
    if (c && l == n - pos) return 0;  // already cached in full
    if (c && l >= size_t(bs_)) {
      size_t s = l / bs_ * bs_;
      if (s < c->tokens.size()) c = split(c, s);
      node = c;
      pos += s;
      continue;
    }
    auto leaf = std::make_unique<RadixNode>();
    leaf->parent = node;
    leaf->last_access = now;
    leaf->start = int64_t(pos);
    leaf->tokens.assign(tokens.begin() + pos, tokens.end());
    leaf->blocks.assign(blocks.begin() + pos / bs_, blocks.end());
    for (BlockId b : leaf->blocks) pool_.incref(b);
    cached_blocks_ += leaf->blocks.size();
    RadixNode* raw = leaf.get();
    node->children.push_back(std::move(leaf));
    ++nodes_;
    if (record_events_) {
      hash_blocks(node, raw);
      sync_events(raw);
    }
    return int64_t(n - pos);
  }
  return 0;
}

// After insert_kv every position of `tokens` is in the tree: find the node holding the
// checkpoint's position and keep the checkpoint there, in position order.
void RadixCache::attach(const std::vector<Token>& tokens, std::shared_ptr<StateSnapshot> state) {
  RadixNode* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    size_t l;
    RadixNode* c = best_child(node, tokens, pos, l);
    if (!c) break;
    pos += l;
    if (int64_t(pos) >= state->position) {
      auto& v = c->states;
      auto it = std::lower_bound(v.begin(), v.end(), state->position,
                                 [](auto& s, int64_t p) { return s->position < p; });
      if (it != v.end() && (*it)->position == state->position) {
        checkpoint_bytes_ -= (*it)->bytes.size();
        *it = std::move(state);
      } else {
        ++checkpoints_;
        it = v.insert(it, std::move(state));
      }
      checkpoint_bytes_ += (*it)->bytes.size();
      if (record_events_) sync_events(c);
      return;
    }
    if (l < c->tokens.size()) break;
    node = c;
  }
  throw Error("RadixCache: no cached node holds the checkpoint's position");  // insert_kv broke its promise
}

void RadixCache::drop_states(RadixNode* n) {
  for (auto& st : n->states) checkpoint_bytes_ -= st->bytes.size();
  checkpoints_ -= n->states.size();
  st_.evicted_checkpoints += n->states.size();
  n->states.clear();
}

size_t RadixCache::evict_checkpoints(size_t max_bytes) {
  if (checkpoint_bytes_ <= max_bytes) return 0;
  std::vector<RadixNode*> with;
  std::vector<RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    RadixNode* n = stack.back();
    stack.pop_back();
    if (!n->states.empty()) with.push_back(n);
    for (auto& c : n->children) stack.push_back(c.get());
  }
  std::sort(with.begin(), with.end(), [](auto* a, auto* b) { return a->last_access < b->last_access; });
  size_t dropped = 0;
  for (RadixNode* n : with) {
    // Shallowest first within a node: a deeper checkpoint skips more of a later prompt.
    while (!n->states.empty() && checkpoint_bytes_ > max_bytes) {
      checkpoint_bytes_ -= n->states.front()->bytes.size();
      n->states.erase(n->states.begin());
      --checkpoints_;
      ++st_.evicted_checkpoints;
      ++dropped;
    }
    if (record_events_) sync_events(n);
    if (checkpoint_bytes_ <= max_bytes) break;
  }
  return dropped;
}

void RadixCache::lock(RadixNode* node) {
  for (RadixNode* n = node; n && n != root_.get(); n = n->parent) ++n->locks;
}

void RadixCache::unlock(RadixNode* node) {
  for (RadixNode* n = node; n && n != root_.get(); n = n->parent) {
    if (n->locks <= 0) throw Error("RadixCache::unlock without a matching lock");
    --n->locks;
  }
}

size_t RadixCache::evict(size_t n_blocks) {
  using Item = std::pair<uint64_t, RadixNode*>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  std::vector<RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    RadixNode* n = stack.back();
    stack.pop_back();
    if (n != root_.get() && n->children.empty() && n->locks == 0) heap.push({n->last_access, n});
    for (auto& c : n->children) stack.push_back(c.get());
  }
  size_t freed = 0;
  while (freed < n_blocks && !heap.empty()) {
    RadixNode* n = heap.top().second;
    heap.pop();
    for (BlockId b : n->blocks) pool_.decref(b);
    drop_states(n);
    if (record_events_) record_removed(n, 0);
    freed += n->blocks.size();
    cached_blocks_ -= n->blocks.size();
    RadixNode* p = n->parent;
    auto& sib = p->children;
    sib.erase(std::find_if(sib.begin(), sib.end(), [n](auto& c) { return c.get() == n; }));
    --nodes_;
    if (record_events_ && p != root_.get()) sync_events(p);  // n's checkpoints may have covered p's blocks
    if (p != root_.get() && p->children.empty() && p->locks == 0) heap.push({p->last_access, p});
  }
  st_.evicted_blocks += freed;
  return freed;
}

bool RadixCache::ensure_free(size_t n) {
  while (pool_.free_count() < n)
    if (evict(n - pool_.free_count()) == 0) return false;
  return true;
}

// Inner nodes cover whole blocks, so the block before a new leaf is its parent's last one.
void RadixCache::hash_blocks(const RadixNode* parent, RadixNode* leaf) {
  std::optional<uint64_t> prev;
  if (parent != root_.get() && !parent->hashes.empty()) prev = parent->hashes.back();
  for (size_t i = 0; i < leaf->tokens.size() / size_t(bs_); ++i) {
    prev = block_hash(prev, leaf->tokens.data() + i * bs_, size_t(bs_));
    leaf->hashes.push_back(*prev);
  }
}

// Leading full blocks of n's edge a request could resume from: all of them, or for a hybrid those
// ending at or before the deepest checkpoint below n (n->start is block-aligned).
size_t RadixCache::announceable(const RadixNode* n) const {
  if (!need_checkpoint_) return n->hashes.size();
  const int64_t ends = (n->deepest - n->start) / bs_;
  return ends <= 0 ? 0 : std::min(n->hashes.size(), size_t(ends));
}

// Brings the announcements of n and its ancestors in line with what they can serve after n's
// blocks, checkpoints or children changed: removals deepest first, stores shallowest first, so a
// subscriber always sees a block's parent before it and loses a child before its parent.
void RadixCache::sync_events(RadixNode* n) {
  std::vector<RadixNode*> path;
  for (RadixNode* x = n; x && x != root_.get(); x = x->parent) {
    refresh_deepest(x);
    path.push_back(x);
  }
  for (RadixNode* x : path)
    if (announceable(x) < x->announced) record_removed(x, announceable(x));
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    RadixNode* x = *it;
    const size_t want = announceable(x);
    if (want <= x->announced) continue;
    KvEvent e;
    if (x->announced > 0) e.parent_hash = x->hashes[x->announced - 1];
    else if (x->parent != root_.get() && !x->parent->hashes.empty()) e.parent_hash = x->parent->hashes.back();
    e.block_hashes.assign(x->hashes.begin() + x->announced, x->hashes.begin() + want);
    e.token_ids.assign(x->tokens.begin() + x->announced * bs_, x->tokens.begin() + want * bs_);
    x->announced = want;
    events_.push_back(std::move(e));
  }
}

// Withdraws n's announced blocks past the first `keep`.
void RadixCache::record_removed(RadixNode* n, size_t keep) {
  if (n->announced <= keep) return;
  KvEvent e;
  e.kind = KvEventKind::Removed;
  e.block_hashes.assign(n->hashes.begin() + keep, n->hashes.begin() + n->announced);
  n->announced = keep;
  events_.push_back(std::move(e));
}

std::vector<std::vector<Token>> RadixCache::sequences() const {
  std::vector<std::vector<Token>> out;
  std::vector<std::pair<const RadixNode*, size_t>> stack{{root_.get(), 0}};  // node, prefix length
  std::vector<Token> path;
  while (!stack.empty()) {
    auto [n, len] = stack.back();
    stack.pop_back();
    path.resize(len);
    path.insert(path.end(), n->tokens.begin(), n->tokens.end());
    if (n->children.empty() && n != root_.get()) out.push_back(path);
    for (auto& c : n->children) stack.push_back({c.get(), path.size()});
  }
  return out;
}

std::vector<std::vector<Token>> RadixCache::checkpoint_prefixes() const {
  std::vector<std::vector<Token>> out;
  std::vector<std::pair<const RadixNode*, std::vector<Token>>> stack{{root_.get(), {}}};
  while (!stack.empty()) {
    auto [n, path] = std::move(stack.back());
    stack.pop_back();
    path.insert(path.end(), n->tokens.begin(), n->tokens.end());
    for (auto& st : n->states) out.emplace_back(path.begin(), path.begin() + st->position);
    for (auto& c : n->children) stack.push_back({c.get(), path});
  }
  return out;
}

size_t RadixCache::evictable_leaves() const {
  size_t k = 0;
  std::vector<const RadixNode*> stack{root_.get()};
  while (!stack.empty()) {
    const RadixNode* n = stack.back();
    stack.pop_back();
    if (n != root_.get() && n->children.empty() && n->locks == 0) ++k;
    for (auto& c : n->children) stack.push_back(c.get());
  }
  return k;
}

RadixStats RadixCache::stats() const {
  RadixStats s = st_;
  s.nodes = nodes_;
  s.cached_blocks = cached_blocks_;
  s.checkpoints = checkpoints_;
  s.checkpoint_bytes = checkpoint_bytes_;
  return s;
}

}  // namespace rapid::cache
