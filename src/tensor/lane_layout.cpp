#include "tensor/lane_layout.h"

#include <cstring>

namespace rapid::tensor {

bool lanes_fit(int64_t cols) { return cols > 0 && cols % (kQK * kLaneGroupBlocks) == 0; }

void repack_q8_0_lanes(const BlockQ8_0* src, int64_t nb, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* g = dst + 256 * (b / kLaneGroupBlocks) + 4 * (b % kLaneGroupBlocks);
    for (int m = 0; m < 8; ++m) {  // dword m of the block, each byte + 128
      uint32_t v;
      std::memcpy(&v, src[b].qs + 4 * m, 4);
      v ^= 0x80808080u;
      std::memcpy(g + 32 * m, &v, 4);
    }
    std::memcpy(dst + 32 * nb + 2 * b, &src[b].d, 2);
  }
}

BlockQ8_0 q8_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b) {
  BlockQ8_0 out;
  const uint8_t* g = row + 256 * (b / kLaneGroupBlocks) + 4 * (b % kLaneGroupBlocks);
  for (int m = 0; m < 8; ++m)
    for (int i = 0; i < 4; ++i) out.qs[4 * m + i] = static_cast<int8_t>(g[32 * m + i] ^ 0x80);
  std::memcpy(&out.d, row + 32 * nb + 2 * b, 2);
  return out;
}

// Byte offset of qs dword d (0..3) of block b inside its Q4_0_LANES group.
inline size_t q4_0_dword_at(int64_t b, int d) {
  const int k = static_cast<int>(b % kLaneGroupBlocks), h = d / 2, e = d % 2;
  return 128 * static_cast<size_t>(b / kLaneGroupBlocks) + 64 * h + 4 * (8 * e + k);
}

void repack_q4_0_lanes(const BlockQ4_0* src, int64_t nb, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int d = 0; d < 4; ++d) std::memcpy(dst + q4_0_dword_at(b, d), src[b].qs + 4 * d, 4);
    std::memcpy(dst + 16 * nb + 2 * b, &src[b].d, 2);
  }
}

BlockQ4_0 q4_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b) {
  BlockQ4_0 out;
  for (int d = 0; d < 4; ++d) std::memcpy(out.qs + 4 * d, row + q4_0_dword_at(b, d), 4);
  std::memcpy(&out.d, row + 16 * nb + 2 * b, 2);
  return out;
}

}  // namespace rapid::tensor
