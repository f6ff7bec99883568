// Moves a prefix's KV pages between the block pool and a SnapshotEntry's byte buffer (whole
// blocks, in block-table order, each in the BlockPool layout) so snapshots restore bit-exactly.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cache/block_pool.h"

namespace rapid::cache {

std::vector<uint8_t> gather_pages(const BlockPool& pool, const std::vector<BlockId>& blocks, size_t reserve_extra = 0);
// Allocates one block per page and copies it in (refcount 1, owned by the caller). nullopt when
// the buffer is not a whole number of blocks or the pool runs out (nothing stays allocated).
std::optional<std::vector<BlockId>> scatter_pages(BlockPool& pool, const std::vector<uint8_t>& pages);

}  // namespace rapid::cache
