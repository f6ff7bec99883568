// Weight layouts repacked at load time for the lane kernels (compute/kernels.h, QDotV). A GGUF
// Q8_0 row keeps each 32-element block's f16 scale beside its quants (34-byte blocks), so a lane
// kernel spends most of a decode step's instructions gathering 16-byte pieces of 8 blocks into
// "lane = block" order; that work also stalls the loads that stream the row from memory.
// DType::Q8_0_LANES stores a row the way the kernel consumes it:
//   for each group g of 8 blocks (block 8g + k in lane k): 256 bytes at 256·g, where byte
//   32·m + 4·k + i is quant 4·m + i of block 8g + k plus 128 (u8, the kernels' vpdpbusd operand);
//   then the nb blocks' f16 scales in block order at 32·nb.
// DType::Q4_0_LANES likewise: group g's 128 nibble bytes at 128·g, where byte 64·h + 4·(8·e + k) + i
// is qs byte 4·(2·h + e) + i of block 8g + k (the dword pairs the Q4_0 kernel gathers; nibbles as
// stored, q + 8), then the scales at 16·nb.
// The same values and the same row size (34 / 18 bytes per block), so strides, views and row
// offsets are unchanged; only rows of whole groups (nb % 8 == 0) are repacked.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/quant_formats.h"

namespace rapid::tensor {

constexpr int kLaneGroupBlocks = 8;

// Whether a row of `cols` elements can be stored in a *_LANES layout (whole 8-block groups).
bool lanes_fit(int64_t cols);
// One row: nb blocks from src into dst (row_bytes(Q8_0, 32·nb) bytes; nb % 8 == 0).
void repack_q8_0_lanes(const BlockQ8_0* src, int64_t nb, uint8_t* dst);
// Block b of a Q8_0_LANES row of nb blocks back to GGUF's form (dequantization, AMX panels).
BlockQ8_0 q8_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b);
// The same for Q4_0 / Q4_0_LANES.
void repack_q4_0_lanes(const BlockQ4_0* src, int64_t nb, uint8_t* dst);
BlockQ4_0 q4_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b);

}  // namespace rapid::tensor
