// Vocabulary trie and the per-step token mask.
#include "constrain/token_constraint.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace rapid::constrain {

namespace {
constexpr size_t kMaxCachedMasks = 2048;  // ~12 MB at 50k vocab; cleared when full
}

namespace {
bool is_plain(uint8_t b) { return b >= 0x20 && b < 0x7F && b != '"' && b != '\\'; }
}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& bytes, const std::vector<int32_t>& ids) {
  std::vector<int32_t> order = ids;
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
  // Each token adds nodes past its common prefix with the previous (sorted) token; `open`
  // holds the node index per depth of the current path.
  std::vector<uint32_t> open;
  std::vector<std::vector<int32_t>> node_tokens;
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes[size_t(id)];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    while (open.size() > lcp) {
      end_[open.back()] = uint32_t(byte_.size());
      open.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      open.push_back(uint32_t(byte_.size()));
      byte_.push_back(uint8_t(s[d]));
      depth_.push_back(uint16_t(d + 1));
      end_.push_back(0);
      node_tokens.emplace_back();
    }
    node_tokens[open.back()].push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    end_[open.back()] = uint32_t(byte_.size());
    open.pop_back();
  }
  tok_begin_.reserve(byte_.size() + 1);
  for (const auto& t : node_tokens) {
    tok_begin_.push_back(uint32_t(tok_ids_.size()));
    tok_ids_.insert(tok_ids_.end(), t.begin(), t.end());
  }
  tok_begin_.push_back(uint32_t(tok_ids_.size()));
}

void TokenTrie::walk(Automaton& a, uint32_t state, std::vector<uint64_t>& bits) const {
  std::vector<uint32_t> st(max_depth_ + 1);
  st[0] = state;
  const size_t n = byte_.size();
  for (size_t i = 0; i < n;) {
    uint32_t s = a.step(st[depth_[i] - 1u], byte_[i]);
    if (s == Automaton::kDead) {
      i = end_[i];  // no token under this prefix can be allowed
      continue;
    }
    st[depth_[i]] = s;
    for (uint32_t k = tok_begin_[i]; k < tok_begin_[i + 1]; ++k) {
      uint32_t id = uint32_t(tok_ids_[k]);
      bits[id >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
}

VocabIndex::VocabIndex(std::vector<std::string> token_bytes, std::vector<bool> special,
                       std::vector<int32_t> eos)
    : bytes_(std::move(token_bytes)), special_(std::move(special)), eos_(std::move(eos)) {
  special_.resize(bytes_.size(), false);
  for (int32_t e : eos_)
    if (e < 0 || size_t(e) >= bytes_.size())
      throw Error("constrain: EOS id " + std::to_string(e) + " outside the vocabulary");
  std::vector<int32_t> all, not_plain;
  plain_bits_.assign((bytes_.size() + 63) / 64, 0);
  for (size_t i = 0; i < bytes_.size(); ++i) {
    const std::string& b = bytes_[i];
    if (special_[i] || b.empty() || b.size() >= 65535 || is_eos(int32_t(i))) continue;
    all.push_back(int32_t(i));
    if (std::all_of(b.begin(), b.end(), [](char c) { return is_plain(uint8_t(c)); }))
      plain_bits_[i >> 6] |= uint64_t(1) << (i & 63);
    else
      not_plain.push_back(int32_t(i));
  }
  all_ = TokenTrie(bytes_, all);
  not_plain_ = TokenTrie(bytes_, not_plain);
}

std::shared_ptr<const VocabIndex> VocabIndex::from_tokenizer(const tok::Tokenizer& tok,
                                                             const std::vector<int32_t>& extra_end_ids) {
  const int64_t n = tok.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    special[size_t(i)] = tok.is_special(int32_t(i));
    if (!special[size_t(i)]) bytes[size_t(i)] = tok.token_bytes(int32_t(i));
  }
  std::vector<int32_t> eos = tok.eos_ids();
  for (int32_t e : extra_end_ids)
    if (std::find(eos.begin(), eos.end(), e) == eos.end()) eos.push_back(e);
  return std::make_shared<VocabIndex>(std::move(bytes), std::move(special), std::move(eos));
}

bool VocabIndex::is_eos(int32_t id) const {
  return std::find(eos_.begin(), eos_.end(), id) != eos_.end();
}

void VocabIndex::allowed(Automaton& a, uint32_t state, std::vector<uint64_t>& bits) const {
  bool loops = true;
  for (unsigned b = 0x20; b < 0x7F && loops; ++b)
    if (is_plain(uint8_t(b)) && a.step(state, uint8_t(b)) != state) loops = false;
  if (!loops) {
    all_.walk(a, state, bits);
    return;
  }
  for (size_t w = 0; w < bits.size(); ++w) bits[w] |= plain_bits_[w];
  not_plain_.walk(a, state, bits);
}

struct TokenConstraint::Shared {
  std::unordered_map<uint64_t, std::vector<uint64_t>> masks;
};

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> g,
                                 std::shared_ptr<const VocabIndex> vocab)
    : vocab_(std::move(vocab)), matcher_(std::move(g)), shared_(std::make_shared<Shared>()) {}

const std::vector<uint64_t>& TokenConstraint::mask_bits() {
  const bool done = finished();
  const uint64_t key = (uint64_t(matcher_.state()) << 1) | (done ? 1 : 0);
  auto it = shared_->masks.find(key);
  if (it != shared_->masks.end()) return it->second;
  if (shared_->masks.size() >= kMaxCachedMasks) shared_->masks.clear();
  std::vector<uint64_t> bits((vocab_->vocab_size() + 63) / 64, 0);
  if (!done) vocab_->allowed(matcher_.automaton(), matcher_.state(), bits);
  if (matcher_.can_end())
    for (int32_t e : vocab_->eos_ids()) bits[size_t(e) >> 6] |= uint64_t(1) << (e & 63);
  return shared_->masks.emplace(key, std::move(bits)).first->second;
}

const std::vector<bool>& TokenConstraint::mask() {
  const uint64_t key = (uint64_t(matcher_.state()) << 1) | (finished() ? 1 : 0);
  if (key == mask_key_) return mask_;
  const auto& bits = mask_bits();
  const size_t n = vocab_->vocab_size();
  mask_.assign(n, false);
  for (size_t w = 0; w < bits.size(); ++w) {
    uint64_t x = bits[w];
    while (x) {
      size_t id = w * 64 + size_t(__builtin_ctzll(x));
      mask_[id] = true;
      x &= x - 1;
    }
  }
  mask_key_ = key;
  return mask_;
}

bool TokenConstraint::accept(int32_t token) {
  if (token < 0 || size_t(token) >= vocab_->vocab_size()) return false;
  if (vocab_->is_eos(token)) {
    if (!matcher_.can_end()) return false;
    finished_ = true;
    return true;
  }
  if (finished() || vocab_->is_special(token)) return false;
  const std::string& b = vocab_->token_bytes(token);
  if (b.empty()) return false;
  return matcher_.accept_bytes(b);
}

void TokenConstraint::rollback(const Checkpoint& c) {
  matcher_.set_state(c.state);
  finished_ = c.finished;
}

}  // namespace rapid::constrain
