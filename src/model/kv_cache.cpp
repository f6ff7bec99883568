#include "model/kv_cache.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace rapid {

void KvCache::Free::operator()(uint8_t* p) const { std::free(p); }

KvCache::KvCache(int64_t n_layers, int64_t max_tokens, int64_t n_kv_heads, int64_t head_dim, DType dtype)
    : max_tokens_(max_tokens), n_kv_heads_(n_kv_heads), head_dim_(head_dim), dtype_(dtype) {
  if (dtype == DType::F32) elem_ = 4;
  else if (dtype == DType::F16 || dtype == DType::BF16) elem_ = 2;
  else throw Error("kv cache: dtype must be f32, f16 or bf16");
  if (max_tokens <= 0) throw Error("kv cache: max_tokens must be positive");
  size_t bytes = static_cast<size_t>(max_tokens) * n_kv_heads * head_dim * elem_;
  for (int64_t l = 0; l < n_layers; ++l) {
    // malloc (not a zeroing container) so untouched pages are never made resident.
    auto* k = static_cast<uint8_t*>(std::malloc(bytes));
    auto* v = static_cast<uint8_t*>(std::malloc(bytes));
    if (!k || !v) {
      std::free(k);
      std::free(v);
      throw Error("kv cache: out of memory for " + std::to_string(max_tokens) + " tokens");
    }
    k_.emplace_back(k);
    v_.emplace_back(v);
  }
}

void KvCache::truncate(int64_t n) {
  if (n < 0 || n > length_) throw Error("kv cache: cannot truncate to " + std::to_string(n));
  length_ = n;
}

KvView KvCache::layer(int64_t l) const {
  KvView v;
  v.dtype = dtype_;
  v.k = k_[l].get();
  v.v = v_[l].get();
  v.head_stride = static_cast<size_t>(head_dim_) * elem_;
  v.pos_stride = v.head_stride * n_kv_heads_;
  return v;
}

}  // namespace rapid
