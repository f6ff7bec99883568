#include "model/paged_kv.h"

#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "compute/ops.h"
#include "model/batch_helpers.h"

namespace rapid::model {

namespace {
tensor::DType view_dtype(cache::KvDType t) {
  switch (t) {
    case cache::KvDType::F32: return tensor::DType::F32;
    case cache::KvDType::F16: return tensor::DType::F16;
    case cache::KvDType::BF16: return tensor::DType::BF16;
    default: throw Error(std::string("paged KV: attention has no kernel for KV dtype ") + cache::kv_dtype_name(t));
  }
}
}  // namespace

cache::BlockShape kv_block_shape_for(int32_t num_layers, int64_t kv_heads, int64_t head_dim, int32_t block_size,
                                     tensor::DType kv_dtype) {
  cache::BlockShape sh;
  sh.num_layers = num_layers;
  sh.kv_heads = static_cast<int32_t>(kv_heads);
  sh.head_dim = static_cast<int32_t>(head_dim);
  sh.block_size = block_size;
  switch (kv_dtype) {
    case tensor::DType::F16: sh.dtype = cache::KvDType::F16; break;
    case tensor::DType::BF16: sh.dtype = cache::KvDType::BF16; break;
    case tensor::DType::F32: sh.dtype = cache::KvDType::F32; break;
    default: throw Error(std::string("KV cache dtype must be f16, bf16 or f32, not ") + tensor::dtype_name(kv_dtype));
  }
  sh.validate();
  return sh;
}

PagedKvState::PagedKvState(std::shared_ptr<cache::BlockPool> pool, int64_t max_tokens)
    : pool_(std::move(pool)), table_(pool_ ? pool_->shape().block_size : 1), max_tokens_(max_tokens) {
  if (!pool_) throw Error("paged KV: no block pool");
  const int32_t bs = pool_->shape().block_size;
  // KvView splits a position into (block, slot) with a shift and a mask.
  if (bs <= 0 || (bs & (bs - 1)) != 0)
    throw Error("paged KV: block_size " + std::to_string(bs) + " is not a power of two");
  if (max_tokens <= 0) throw Error("paged KV: max_tokens must be positive");
  view_dtype(pool_->shape().dtype);  // refuse int8 pages up front, not at the first forward
}

PagedKvState::~PagedKvState() {
  // Never throws in practice (our references are valid); a destructor must not propagate anyway.
  try { table_.release(*pool_); } catch (...) {}
}

void PagedKvState::truncate(int64_t n) {
  if (n < 0 || n > length())
    throw Error("paged KV: cannot truncate " + std::to_string(length()) + " tokens to " + std::to_string(n));
  table_.truncate(*pool_, n);
  bases_.resize(table_.blocks().size());
}

void PagedKvState::adopt_prefix(const std::vector<cache::BlockId>& blocks, int64_t length) {
  if (length > max_tokens_)
    throw Error("paged KV: prefix of " + std::to_string(length) + " tokens exceeds the capacity of " +
                std::to_string(max_tokens_));
  table_.adopt_prefix(*pool_, blocks, length);
  bases_.clear();
  for (cache::BlockId b : table_.blocks()) bases_.push_back(pool_->data(b));
}

int64_t PagedKvState::blocks_needed(int64_t n) const {
  if (n <= 0) return 0;
  const int64_t bs = table_.block_size(), len = length();
  int64_t need = (len + n + bs - 1) / bs - (len + bs - 1) / bs;
  // The first append into a shared, partly filled last page copies it (copy-on-write).
  if (len % bs != 0 && pool_->refcount(table_.blocks().back()) > 1) ++need;
  return need;
}

void PagedKvState::append(int64_t n) {
  if (n < 0) throw Error("paged KV: negative append");
  if (length() + n > max_tokens_)
    throw Error("paged KV: " + std::to_string(length() + n) + " tokens exceed the sequence's capacity of " +
                std::to_string(max_tokens_));
  const int64_t need = blocks_needed(n);
  if (need > static_cast<int64_t>(pool_->free_count()))
    throw Error("paged KV: pool has " + std::to_string(pool_->free_count()) + " free blocks, " +
                std::to_string(need) + " needed for " + std::to_string(n) + " tokens");
  // With enough free blocks checked above, append_token cannot fail (the pool is single-threaded);
  // the old block count bounds what can change: only the last old block (COW) and new ones.
  const size_t old_blocks = table_.blocks().size();
  for (int64_t i = 0; i < n; ++i)
    if (!table_.append_token(*pool_)) throw Error("paged KV: pool exhausted during append");
  const auto& blocks = table_.blocks();
  bases_.resize(blocks.size());
  for (size_t i = old_blocks ? old_blocks - 1 : 0; i < blocks.size(); ++i) bases_[i] = pool_->data(blocks[i]);
}

void PagedKvState::release() {
  table_.release(*pool_);
  bases_.clear();
}

compute::KvView PagedKvState::layer(int32_t l) {
  const cache::BlockShape& sh = pool_->shape();
  const size_t elem = cache::kv_dtype_bytes(sh.dtype);
  compute::KvView v;
  v.dtype = view_dtype(sh.dtype);
  v.blocks = bases_.data();
  v.k_off = sh.k_offset(l);
  v.v_off = sh.v_offset(l);
  int32_t shift = 0;
  while ((int32_t(1) << shift) < sh.block_size) ++shift;
  v.block_shift = shift;
  v.slot_mask = sh.block_size - 1;
  v.slot_stride = static_cast<size_t>(sh.head_dim) * elem;
  v.head_stride = static_cast<size_t>(sh.block_size) * v.slot_stride;
  return v;
}

}  // namespace rapid::model

namespace rapid::model {

int64_t admit_paged_batch(const BatchEntry* entries, size_t count, int64_t vocab,
                          const std::function<void(const cache::BlockShape&)>& check_pool,
                          std::vector<PagedSeq>& seqs) {
  seqs.resize(count);
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const BatchEntry& e = entries[i];
    auto* kv = dynamic_cast<PagedKvState*>(e.state);
    if (!kv) throw Error("forward: sequence state was not created by this model");
    if (e.n <= 0) throw Error("forward: no tokens");
    if (!e.tokens || (!e.logits && !e.hidden)) throw Error("forward: null tokens, or neither logits nor hidden");
    check_pool(kv->pool().shape());
    for (size_t j = 0; j < i; ++j)
      if (seqs[j].kv == kv) throw Error("forward_batch: the same sequence appears twice in a batch");
    const int64_t pos0 = kv->length();
    if (pos0 + e.n > kv->capacity())
      throw Error("forward: " + std::to_string(pos0 + e.n) + " tokens exceed the sequence's capacity of " +
                  std::to_string(kv->capacity()));
    for (int64_t t = 0; t < e.n; ++t)
      if (e.tokens[t] < 0 || e.tokens[t] >= vocab)
        throw Error("forward: token id " + std::to_string(e.tokens[t]) + " outside the vocabulary (size " +
                    std::to_string(vocab) + ")");
    seqs[i] = PagedSeq{kv, pos0, total, e.n};
    total += e.n;
  }
  // Free blocks per pool, summed over the entries that share it (the usual case: one pool).
  for (size_t i = 0; i < count; ++i) {
    cache::BlockPool* pool = &seqs[i].kv->pool();
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = &seqs[j].kv->pool() == pool;
    if (seen) continue;
    int64_t need = 0;
    for (size_t j = i; j < count; ++j)
      if (&seqs[j].kv->pool() == pool) need += seqs[j].kv->blocks_needed(entries[j].n);
    if (need > static_cast<int64_t>(pool->free_count()))
      throw Error("forward: KV pool has " + std::to_string(pool->free_count()) + " free blocks, " +
                  std::to_string(need) + " needed");
  }
  for (size_t i = 0; i < count; ++i) {
    try {
      seqs[i].kv->append(entries[i].n);
    } catch (...) {
      for (size_t j = 0; j < i; ++j) seqs[j].kv->truncate(seqs[j].pos0);  // undo the others
      throw;
    }
  }
  return total;
}

}  // namespace rapid::model

namespace rapid::model {

std::unique_ptr<SequenceState> private_paged_state(const Model& m, int64_t max_tokens) {
  constexpr int32_t kBlock = 16;
  if (max_tokens <= 0) throw Error("new_state: max_tokens must be positive");
  const cache::BlockShape sh = m.kv_block_shape(kBlock);
  const uint64_t blocks = static_cast<uint64_t>((max_tokens + kBlock - 1) / kBlock);
  auto pool = std::make_shared<cache::BlockPool>(sh, blocks * sh.block_bytes());
  return std::make_unique<PagedKvState>(std::move(pool), max_tokens);
}

void scatter_logits(const BatchEntry* entries, size_t count, const float* packed, int64_t vocab) {
  int64_t r = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!entries[i].logits) continue;
    const int64_t k = entries[i].all_logits ? entries[i].n : 1;
    std::memcpy(entries[i].logits, packed + r * vocab, static_cast<size_t>(k * vocab) * sizeof(float));
    r += k;
  }
}

void check_block_shape(const cache::BlockShape& got, const cache::BlockShape& want, const std::string& model) {
  if (got.num_layers != want.num_layers || got.kv_heads != want.kv_heads || got.head_dim != want.head_dim ||
      got.dtype != want.dtype)
    throw Error("KV pool shape (" + std::to_string(got.num_layers) + " x " + std::to_string(got.kv_heads) + " x " +
                std::to_string(got.head_dim) + ", " + cache::kv_dtype_name(got.dtype) + ") does not match the " + model +
                " model's (" + std::to_string(want.num_layers) + " x " + std::to_string(want.kv_heads) + " x " +
                std::to_string(want.head_dim) + ", " + cache::kv_dtype_name(want.dtype) + ")");
}

std::unique_ptr<SequenceState> checked_paged_state(const Model& m, std::shared_ptr<cache::BlockPool> pool,
                                                   int64_t max_tokens, const std::string& model) {
  if (!pool) throw Error("new_paged_state: no block pool");
  check_block_shape(pool->shape(), m.kv_block_shape(pool->shape().block_size), model);
  return std::make_unique<PagedKvState>(std::move(pool), max_tokens);
}

void store_kv_segments(const std::vector<PagedSeq>& seqs, int32_t layer, int64_t kv_heads, int64_t head_dim,
                       int64_t q_width, const float* q, const float* k, const float* v, float* out,
                       std::vector<compute::AttentionSegment>& segs) {
  const int64_t kw = kv_heads * head_dim;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PagedSeq& s = seqs[i];
    compute::AttentionSegment& sg = segs[i];
    sg.kv = s.kv->layer(layer);
    sg.q = q + s.row * q_width;
    sg.out = out + s.row * q_width;
    sg.n = s.n;
    sg.pos0 = s.pos0;
    compute::kv_store(sg.kv, s.pos0, s.n, kv_heads, head_dim, k + s.row * kw, v + s.row * kw);
  }
}

void final_head(const FinalHead& h, const BatchEntry* entries, size_t count, const std::vector<PagedSeq>& seqs,
                const float* x, float* xn, std::vector<float>& logits, ExecContext& ctx) {
  const int64_t H = h.hidden;
  int64_t rows = 0;
  for (size_t i = 0; i < count; ++i) {
    const PagedSeq& s = seqs[i];
    for (int64_t t = 0; t < s.n; ++t) {
      const bool want = entries[i].logits && (entries[i].all_logits || t == s.n - 1);
      if (!entries[i].hidden && !want) continue;
      float* out = xn + rows * H;
      compute::rms_norm(x + (s.row + t) * H, h.norm.data(), H, h.eps, false, out);
      if (entries[i].hidden) std::memcpy(entries[i].hidden + t * H, out, static_cast<size_t>(H) * sizeof(float));
      if (want) ++rows;
    }
  }
  if (rows == 0) return;
  logits.resize(static_cast<size_t>(rows * h.vocab));
  h.lm_head(xn, rows, logits.data(), ctx);
  if (h.softcap > 0)
    for (float& v : logits) v = std::tanh(v / h.softcap) * h.softcap;
  scatter_logits(entries, count, logits.data(), h.vocab);
}

}  // namespace rapid::model
