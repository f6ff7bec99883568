#include "cache/kv_events.h"

namespace rapid::cache {

uint64_t block_hash(std::optional<uint64_t> parent, const int32_t* tokens, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  auto mix = [&h](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;  // FNV-1a 64 prime
    }
  };
  if (parent) mix(*parent, 8);
  for (size_t i = 0; i < n; ++i) mix(uint32_t(tokens[i]), 4);
  return h & 0x7fffffffffffffffull;
}

}  // namespace rapid::cache
