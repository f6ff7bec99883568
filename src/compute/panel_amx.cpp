// AMX-INT8 panels (Kernels::Panel): 32 weight rows × 32 tokens per step of four tile multiplies,
// for prefill and large batches on CPUs with AMX.
//
// Each 32-element block's integer dot comes out of TDPBSSD (s8 × s8 → s32, exact) for 16 tokens ×
// 16 rows at once, where the lane kernels spend four dpbusd per token and row per 8 blocks. The
// float work after it is the lane kernels' own, operation for operation: per block
// acc[lane b mod 8] = fma(float(isum), dw·dx, acc) (then fma(mw, dx·Σx, acc) for the offset
// formats), lanes summed at the end in hsum256's order. Integer sums are exact either way, so a
// panel's result is bitwise the lane kernel's, and matmul may use panels for some batch sizes and
// lane kernels for others without a token's result depending on its batch.
//
// Tiles: two A (16 tokens × one block: 32 int8 each, packed once per matmul by pack_panel_acts so
// that a tile is 512 contiguous bytes), two B (16 weight rows × one block as s8, in the VNNI order
// TDPBSSD wants: tile row j = dword j of every weight row; unpacked once per panel, reused by every
// token tile) and four C, 2×2: each A and B load feeds two multiplies (measured: 1.6x the tile
// throughput of one A, one B, one C from L2-resident activations; a last tile of at most 16 tokens
// runs alone, with two C). A C tile (16 tokens × 16 rows
// s32) goes through memory into vectors over the rows, the orientation the float work needs.
// Blocks are taken lane by lane (k, k+8, ...), so that one lane's dots are in L1 when its float
// work runs with its 16 accumulators in registers.
//
// Q6_K gives each 16 elements their own int8 scale, which the lane kernels apply in integers
// (Σ sc·(q − 32)·x per 32-element block, then one float operation). A panel folds the scale into
// the weight, P = sc·(q − 32) (|P| ≤ 4096, not an int8), split exactly as P = 64·H + L with
// L = P mod 64 and H = P >> 6, both int8: two tile multiplies per block, and the block's integer is
// 64·(H·x) + L·x, the lane kernels' integer, so the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compute/aligned_buffer.h"
#include "compute/avx2_transpose.h"
#include "compute/k4_scales.h"
#include "compute/kernels.h"
#include "tensor/fp16.h"
#include "tensor/lane_layout.h"

namespace rapid::compute {
namespace {

constexpr int kRows = Kernels::kPanelRows;  // weight rows per panel: two B tiles
constexpr int kHalf = 16;                   // rows per B tile = C tile columns
constexpr int kTok = 16;                    // tokens per A tile = C tile rows
constexpr int kBlockB = 8 * 64;             // bytes of one B tile (8 dwords × 16 rows)
constexpr int kCTile = kTok * kHalf;        // s32 per C tile

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-3: C (16 tokens × 16 rows s32); 4-5: A (16 tokens × 32 bytes); 6-7: B (8 × 64 bytes).
void configure_tiles() {
  TileConfig c;
  for (int i = 0; i < 4; ++i) c.rows[i] = kTok, c.colsb[i] = kHalf * 4;
  for (int i = 4; i < 6; ++i) c.rows[i] = kTok, c.colsb[i] = 32;
  for (int i = 6; i < 8; ++i) c.rows[i] = 8, c.colsb[i] = kHalf * 4;
  _tile_loadconfig(&c);
}

// A panel's weights, unpacked (its buffers, like the others here, are thread_local vectors, so a
// thread that never runs a panel never allocates them): B tile h (rows 16h..16h+15) of block blk
// at b + (2·blk + h)·512, holding value 4j+i of its row r at j*64 + r*4 + i; per block the rows'
// scales (and offsets) as f32 vectors over the 32 rows (zero past the panel).
// Q6_K (split): the H tiles as above, the L tiles after them at b + (2·(nb + blk) + h)·512.
struct Unpacked {
  std::vector<uint8_t> raw;  // b, 64-byte aligned inside
  std::vector<float> dw, mw;
  int8_t* b = nullptr;
  void reset(int64_t nb, bool split) {
    b = reinterpret_cast<int8_t*>(aligned64(raw, static_cast<size_t>((split ? 4 : 2) * nb * kBlockB)));
    dw.assign(static_cast<size_t>(nb * kRows), 0.0f);
    mw.assign(static_cast<size_t>(nb * kRows), 0.0f);
  }
};

// 16 rows of 8 dwords (R[r]) into B's order: out[j] = dword j of rows 0..15. Rows r and r + 8
// share a vector; an 8×8 transpose inside each 256-bit half then leaves B's rows.
void transpose_rows(const __m256i* R, int8_t* out) {
  __m512i z[8], t[8], u[8];
  for (int r = 0; r < 8; ++r) z[r] = _mm512_inserti64x4(_mm512_castsi256_si512(R[r]), R[r + 8], 1);
  for (int r = 0; r < 8; r += 2) t[r] = _mm512_unpacklo_epi32(z[r], z[r + 1]), t[r + 1] = _mm512_unpackhi_epi32(z[r], z[r + 1]);
  // u[a] (rows 0-3 / 8-11) and u[4 + a] (rows 4-7 / 12-15): 128-bit lane L holds dword a + 4·(L mod 2).
  for (int h = 0; h < 8; h += 4) {
    u[h + 0] = _mm512_unpacklo_epi64(t[h + 0], t[h + 2]);
    u[h + 1] = _mm512_unpackhi_epi64(t[h + 0], t[h + 2]);
    u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int a = 0; a < 4; ++a) {
    _mm512_store_si512(out + a * 64, _mm512_permutex2var_epi64(u[a], lo, u[4 + a]));
    _mm512_store_si512(out + (a + 4) * 64, _mm512_permutex2var_epi64(u[a], hi, u[4 + a]));
  }
}

// A GGUF Q4 block's 16 bytes: byte j holds elements j (low nibble) and j + 16 (high), minus off.
inline __m256i split_nibbles(__m128i q, int off) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
  return _mm256_sub_epi8(v, _mm256_set1_epi8(static_cast<char>(off)));
}
inline __m256i split_nibbles(const uint8_t* qs, int off) {
  return split_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), off);
}
// Q5_0 / Q5_1: bit j of the 32-bit qh is element j's fifth bit (16), over split_nibbles' values.
inline __m256i with_fifth_bits(__m256i v, const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return _mm256_mask_add_epi8(v, static_cast<__mmask32>(h), v, _mm256_set1_epi8(16));
}
// MLX 4-bit: LSB first, byte j holds elements 2j (low) and 2j + 1 (high).
inline __m256i interleave_nibbles(__m128i q) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}
inline __m256i interleave_nibbles(const uint8_t* qs) {
  return interleave_nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
}

// Block blk of row `row` (panel row r): its 32 values as s8 in element order, its scale and offset.
// (The K-quants and the lane layouts' full groups go a group at a time: unpack_groups.)
inline __m256i block_values(const PanelRows& p, const uint8_t* row, int r, int64_t blk, int64_t nb, float& d, float& m) {
  switch (p.dtype) {
    // The lane layouts' tail blocks (their full groups go through lane_group).
    case tensor::DType::Q8_0_LANES: {
      const tensor::BlockQ8_0 q = tensor::q8_0_lanes_block(row, nb, blk);
      d = tensor::f16_to_f32(q.d);
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.qs));
    }
    case tensor::DType::Q4_1_LANES: {
      const tensor::BlockQ4_1 q = tensor::q4_1_lanes_block(row, nb, blk);
      d = tensor::f16_to_f32(q.d), m = tensor::f16_to_f32(q.m);
      return split_nibbles(q.qs, 0);
    }
    case tensor::DType::Q8_0: {
      const auto* q = reinterpret_cast<const tensor::BlockQ8_0*>(row) + blk;
      d = tensor::f16_to_f32(q->d);
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q->qs));
    }
    case tensor::DType::Q4_0_LANES: {
      const tensor::BlockQ4_0 q = tensor::q4_0_lanes_block(row, nb, blk);
      d = tensor::f16_to_f32(q.d);
      return split_nibbles(q.qs, 8);
    }
    case tensor::DType::Q4_0: {
      const auto* q = reinterpret_cast<const tensor::BlockQ4_0*>(row) + blk;
      d = tensor::f16_to_f32(q->d);
      return split_nibbles(q->qs, 8);
    }
    case tensor::DType::Q4_1: {
      const auto* q = reinterpret_cast<const tensor::BlockQ4_1*>(row) + blk;
      d = tensor::f16_to_f32(q->d), m = tensor::f16_to_f32(q->m);
      return split_nibbles(q->qs, 0);
    }
    case tensor::DType::Q5_0: {
      const auto* q = reinterpret_cast<const tensor::BlockQ5_0*>(row) + blk;
      d = tensor::f16_to_f32(q->d);
      return _mm256_sub_epi8(with_fifth_bits(split_nibbles(q->qs, 0), q->qh), _mm256_set1_epi8(16));
    }
    case tensor::DType::Q5_1: {
      const auto* q = reinterpret_cast<const tensor::BlockQ5_1*>(row) + blk;
      d = tensor::f16_to_f32(q->d), m = tensor::f16_to_f32(q->m);
      return with_fifth_bits(split_nibbles(q->qs, 0), q->qh);
    }
    default: {
      const int64_t g = blk * 32 / p.group_size;
      d = p.scales[r * p.sstride + g], m = p.biases[r * p.sstride + g];
      if (p.bits == 4) return interleave_nibbles(row + blk * 16);
      // 8 bits: q − 128 as s8 and b + 128·s, the lane kernel's split (kernels_avx512.cpp, mlx8_dots).
      m = std::fma(d, 128.0f, m);
      alignas(32) uint8_t q[32];
      const uint8_t* b = row + blk * 32;
      if (p.dtype == tensor::DType::MLX_LANES) tensor::mlx_lanes_block(8, row, nb, blk, q), b = q;
      return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), _mm256_set1_epi8(-128));
    }
  }
}

// Q6_K values (0..63) of a super-block's 8 blocks in element order. GGUF: element 128·n + 32·j + l
// has the low nibble (high for j >= 2) of ql[64·n + 32·(j & 1) + l] and bits 2·j of qh[32·n + l].
// Q6_K_LANES (tensor/lane_layout.h): the lane kernel's pairs, whose 8 dword vectors are one 8×8
// transpose from the blocks.
inline void q6_k_values(const tensor::BlockQ6_K& b, bool lanes, __m256i* R) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
  if (lanes) {
    const __m512i l0 = _mm512_loadu_si512(b.ql), l1 = _mm512_loadu_si512(b.ql + 64), qh = _mm512_loadu_si512(b.qh);
    const __m512i lo[4] = {l0, l1, _mm512_srli_epi16(l0, 4), _mm512_srli_epi16(l1, 4)};
    __m256i Y[8];
    for (int j = 0; j < 4; ++j) {
      const __m512i hi = _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), _mm512_set1_epi8(3));
      const __m512i v = _mm512_or_si512(_mm512_and_si512(lo[j], _mm512_set1_epi8(0x0f)), _mm512_slli_epi16(hi, 4));
      Y[2 * j] = _mm512_castsi512_si256(v), Y[2 * j + 1] = _mm512_extracti64x4_epi64(v, 1);
    }
    transpose8x8(Y, R);
    return;
  }
  for (int k = 0; k < 8; ++k) {
    const int n = k / 4, j = k % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n + 32 * (j & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
    const __m256i lo = _mm256_and_si256(j >= 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), m3);
    R[k] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
}
// Block k's values q (0..63, element order) as the split P = sc·(q − 32) = 64·H + L, with scale
// 2k for its first 16 elements and 2k + 1 for the last.
inline void q6_k_split(__m256i q, const int8_t* scales, int k, __m256i& H, __m256i& L) {
  const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16(scales[2 * k]), _mm256_set1_epi16(scales[2 * k + 1]), 1);
  const __m512i P = _mm512_mullo_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(q), _mm512_set1_epi16(32)), sc);
  L = _mm512_cvtepi16_epi8(_mm512_and_si512(P, _mm512_set1_epi16(63)));
  H = _mm512_cvtepi16_epi8(_mm512_srai_epi16(P, 6));
}

// A Q4_K super-block's 8 blocks (R[k]: sub-block k's 32 values in element order) and their scales
// and offsets, the per-block path's d·sc and −dmin·mn as the lane kernels form them (k4_scales).
// Q4_K: sub-block k is nibble half k & 1 of qs[32·(k/2) ..]. Q4_K_LANES (tensor/lane_layout.h):
// dword d of sub-block k is lane 8·(d % 2) + k of the nibble half d / 4 of qs half (d / 2) % 2, so
// the eight dword vectors of the layout are one 8×8 transpose from the blocks.
inline void q4_k_super_block(const tensor::BlockQ4_K& b, bool lanes, __m256i* R, float* dw, float* mw) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  if (lanes) {
    __m256i Y[8];
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
      const __m512i lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f));
      Y[2 * h] = _mm512_castsi512_si256(lo), Y[2 * h + 1] = _mm512_extracti64x4_epi64(lo, 1);
      Y[4 + 2 * h] = _mm512_castsi512_si256(hi), Y[5 + 2 * h] = _mm512_extracti64x4_epi64(hi, 1);
    }
    transpose8x8(Y, R);
  } else {
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (k / 2)));
      R[k] = _mm256_and_si256(k & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
    }
  }
  __m256 sc, mn;
  k4_scales(b.scales, sc, mn);
  _mm256_storeu_ps(dw, _mm256_mul_ps(_mm256_set1_ps(tensor::f16_to_f32(b.d)), sc));
  _mm256_storeu_ps(mw, _mm256_mul_ps(_mm256_set1_ps(-tensor::f16_to_f32(b.dmin)), mn));
}

// Blocks [0, 8·groups) a group of 8 per row at a time: group(row, r, g, v, dw, mw) gives panel row
// r's blocks 8g..8g+7 (v[k]: block 8g + k's values; Q6_K's split, kParts = 2: v[8 + k] its L part)
// and their scales and offsets.
template <int kParts, class Group>
void unpack_groups(const PanelRows& p, int64_t nb, Unpacked& u, Group group) {
  __m256i R[kParts * 8][kRows];
  alignas(32) float dw[8], mw[8];
  for (int64_t g = 0; g < nb / 8; ++g) {
    for (int r = 0; r < kRows; ++r) {
      __m256i v[kParts * 8];
      if (r < p.rows) {
        group(p.w + r * p.stride, r, g, v, dw, mw);
      } else {
        for (auto& e : v) e = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) dw[k] = mw[k] = 0.0f;
      }
      for (int k = 0; k < kParts * 8; ++k) R[k][r] = v[k];
      for (int k = 0; k < 8; ++k) {
        u.dw[(8 * g + k) * kRows + r] = dw[k];
        u.mw[(8 * g + k) * kRows + r] = mw[k];
      }
    }
    for (int part = 0; part < kParts; ++part)
      for (int k = 0; k < 8; ++k) {
        int8_t* tiles = u.b + 2 * (part * nb + 8 * g + k) * kBlockB;  // L tiles after all H tiles
        transpose_rows(R[part * 8 + k], tiles);
        transpose_rows(R[part * 8 + k] + kHalf, tiles + kBlockB);
      }
  }
}

// The lane layouts' full groups (tensor/lane_layout.h: byte 32·d + 4·k + i of group g is byte i of
// quant dword d of block 8g + k; the heads after the groups and the tail blocks, kHead bytes per
// block): one 8×8 transpose gives each block's dwords in order, where the per-block path gathered
// them a dword at a time (a third of a 129-token SmolLM2 Q8_0 prefill).
void lane_group(const PanelRows& p, int64_t nb, const uint8_t* row, int r, int64_t g, __m256i* v, float* dw, float* mw) {
  const bool nibbles = p.dtype == tensor::DType::Q4_0_LANES || p.dtype == tensor::DType::Q4_1_LANES ||
                       (p.dtype == tensor::DType::MLX_LANES && p.bits == 4);
  const int group_bytes = nibbles ? 128 : 256;
  const uint8_t* q = row + group_bytes * g;
  __m256i Y[8];
  for (int d = 0; d < 8; ++d)
    Y[d] = !nibbles || d < 4 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * d)) : _mm256_setzero_si256();
  transpose8x8(Y, v);
  // The GGUF layouts' group heads (after the full groups and the tail blocks).
  auto heads = [&] { return row + group_bytes * (nb / 8) + tensor::block_bytes(p.dtype) * (nb % 8); };
  switch (p.dtype) {
    case tensor::DType::Q8_0_LANES: {
      for (int k = 0; k < 8; ++k) v[k] = _mm256_xor_si256(v[k], _mm256_set1_epi8(-128));  // stored + 128
      _mm256_store_ps(dw, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(heads() + 16 * g))));
      _mm256_store_ps(mw, _mm256_setzero_ps());
      return;
    }
    case tensor::DType::Q4_0_LANES: {
      for (int k = 0; k < 8; ++k) v[k] = split_nibbles(_mm256_castsi256_si128(v[k]), 8);
      _mm256_store_ps(dw, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(heads() + 16 * g))));
      _mm256_store_ps(mw, _mm256_setzero_ps());
      return;
    }
    case tensor::DType::Q4_1_LANES: {
      for (int k = 0; k < 8; ++k) v[k] = split_nibbles(_mm256_castsi256_si128(v[k]), 0);
      const __m256i dm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(heads() + 32 * g));  // (d, m) per block
      _mm256_store_ps(dw, _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_and_si256(dm, _mm256_set1_epi32(0xffff)))));
      _mm256_store_ps(mw, _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))));
      return;
    }
    default: {  // MLX_LANES, as block_values: 4-bit values in element order; 8-bit q − 128 as s8, b + 128·s
      for (int k = 0; k < 8; ++k) {
        const int64_t gi = (8 * g + k) * 32 / p.group_size;
        dw[k] = p.scales[r * p.sstride + gi];
        if (p.bits == 4) {
          v[k] = interleave_nibbles(_mm256_castsi256_si128(v[k]));
          mw[k] = p.biases[r * p.sstride + gi];
        } else {
          v[k] = _mm256_xor_si256(v[k], _mm256_set1_epi8(-128));
          mw[k] = std::fma(dw[k], 128.0f, p.biases[r * p.sstride + gi]);
        }
      }
      return;
    }
  }
}

void unpack(const PanelRows& p, int64_t nb, Unpacked& u) {
  // The K-quants: a group is a super-block.
  if (p.dtype == tensor::DType::Q4_K || p.dtype == tensor::DType::Q4_K_LANES) {
    u.reset(nb, false);
    const bool lanes = p.dtype == tensor::DType::Q4_K_LANES;
    return unpack_groups<1>(p, nb, u, [&](const uint8_t* row, int, int64_t s, __m256i* v, float* dw, float* mw) {
      q4_k_super_block(reinterpret_cast<const tensor::BlockQ4_K*>(row)[s], lanes, v, dw, mw);
    });
  }
  if (p.dtype == tensor::DType::Q6_K || p.dtype == tensor::DType::Q6_K_LANES) {
    u.reset(nb, true);
    const bool lanes = p.dtype == tensor::DType::Q6_K_LANES;
    return unpack_groups<2>(p, nb, u, [&](const uint8_t* row, int, int64_t s, __m256i* v, float* dw, float* mw) {
      const tensor::BlockQ6_K& b = reinterpret_cast<const tensor::BlockQ6_K*>(row)[s];
      __m256i q[8];
      q6_k_values(b, lanes, q);
      for (int k = 0; k < 8; ++k) q6_k_split(q[k], b.scales, k, v[k], v[8 + k]);
      std::fill(dw, dw + 8, tensor::f16_to_f32(b.d));
      std::fill(mw, mw + 8, 0.0f);
    });
  }
  u.reset(nb, false);
  // The lane layouts' full groups at once, the rest (their tail blocks, the GGUF and MLX formats) a
  // block at a time.
  int64_t first = 0;
  if (p.dtype == tensor::DType::Q8_0_LANES || p.dtype == tensor::DType::Q4_0_LANES ||
      p.dtype == tensor::DType::Q4_1_LANES || p.dtype == tensor::DType::MLX_LANES) {
    first = nb / 8 * 8;
    unpack_groups<1>(p, nb, u, [&](const uint8_t* row, int r, int64_t g, __m256i* v, float* dw, float* mw) {
      lane_group(p, nb, row, r, g, v, dw, mw);
    });
  }
  __m256i R[kRows];
  for (int64_t blk = first; blk < nb; ++blk) {
    for (int r = 0; r < kRows; ++r) {
      float d = 0, m = 0;
      R[r] = r < p.rows ? block_values(p, p.w + r * p.stride, r, blk, nb, d, m) : _mm256_setzero_si256();
      u.dw[blk * kRows + r] = d;
      u.mw[blk * kRows + r] = m;
    }
    transpose_rows(R, u.b + 2 * blk * kBlockB);
    transpose_rows(R + kHalf, u.b + (2 * blk + 1) * kBlockB);
  }
}

// acc[t] (vectors over 16 rows) += one block's contribution, in the lane kernels' operations. c: the
// block's C tile; dw, mw: its rows' scales and offsets; d, ds: its 16 tokens' scale and scale·Σx.
// kSplit (Q6_K): the block's integer is 64·c[t] + cl[t] (H and L's C tiles).
template <bool kMin, bool kSplit>
inline void scale_block(const int32_t* c, const int32_t* cl, const float* dwp, const float* mwp, const float* d,
                        const float* ds, __m512* acc) {
  const __m512 dw = _mm512_loadu_ps(dwp);
  const __m512 mw = kMin ? _mm512_loadu_ps(mwp) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int t = 0; t < kTok; ++t) {
    __m512i i = _mm512_load_si512(c + t * kHalf);
    if (kSplit) i = _mm512_add_epi32(_mm512_slli_epi32(i, 6), _mm512_load_si512(cl + t * kHalf));
    const __m512 isum = _mm512_cvtepi32_ps(i);
    acc[t] = _mm512_fmadd_ps(isum, _mm512_mul_ps(dw, _mm512_set1_ps(d[t])), acc[t]);
    if (kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(ds[t]), acc[t]);
  }
}

// The C tiles of A tiles i .. i + kTiles - 1 (block blk) × the panel's two B tiles of block bt (blk,
// or nb + blk for Q6_K's L tiles) into c[0 .. 2·kTiles): token tile tt, row half h at c[2·tt + h].
template <int kTiles>
inline void block_dots(const Unpacked& u, const PanelActs& x, int64_t i, int64_t blk, int64_t bt, int32_t* c) {
  _tile_loadd(4, x.q + (i * x.nb + blk) * 512, 32);
  if (kTiles == 2) _tile_loadd(5, x.q + ((i + 1) * x.nb + blk) * 512, 32);
  _tile_loadd(6, u.b + 2 * bt * kBlockB, kHalf * 4);
  _tile_loadd(7, u.b + (2 * bt + 1) * kBlockB, kHalf * 4);
  _tile_zero(0);
  _tile_zero(1);
  _tile_dpbssd(0, 4, 6);
  _tile_dpbssd(1, 4, 7);
  _tile_stored(0, c, kHalf * 4);
  _tile_stored(1, c + kCTile, kHalf * 4);
  if (kTiles == 2) {
    _tile_zero(2);
    _tile_zero(3);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
    _tile_stored(2, c + 2 * kCTile, kHalf * 4);
    _tile_stored(3, c + 3 * kCTile, kHalf * 4);
  }
}

// Token tiles i .. i + kTiles - 1 against the unpacked panel; writes the first `tokens` tokens'
// results for the first `rows` rows. Tiles go in pairs (each A and B load feeds two multiplies); a
// last tile of at most 16 tokens goes alone, so its float work is one tile's, not two (an expert
// routed 40 tokens paid for 64).
template <bool kMin, bool kSplit, int kTiles>
void token_tiles(const Unpacked& u, const PanelActs& x, int64_t i, int tokens, int rows, float* y, int64_t ldy) {
  const int64_t nb = x.nb, per_lane = (nb + 7) / 8;
  constexpr int kParts = kSplit ? 2 : 1;  // Q6_K: H's C tiles, then L's
  constexpr int kCombos = 2 * kTiles;     // (token tile, row half)
  thread_local std::vector<int32_t> craw;
  thread_local std::vector<float> lraw;
  int32_t* c = aligned64(craw, static_cast<size_t>(per_lane * kCombos * kParts * kCTile));
  int32_t* cl = c + per_lane * kCombos * kCTile;
  float* lanes = aligned64(lraw, kCombos * 8 * kTok * kHalf);  // [combo][lane][token][16 rows]
  for (int k = 0; k < 8; ++k) {
    for (int64_t blk = k, j = 0; blk < nb; blk += 8, ++j) {
      block_dots<kTiles>(u, x, i, blk, blk, c + j * kCombos * kCTile);
      if (kSplit) block_dots<kTiles>(u, x, i, blk, nb + blk, cl + j * kCombos * kCTile);
    }
    for (int combo = 0; combo < kCombos; ++combo) {
      const int tt = combo >> 1, h = combo & 1;  // token tile i + tt, rows 16h..16h+15
      __m512 acc[kTok];
      for (auto& a : acc) a = _mm512_setzero_ps();
      // Blocks k, k+8, ... in order: the lane's accumulation order.
      for (int64_t blk = k, j = 0; blk < nb; blk += 8, ++j) {
        const int64_t a = ((i + tt) * nb + blk) * kTok;
        scale_block<kMin, kSplit>(c + (j * kCombos + combo) * kCTile, cl + (j * kCombos + combo) * kCTile,
                                  u.dw.data() + blk * kRows + h * kHalf, u.mw.data() + blk * kRows + h * kHalf, x.d + a,
                                  x.ds + a, acc);
      }
      float* l = lanes + (combo * 8 + k) * kTok * kHalf;
      for (int t = 0; t < kTok; ++t) _mm512_store_ps(l + t * kHalf, acc[t]);
    }
  }
  for (int combo = 0; combo < kCombos; ++combo) {
    const int tt = combo >> 1, h = combo & 1;
    const int nr = std::clamp(rows - h * kHalf, 0, kHalf);
    const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1);
    for (int t = 0; t < kTok && tt * kTok + t < tokens; ++t) {
      __m512 a[8];
      for (int k = 0; k < 8; ++k) a[k] = _mm512_load_ps(lanes + ((combo * 8 + k) * kTok + t) * kHalf);
      // hsum256's order: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
      const __m512 even = _mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6]));
      const __m512 odd = _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7]));
      _mm512_mask_storeu_ps(y + (tt * kTok + t) * ldy + h * kHalf, mask, _mm512_add_ps(even, odd));
    }
  }
}
template <bool kMin, bool kSplit>
void tiles(const Unpacked& u, const PanelActs& x, int64_t i, int tokens, int rows, float* y, int64_t ldy) {
  if (tokens > kTok) token_tiles<kMin, kSplit, 2>(u, x, i, tokens, rows, y, ldy);
  else token_tiles<kMin, kSplit, 1>(u, x, i, tokens, rows, y, ldy);
}

void panel(const PanelRows& p, const PanelActs& x, float* y, int64_t ldy) {
  thread_local Unpacked u;
  unpack(p, x.nb, u);
  configure_tiles();
  const bool split = p.dtype == tensor::DType::Q6_K || p.dtype == tensor::DType::Q6_K_LANES;
  const bool offset = !split && p.dtype != tensor::DType::Q4_0 && p.dtype != tensor::DType::Q4_0_LANES &&
                      p.dtype != tensor::DType::Q5_0 && p.dtype != tensor::DType::Q8_0 &&
                      p.dtype != tensor::DType::Q8_0_LANES;  // w = d·q + m
  for (int64_t i = 0; kTok * i < x.n; i += 2) {
    const int tokens = static_cast<int>(std::min<int64_t>(2 * kTok, x.n - kTok * i));
    float* yi = y + kTok * i * ldy;
    if (split) tiles<false, true>(u, x, i, tokens, p.rows, yi, ldy);
    else if (offset) tiles<true, false>(u, x, i, tokens, p.rows, yi, ldy);
    else tiles<false, false>(u, x, i, tokens, p.rows, yi, ldy);
  }
}

}  // namespace

void fill_panel_amx(Kernels& k) { k.panel = panel; }

}  // namespace rapid::compute
