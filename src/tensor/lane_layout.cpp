#include "tensor/lane_layout.h"

#include <cstring>

namespace rapid::tensor {

bool q8_0_lanes_fit(int64_t cols) { return cols > 0 && cols % (kQK * kLaneGroupBlocks) == 0; }

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

}  // namespace rapid::tensor
