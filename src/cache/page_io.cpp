#include "cache/page_io.h"

#include <cstring>

namespace rapid::cache {

std::vector<uint8_t> gather_pages(const BlockPool& pool, const std::vector<BlockId>& blocks, size_t reserve_extra) {
  size_t bb = pool.shape().block_bytes();
  std::vector<uint8_t> out;
  out.reserve(blocks.size() * bb + reserve_extra);
  out.resize(blocks.size() * bb);
  for (size_t i = 0; i < blocks.size(); ++i) std::memcpy(out.data() + i * bb, pool.data(blocks[i]), bb);
  return out;
}

std::optional<std::vector<BlockId>> scatter_pages(BlockPool& pool, const std::vector<uint8_t>& pages) {
  size_t bb = pool.shape().block_bytes();
  if (pages.size() % bb != 0 || pages.size() / bb > pool.free_count()) return std::nullopt;
  std::vector<BlockId> ids;
  for (size_t off = 0; off < pages.size(); off += bb) {
    BlockId b = *pool.allocate();  // free_count checked above
    std::memcpy(pool.data(b), pages.data() + off, bb);
    ids.push_back(b);
  }
  return ids;
}

}  // namespace rapid::cache
