// Table of the innermost kernels, one implementation per ISA level (scalar / AVX2 / AVX-512),
// chosen at runtime. Everything above this (matmul, attention) is ISA-agnostic.
#pragma once
#include <cstdint>

#include "compute/cpu_features.h"
#include "tensor/quant_formats.h"

namespace rapid::compute {

// Activations packed by pack_act_lanes, offset to the first row of a tile.
struct ActLanes {
  const int32_t* q;
  const float* d;
  const float* ds;
  const int32_t* sum;
  int64_t ld;  // rows in the packed buffer (the group stride, in rows)
  const int32_t* hs = nullptr;  // the blocks' two 16-element half sums (pack_act_lanes), Q2_K's
  // Optional (pair_tail_lanes; null otherwise): a last group of 1-4 blocks as token pairs, so a
  // kernel dots two tokens' tail blocks in one pass instead of two mostly empty ones. Entry t
  // holds that group's lanes 0-3 of token t then of token t + 1: values pq[64t + 8v + 4h + k]
  // (vector v, lane k, h = 0 for t and 1 for t + 1), and pd, pds, psum[8t + 4h + k] likewise.
  const int32_t* pq = nullptr;
  const float *pd = nullptr, *pds = nullptr;
  const int32_t* psum = nullptr;
  // The same activations from row t of the tile on.
  ActLanes at(int64_t t) const {
    return {q + t * 64, d + t * 8, ds + t * 8, sum + t * 8, ld, hs ? hs + t * 8 : nullptr,
            pq ? pq + t * 64 : nullptr, pd ? pd + t * 8 : nullptr, pds ? pds + t * 8 : nullptr,
            psum ? psum + t * 8 : nullptr};
  }
};

// Up to Kernels::kPanelRows rows of one weight, for Kernels::Panel.
struct PanelRows {
  tensor::DType dtype;  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K, their *_LANES layouts, MLX_AFFINE (4 or 8 bits) or MLX_LANES
  const uint8_t* w;     // first row
  size_t stride;        // bytes between rows
  int rows;             // 1..32
  // MLX: the rows' scales and biases as f32, `sstride` floats between rows; group_size 32/64/128.
  const float *scales = nullptr, *biases = nullptr;
  int64_t sstride = 0;
  int group_size = 0;
  int bits = 4;
};

// Activations for Kernels::Panel, packed by pack_panel_acts: for 16-token tile i and block b
// (j = i·nb + b), q[j*512 ..] = the 16 tokens' 32 values (one AMX A tile, rows 32 bytes apart),
// d[j*16 + t] and ds[j*16 + t] = token t's scale and scale·Σx. Tokens past n are zeros, up to an
// even number of tiles.
struct PanelActs {
  const int8_t* q;
  const float *d, *ds;
  int64_t nb, n;
};

// gelu_tanh's 2z = g·(kGeluTanhA + kGeluTanhB·g²): 2·√(2/π) and 2·√(2/π)·0.044715.
inline constexpr float kGeluTanhA = 1.5957691216057308f, kGeluTanhB = 0.07135481627260025f;

struct Kernels {
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  float (*dot_f16)(const float* x, const uint16_t* w, int64_t n);
  float (*dot_bf16)(const float* x, const uint16_t* w, int64_t n);
  void (*axpy_f32)(float a, const float* v, float* y, int64_t n);  // y += a*v
  void (*axpy_f16)(float a, const uint16_t* v, float* y, int64_t n);
  void (*axpy_bf16)(float a, const uint16_t* v, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*f32_to_bf16)(const float* x, uint16_t* y, int64_t n);
  // Exact widenings (every f16 / bf16 value is an f32), bitwise tensor::f16_to_f32 / bf16_to_f32
  // for all but NaN inputs: MLX rows' scales and biases before a block of rows runs.
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*bf16_to_f32)(const uint16_t* x, float* y, int64_t n);
  // Index of the first largest element, exactly std::max_element's (NaNs never win unless x[0] is
  // one): greedy sampling over a vocabulary of logits. n >= 1.
  int64_t (*argmax_f32)(const float* x, int64_t n);
  // out[i] = silu(gate[i]) · up[i] = gate[i] / (1 + e^-gate[i]) · up[i] (the gated MLP's activation;
  // out may alias gate). Vector ISAs use a polynomial e^x within a few ulp of std::exp.
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  // out[i] = gelu_tanh(gate[i]) · up[i] (Gemma's MLP), gelu_tanh(g) = 0.5·g·(1 + tanh z) with
  // z = √(2/π)·(g + 0.044715·g³), computed as g·σ(2z) = g / (1 + e^(−2z)): the same function without
  // tanh's cancellation near −1 (where 1 + tanh z lost most of its bits in f32), and silu_mul's e^x
  // on the vector ISAs (it was libm's tanhf / expm1f per element: 16 % of a Gemma 3 prefill).
  void (*gelu_tanh_mul)(const float* gate, const float* up, int64_t n, float* out);
  // x (n a multiple of 32) → n/32 int8 blocks, round-to-nearest-even of x/d, d = max|x|/127.
  void (*quantize_act)(const float* x, int64_t n, tensor::ActQ8* out);
  // One weight row of `nb` blocks against `nt` (1..4) activation rows; activation row t starts at
  // x + t*x_stride (in blocks). out[t] = dot(dequantized row, activation row t).
  using QDot = void (*)(const void* w, const tensor::ActQ8* x, int64_t x_stride, int64_t nb, int nt,
                        float* out);
  // For K-quants nb counts 256-element super-blocks (x still holds 32-element blocks).
  QDot dot_q4_0, dot_q4_1, dot_q8_0, dot_q4_k, dot_q6_k;
  QDot dot_q5_0, dot_q5_1, dot_q5_k;
  // MLX affine rows (4 or 8 bits): w = packed row bytes, scales/biases = the row's groups as f32.
  // The bias part, Σ_groups bias·(Σ dx·Σx over the group's blocks), is one short dot per token
  // after the block loop: gsum + t*groups holds token t's group sums (matmul's mlx_bias_sums).
  // For 4 bits the activation blocks must be in "nibble order" (see permute_act_for_mlx4).
  using MlxDot = void (*)(const uint8_t* w, const float* scales, const float* biases, int group_size,
                          const tensor::ActQ8* x, int64_t x_stride, int64_t nblocks, int nt, const float* gsum,
                          float* out);
  MlxDot dot_mlx4, dot_mlx8;
  // MXFP4 rows (tensor/mxfp4.h): w = the row's packed nibbles, e = its E8M0 scales (one per block),
  // activations in nibble order (permute_act_for_mlx4: MXFP4 packs like MLX 4-bit). Per block an
  // integer dot of 2·E2M1 (exact int8) with the int8 activations, scaled by 2^(e-128)·dx.
  using Mxfp4Dot = void (*)(const uint8_t* w, const uint8_t* e, const tensor::ActQ8* x, int64_t x_stride, int64_t nb,
                            int nt, float* out);
  Mxfp4Dot dot_mxfp4;
  // GGML's MXFP4 rows (tensor::BlockMXFP4, read in place from a GGUF) against the same nibble-order
  // activations: each block's codes are put in MXFP4's order first, so that every integer lane and
  // float operation is dot_mxfp4's and a row gives bitwise dot_mxfp4's result on its repacked copy.
  QDot dot_mxfp4_ggml;
  // A lane kernel call takes rows [0, rows) of a weight matrix, out[t · ldo + r] for token t: a call
  // per row (matmul's row loop, the dispatch) was ~15 % of a decode step at SmolLM2's 576-wide rows
  // (2¼ lane groups).
  struct Rows {
    const uint8_t* w;  // row 0, the rows `stride` bytes apart
    size_t stride;
    int64_t rows;
    // MLX affine (MlxDotV): row 0's scales and biases (group_dtype), `group_stride` bytes apart;
    // MXFP4 (dot_mxfp4v): row 0's E8M0 bytes, the same stride.
    const void *scales = nullptr, *biases = nullptr;
    size_t group_stride = 0;
    tensor::DType group_dtype = tensor::DType::F32;
    int group_size = 0;
    static Rows one(const void* w) { return {static_cast<const uint8_t*>(w), 0, 1}; }
  };
  // Optional (null unless an ISA provides it): QDot for nt = 1..kQDotVMaxNT over activations
  // packed by pack_act_lanes, a layout for kernels that work 8 blocks at a time: the int→float
  // conversion and the scaling then happen once per 8 blocks instead of once per block.
  using QDotV = void (*)(const Rows& m, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo);
  static constexpr int kQDotVMaxNT = 16;
  QDotV dot_q4_0v, dot_q4_1v, dot_q8_0v, dot_q5_0v, dot_q5_1v;
  QDotV dot_q2_kv, dot_q3_kv, dot_q4_kv, dot_q5_kv, dot_q6_kv;  // nb counts 256-element super-blocks (one lane group each)
  // IQ4_NL (nb blocks of 32, like dot_q4_0v) and IQ4_XS (nb super-blocks, like dot_q4_kv): each
  // nibble through the format's table; the same float operations on every ISA that has them.
  QDotV dot_iq4_nlv, dot_iq4_xsv;
  // The IQ1-IQ3 lattice types (nb super-blocks, iq_lattice_rows.h): each super-block decoded to
  // int8 once per call, the same code on AVX2 and AVX-512, so the same bits.
  QDotV dot_iq2_xxsv, dot_iq2_xsv, dot_iq2_sv, dot_iq3_xxsv, dot_iq3_sv, dot_iq1_sv, dot_iq1_mv;
  // The same decode kept for many token tiles (prefill), where it is most of those kernels' cost:
  // decode_iq writes rows [0, m.rows) of a lattice type t as kIqDecodedBytes per super-block (row r
  // at out + r·nb·kIqDecodedBytes, out 32-byte aligned), and dot_iq_decodedv dots such rows
  // (m.stride = nb·kIqDecodedBytes) against activations biased to unsigned (bias_act_lanes; their
  // integer dots are exact either way) with the type kernel's float operations, so bitwise its
  // result. Optional like QDotV (both set together).
  static constexpr size_t kIqDecodedBytes = 320;
  using IqDecode = void (*)(tensor::DType t, const Rows& m, int64_t nb, uint8_t* out);
  IqDecode decode_iq;
  QDotV dot_iq_decodedv;
  // Rows in the lane layouts (tensor/lane_layout.h: DType::Q8_0_LANES, Q4_0_LANES, Q4_1_LANES,
  // Q4_K_LANES, Q6_K_LANES with nb super-blocks): dot_q8_0v's / q4_0v's / q4_1v's / q4_kv's /
  // q6_kv's integer dots and float operations, so bitwise their result on the row before
  // repacking, without the gathers. Optional like QDotV.
  QDotV dot_q8_0_lanes, dot_q4_0_lanes, dot_q4_1_lanes, dot_q4_k_lanes, dot_q6_k_lanes;
  QDotV dot_iq4_nl_lanes;  // DType::IQ4_NL_LANES: dot_iq4_nlv's bits
  QDotV dot_iq4_xs_lanes;  // DType::IQ4_XS_LANES (nb super-blocks): dot_iq4_xsv's bits
  // MLX affine 4-bit rows in the same lane layout (activations in nibble order, packed by
  // pack_act_lanes); group_size 32, 64 or 128; scales/biases are the row's groups as the file
  // stores them (group_dtype F32, F16 or BF16), widened in the kernel; a row ending in a partial
  // 8-block group has up to 7 entries read past its last (finite values: matmul pads a tensor's
  // last row). Optional like QDotV.
  using MlxDotV = void (*)(const Rows& m, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo);
  MlxDotV dot_mlx4v;
  // MLX affine 8-bit rows (w = the row's bytes as stored) against activations in their plain order
  // (pack_act_lanes of quantize_act's blocks); the rest as dot_mlx4v. Optional like QDotV.
  MlxDotV dot_mlx8v;
  // MLX affine 2-, 3-, 5- and 6-bit rows (their packed bit stream as stored) against plain-order
  // activations; the rest as dot_mlx4v, whose float operations they share. Optional like QDotV.
  MlxDotV dot_mlx2v, dot_mlx3v, dot_mlx5v, dot_mlx6v;
  // The same over DType::MLX_LANES rows (tensor/lane_layout.h), 4- and 8-bit: dot_mlx4v's /
  // dot_mlx8v's dots and float operations on the row before repacking, so bitwise their result,
  // without the permutes.
  MlxDotV dot_mlx4_lanes, dot_mlx8_lanes;
  // MXFP4 rows in the lane layout, optional like QDotV: dot_mxfp4v's rows are dot_mxfp4's codes,
  // their E8M0 bytes at Rows::scales (group_stride bytes a row), against activations in nibble
  // order; dot_mxfp4_ggmlv's are tensor::BlockMXFP4 rows against activations in their plain order
  // (GGML's byte j holds elements j and j + 16, Q4_0's order). The integer block dots are exact,
  // so both layouts give a row's values bitwise the same result.
  QDotV dot_mxfp4v, dot_mxfp4_ggmlv;
  // Optional (AMX-INT8, panel_amx.cpp): a panel of up to 16 weight rows against all the
  // activation rows of x, y[t*ldy + r]. Each (row, token) is bitwise the result of the format's lane kernel
  // (QDotV / MlxDotV), so matmul may switch to it at any n without changing a result.
  using Panel = void (*)(const PanelRows& w, const PanelActs& x, float* y, int64_t ldy);
  Panel panel;
  static constexpr int kPanelRows = 32;
};

// Rows [t0, t1) of n activation rows of nb blocks (x[t*nb + b]) in "lane = block" order, group-major
// so that the tokens of a tile sit at fixed offsets. For group g (blocks 8g..8g+7) and row t, with
// i = g*ld + t: q[i*64 + 8m + k] = bytes 4m..4m+3 of block 8g+k; d[i*8 + k] = its scale,
// ds[i*8 + k] = d·sum, sum[i*8 + k] = its integer sum; hs[i*8 + k] (unless hs is null) the sums of
// its first and last 16 values as int16 in the low and high half (for a madd against two int16
// weights per lane: Q2_K's mins, computed once here instead of per row). Blocks past nb are zeros.
// ld = n. With nibble_order, q holds the blocks' values in permute_act_for_mlx4's order.
void pack_act_lanes(const tensor::ActQ8* x, int64_t nb, int64_t n, int64_t t0, int64_t t1, int32_t* q, float* d,
                    float* ds, int32_t* sum, int32_t* hs, bool nibble_order = false);

// Whether a row of nb blocks ends in a lane group that pair_tail_lanes can pair (1-4 blocks).
inline bool pairs_tail(int64_t nb) { return nb % 8 >= 1 && nb % 8 <= 4; }
// ActLanes' paired tail (pq and pd, pds, psum; see there) of x's n tokens (pack_act_lanes over nb
// blocks, pairs_tail(nb)); the last token pairs with zeros. pq holds 64·n values, the others 8·n.
void pair_tail_lanes(const ActLanes& x, int64_t nb, int64_t n, int32_t* pq, float* pd, float* pds, int32_t* psum);

// pack_act_lanes' values as unsigned bytes (+ 128) for dot_iq_decodedv: count int32 words of q into out.
void bias_act_lanes(const int32_t* q, int64_t count, int32_t* out);

// Tiles [i0, i1) of x (n rows of nb blocks) into PanelActs' layout; with T = 2·⌈n/32⌉ tiles, q holds
// 512·nb·T bytes, d and ds 16·nb·T floats.
void pack_panel_acts(const tensor::ActQ8* x, int64_t nb, int64_t n, int64_t i0, int64_t i1, int8_t* q, float* d,
                     float* ds);

// MLX (and MXFP4) packs 4-bit values LSB-first, so byte j holds elements 2j and 2j+1; reordering each
// activation block to [x0 x2 .. x30 x1 x3 .. x31] lets the Q4 nibble kernels run unchanged.
void permute_act_for_mlx4(tensor::ActQ8* blocks, int64_t n);

// Kernels at the active ISA level (see cpu_features.h).
const Kernels& kernels();
const Kernels& kernels_for(Isa isa);

// Filled by the per-ISA translation units (each overrides what it accelerates).
void fill_kernels_scalar(Kernels& k);
void fill_kernels_avx2(Kernels& k);
void fill_lane_kernels_avx2(Kernels& k);  // kernels_avx2_lanes.cpp, called by fill_kernels_avx2
void fill_kernels_avx512(Kernels& k);
void fill_panel_amx(Kernels& k);  // panel_amx.cpp; only where cpu_features().amx_int8

}  // namespace rapid::compute
