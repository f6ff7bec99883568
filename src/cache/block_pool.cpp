#include "cache/block_pool.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"

namespace rapid::cache {

size_t kv_dtype_bytes(KvDType t) {
  switch (t) {
    case KvDType::F32: return 4;
    case KvDType::F16:
    case KvDType::BF16: return 2;
    case KvDType::Int8: return 1;
  }
  throw Error("unknown KV dtype");
}

const char* kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::F32: return "f32";
    case KvDType::F16: return "f16";
    case KvDType::BF16: return "bf16";
    case KvDType::Int8: return "int8";
  }
  return "?";
}

size_t BlockShape::plane_elems() const { return size_t(kv_heads) * block_size * head_dim; }
size_t BlockShape::plane_bytes() const { return plane_elems() * kv_dtype_bytes(dtype); }
size_t BlockShape::scale_bytes() const {
  return dtype == KvDType::Int8 ? size_t(num_layers) * 2 * kv_heads * sizeof(float) : 0;
}
size_t BlockShape::block_bytes() const {
  size_t raw = size_t(num_layers) * 2 * plane_bytes() + scale_bytes();
  return (raw + 63) / 64 * 64;
}
size_t BlockShape::slot_offset(int32_t head, int32_t slot) const {
  return (size_t(head) * block_size + slot) * head_dim * kv_dtype_bytes(dtype);
}
void BlockShape::validate() const {
  if (num_layers <= 0 || kv_heads <= 0 || head_dim <= 0 || block_size <= 0)
    throw Error("KV block shape: layers, kv_heads, head_dim and block_size must be positive");
}

uint64_t system_ram_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return pages > 0 && psz > 0 ? uint64_t(pages) * uint64_t(psz) : 0;
}

uint64_t parse_memory_size(const std::string& text, uint64_t total_ram) {
  auto bad = [&](const char* why) { return Error("--kv-cache-memory '" + text + "': " + why); };
  size_t i = 0;
  while (i < text.size() && std::isspace((unsigned char)text[i])) ++i;
  size_t start = i;
  bool dot = false;
  while (i < text.size() && (std::isdigit((unsigned char)text[i]) || (text[i] == '.' && !dot))) {
    if (text[i] == '.') dot = true;
    ++i;
  }
  if (i == start || (i == start + 1 && dot)) throw bad("expected a number");
  double v = std::strtod(text.substr(start, i - start).c_str(), nullptr);
  while (i < text.size() && std::isspace((unsigned char)text[i])) ++i;
  std::string unit;
  while (i < text.size() && !std::isspace((unsigned char)text[i]))
    unit += char(std::tolower((unsigned char)text[i++]));
  while (i < text.size() && std::isspace((unsigned char)text[i])) ++i;
  if (i != text.size()) throw bad("trailing text");
  double mult;
  if (unit.empty()) {
    if (v <= 1.0) {  // fraction of RAM
      if (v <= 0) throw bad("must be positive");
      if (total_ram == 0) throw bad("cannot determine system RAM for a fraction");
      return uint64_t(v * double(total_ram));
    }
    mult = 1;
  } else if (unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else throw bad("unknown unit (use B, KiB, MiB, GiB, TiB or a fraction like 0.25)");
  double bytes = v * mult;
  if (bytes < 1) throw bad("must be at least one byte");
  if (bytes > 1.8e19) throw bad("too large");
  return uint64_t(bytes);
}

BlockPool::BlockPool(const BlockShape& shape, uint64_t arena_bytes) : shape_(shape) {
  shape_.validate();
  block_bytes_ = shape_.block_bytes();
  uint64_t n = arena_bytes / block_bytes_;
  if (n == 0) throw Error("KV cache memory " + std::to_string(arena_bytes) +
                          " bytes is smaller than one block (" + std::to_string(block_bytes_) + " bytes)");
  if (n > uint64_t(INT32_MAX)) n = INT32_MAX;
  // Untouched pages of the arena stay virtual until a block is first written.
  arena_ = static_cast<uint8_t*>(::operator new(n * block_bytes_, std::align_val_t(64)));
  refs_.assign(n, 0);
  free_.reserve(n);
  for (int64_t i = int64_t(n) - 1; i >= 0; --i) free_.push_back(BlockId(i));
}

BlockPool::~BlockPool() { ::operator delete(arena_, std::align_val_t(64)); }

void BlockPool::check(BlockId b) const {
  if (b < 0 || size_t(b) >= refs_.size()) throw Error("KV block id " + std::to_string(b) + " out of range");
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_.empty()) { ++failed_; return std::nullopt; }
  BlockId b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  ++allocs_;
  return b;
}

void BlockPool::incref(BlockId b) {
  check(b);
  if (refs_[b] <= 0) throw Error("incref of free KV block " + std::to_string(b));
  ++refs_[b];
}

void BlockPool::decref(BlockId b) {
  check(b);
  if (refs_[b] <= 0) throw Error("decref of free KV block " + std::to_string(b));
  if (--refs_[b] == 0) { free_.push_back(b); ++frees_; }
}

int32_t BlockPool::refcount(BlockId b) const { check(b); return refs_[b]; }
uint8_t* BlockPool::data(BlockId b) { check(b); return arena_ + size_t(b) * block_bytes_; }
const uint8_t* BlockPool::data(BlockId b) const { check(b); return arena_ + size_t(b) * block_bytes_; }

PoolStats BlockPool::stats() const {
  PoolStats s;
  s.total_blocks = refs_.size();
  s.free_blocks = free_.size();
  s.used_blocks = s.total_blocks - s.free_blocks;
  for (int32_t r : refs_) s.shared_blocks += r > 1;
  s.allocations = allocs_; s.frees = frees_; s.failed_allocations = failed_;
  s.block_bytes = block_bytes_;
  s.arena_bytes = block_bytes_ * refs_.size();
  return s;
}

void BlockTable::adopt_prefix(BlockPool& pool, const std::vector<BlockId>& blocks, int64_t length) {
  if (!blocks_.empty() || len_ != 0) throw Error("adopt_prefix on a non-empty block table");
  if (length < 0 || size_t((length + bs_ - 1) / bs_) != blocks.size())
    throw Error("adopt_prefix: block count does not match length");
  for (BlockId b : blocks) pool.incref(b);
  blocks_ = blocks;
  len_ = length;
}

std::optional<Slot> BlockTable::append_token(BlockPool& pool) {
  int32_t off = int32_t(len_ % bs_);
  if (off == 0) {
    auto b = pool.allocate();
    if (!b) return std::nullopt;
    blocks_.push_back(*b);
  } else if (pool.refcount(blocks_.back()) > 1) {
    auto b = pool.allocate();
    if (!b) return std::nullopt;
    std::memcpy(pool.data(*b), pool.data(blocks_.back()), pool.shape().block_bytes());
    pool.decref(blocks_.back());
    blocks_.back() = *b;
  }
  ++len_;
  return Slot{blocks_.back(), off};
}

void BlockTable::truncate(BlockPool& pool, int64_t n) {
  if (n < 0 || n > len_) throw Error("BlockTable::truncate out of range");
  size_t keep = size_t((n + bs_ - 1) / bs_);
  while (blocks_.size() > keep) { pool.decref(blocks_.back()); blocks_.pop_back(); }
  len_ = n;
}

void BlockTable::release(BlockPool& pool) { truncate(pool, 0); }

}  // namespace rapid::cache
