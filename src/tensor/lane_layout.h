// Weight layouts repacked at load time for the AVX-512 lane kernels (compute/kernels.h). A GGUF row
// keeps each 32-element block's scale beside its quants, so a lane kernel gathers 16-byte pieces of
// 8 blocks into "lane = block" order: many small loads per cache line, and enough instructions
// that one core keeps few of the row's lines in flight (decode streamed Q8_0 at 8.9 GB/s against
// 11.5 repacked; bench/README.md, "Weights in lane order").
//
// A *_LANES row of nb blocks has G = nb / 8 full groups and m = nb % 8 tail blocks:
//   [G groups' quants][m tail heads][m tail blocks' quants, as stored][8·G full-group heads]
// (heads in block order). The tail's heads and quants are each one masked load for the kernel,
// where GGUF's interleaved blocks needed a load per block and inserts: a 2-block tail cost a
// decode step as much as a whole group (bench/README.md, "Q5_K and Q3_K lane kernels; row tails").
// Q8_0_LANES: a group is 256 bytes; byte 32·d + 4·k + i is quant 4·d + i of block 8g + k plus 128
//   (u8, the vpdpbusd operand); heads are the f16 scales.
// Q4_0_LANES / Q4_1_LANES: a group is 128 bytes; qs dword d (0..3) of block 8g + k is at
//   64·(d / 2) + 4·(8·(d % 2) + k), the dword pairs the Q4 kernels gather (nibbles as stored); heads
//   are the f16 d (Q4_0) or the (d, m) pairs (Q4_1).
// IQ4_NL_LANES: Q4_0_LANES' bytes (IQ4_NL's blocks are Q4_0's in layout; the nibbles index its table).
// IQ4_XS_LANES: each super-block keeps d and its scales; its 128 qs bytes (Q4_0's 8 blocks' nibbles)
//   are in a Q4_0_LANES group's order.
// Q4_K_LANES: each super-block keeps d, dmin and its 12 scale bytes; its 128 qs bytes become two
//   halves P0, P1 where byte 4·L + i of P_h holds, low / high nibble, the values the Q4_K lane
//   kernel puts in byte i of lane L of its pairs h / h + 2 (sub-block k = L % 8 in lane k): the
//   Q4_0 / Q4_1 groups' order, so one unpacking serves all three.
// Q6_K_LANES: each super-block keeps its 16 scales and d; value v of lane L (sub-block k = L % 8,
//   dword e = L / 8 of the pair) byte i of the Q6_K lane kernel's pair j is element 32·k + 8·j +
//   4·e + i. Its low four bits are in byte 4·L + i of ql half j % 2 (low nibble for j < 2, high
//   for j >= 2), its top two at bits 2·j of qh byte 4·L + i: each pair is a shift or two and a
//   ternary-logic op, where the file's order needs two permutes, a variable shift and a rotate.
// MLX_LANES: an MLX affine 4- or 8-bit row of nb blocks of 32 elements (4·bits bytes: 4 or 8 dwords);
//   a full group's 32·bits bytes hold byte i of dword d of block 8g + k at 32·d + 4·k + i, the
//   Q4 lane layouts' place (4-bit: the nibble pairs the MLX 4-bit lane kernel otherwise builds with
//   two permutes per group; 8-bit: the pairs of eight permutes); the tail blocks as stored, scales
//   and biases apart as MLX_AFFINE's.
// The same values and the same row size, so strides, views and row offsets are unchanged.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/quant_formats.h"

namespace rapid::tensor {

constexpr int kLaneGroupBlocks = 8;

// Whether t is one of the *_LANES layouts.
bool is_lane_layout(DType t);
// The lane layout of GGUF type t (Q8_0 -> Q8_0_LANES, ...), or t itself when it has none.
DType lane_layout_of(DType t);
// One row of `cols` elements of type `from` (lane_layout_of(from) != from) from src into dst, its
// lane layout (the same number of bytes).
void repack_lanes(DType from, const void* src, int64_t cols, void* dst);
// Whether a row of `cols` elements gains from a lane layout (whole blocks, at least one group).
bool lanes_fit(int64_t cols);
// One row of nb blocks from src into dst (the same number of bytes).
void repack_q8_0_lanes(const BlockQ8_0* src, int64_t nb, uint8_t* dst);
void repack_q4_0_lanes(const BlockQ4_0* src, int64_t nb, uint8_t* dst);
void repack_q4_1_lanes(const BlockQ4_1* src, int64_t nb, uint8_t* dst);
// Block b of a lane-layout row of nb blocks, back in GGUF's form (dequantization, AMX panels).
BlockQ8_0 q8_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b);
BlockQ4_0 q4_0_lanes_block(const uint8_t* row, int64_t nb, int64_t b);
BlockQ4_1 q4_1_lanes_block(const uint8_t* row, int64_t nb, int64_t b);
BlockIQ4_NL iq4_nl_lanes_block(const uint8_t* row, int64_t nb, int64_t b);
// MLX affine of `bits` (4 or 8): one row of nb blocks from src into dst (the same 4·bits·nb bytes;
// dst may be src: each group is rewritten through a copy); block b's 4·bits bytes, or the whole
// row's, back in element order (dequantization, AMX panels).
void repack_mlx_lanes(int bits, const uint8_t* src, int64_t nb, uint8_t* dst);
void mlx_lanes_block(int bits, const uint8_t* row, int64_t nb, int64_t b, uint8_t* out);
void mlx_lanes_row(int bits, const uint8_t* row, int64_t nb, uint8_t* out);
// Q4_K: nsb super-blocks; a super-block back in GGUF's form.
void repack_q4_k_lanes(const BlockQ4_K* src, int64_t nsb, BlockQ4_K* dst);
BlockQ4_K q4_k_lanes_block(const BlockQ4_K& lanes);
void repack_q6_k_lanes(const BlockQ6_K* src, int64_t nsb, BlockQ6_K* dst);
BlockQ6_K q6_k_lanes_block(const BlockQ6_K& lanes);
void repack_iq4_xs_lanes(const BlockIQ4_XS* src, int64_t nsb, BlockIQ4_XS* dst);
BlockIQ4_XS iq4_xs_lanes_block(const BlockIQ4_XS& lanes);

}  // namespace rapid::tensor
