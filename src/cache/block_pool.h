// Paged KV memory: one arena carved into fixed-size blocks of `block_size` token slots for every
// layer. Sequences hold blocks through a BlockTable; the radix prefix cache shares them read-only
// by reference count. Layout of one block (so an attention kernel can read a page in place):
//   for layer l in [0, num_layers):  K[kv_heads][block_size][head_dim], then V[kv_heads][block_size][head_dim]
//   then, for Int8 only: float scales[num_layers][2][kv_heads] (one scale per head per page).
// Allocation and free are O(1) (a free-list stack); nothing here is thread-safe: the scheduler
// owns the pool from one thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rapid::cache {

enum class KvDType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, Int8 = 3 };
size_t kv_dtype_bytes(KvDType t);
const char* kv_dtype_name(KvDType t);

using BlockId = int32_t;

struct BlockShape {
  int32_t num_layers = 1, kv_heads = 1, head_dim = 64, block_size = 16;
  KvDType dtype = KvDType::F16;

  size_t plane_elems() const;   // kv_heads * block_size * head_dim: one K (or V) page of a layer
  size_t plane_bytes() const;
  size_t scale_bytes() const;   // Int8 scale table at the end of the block (0 otherwise)
  size_t block_bytes() const;   // whole block, rounded up to 64 bytes so pages stay aligned
  size_t k_offset(int32_t layer) const { return size_t(layer) * 2 * plane_bytes(); }
  size_t v_offset(int32_t layer) const { return k_offset(layer) + plane_bytes(); }
  // Offset of element (head, slot, 0) inside a K or V plane.
  size_t slot_offset(int32_t head, int32_t slot) const;
  void validate() const;  // throws rapid::Error on non-positive sizes
};

// "--kv-cache-memory": "2GiB", "512MiB", "1.5G", "1000000" (bytes) or a fraction of RAM "0.25"
// (a plain number <= 1 is a fraction). Throws rapid::Error with the offending text otherwise.
uint64_t parse_memory_size(const std::string& text, uint64_t total_ram_bytes);
uint64_t system_ram_bytes();

struct PoolStats {
  size_t total_blocks = 0, free_blocks = 0, used_blocks = 0, shared_blocks = 0;
  uint64_t allocations = 0, frees = 0, failed_allocations = 0;
  size_t block_bytes = 0, arena_bytes = 0;
};

class BlockPool {
 public:
  BlockPool(const BlockShape& shape, uint64_t arena_bytes);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block with refcount 1, or nullopt when the arena is exhausted (caller may evict and retry).
  std::optional<BlockId> allocate();
  void incref(BlockId b);
  void decref(BlockId b);  // returns the block to the free list at zero
  int32_t refcount(BlockId b) const;

  size_t free_count() const { return free_.size(); }
  size_t total_blocks() const { return refs_.size(); }
  const BlockShape& shape() const { return shape_; }
  uint8_t* data(BlockId b);
  const uint8_t* data(BlockId b) const;
  PoolStats stats() const;

 private:
  void check(BlockId b) const;
  BlockShape shape_;
  size_t block_bytes_;
  uint8_t* arena_ = nullptr;
  std::vector<int32_t> refs_;
  std::vector<BlockId> free_;
  uint64_t allocs_ = 0, frees_ = 0, failed_ = 0;
};

// Where the next token's K/V go.
struct Slot {
  BlockId block;
  int32_t offset;  // slot index inside the block
};

// One sequence's pages: block i holds tokens [i*block_size, (i+1)*block_size).
class BlockTable {
 public:
  explicit BlockTable(int32_t block_size) : bs_(block_size) {}
  // Adopt shared prefix blocks (e.g. from the radix cache): takes one reference on each.
  void adopt_prefix(BlockPool& pool, const std::vector<BlockId>& blocks, int64_t length);
  // Reserve the slot for one more token. A fresh block is allocated at a block boundary; a shared
  // (refcount > 1) partly-filled last block is copied first (copy-on-write) so shared pages are
  // never written. nullopt when the pool is exhausted (the table is unchanged).
  std::optional<Slot> append_token(BlockPool& pool);
  void truncate(BlockPool& pool, int64_t n);  // drops whole blocks past n
  void release(BlockPool& pool);              // drops every reference
  const std::vector<BlockId>& blocks() const { return blocks_; }
  int64_t length() const { return len_; }
  int32_t block_size() const { return bs_; }

 private:
  int32_t bs_;
  std::vector<BlockId> blocks_;
  int64_t len_ = 0;
};

}  // namespace rapid::cache
