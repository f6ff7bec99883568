// The entry points of the lane kernels (kernels_avx2_lanes.cpp, kernels_avx512.cpp): the row loops
// over whole and partial 8-block groups, the nt → template dispatch and the final hsum256, shared
// so that both ISAs reduce a token's lanes the same way. Include only from TUs built with -mavx2 or
// above. RAPID_QDOTV(fn, B) wants a `fn##_group<NT, kFull>(w, x, g, m, acc)` defined before it,
// RAPID_KV_LANES(fn, B) a `fn##_group<NT>(w, x, g, acc)`.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "compute/avx2_hsum.h"
#include "compute/kernels.h"

namespace rapid::compute {
namespace {

// The lane kernels' per-token float tails, one definition for both ISAs so that a token's result
// is bitwise the same on either. Weights d·q + m per block (Q4_1, Q4_K, MLX affine): a += isum·(dw·dx),
// then += mw·(dx·Σx).
[[gnu::always_inline]] inline __m256 scaled_offset_tail(__m256i isum, __m256 dw, __m256 mw, const float* d,
                                                        const float* ds, __m256 a) {
  a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_loadu_ps(d)), a);
  return _mm256_fmadd_ps(mw, _mm256_loadu_ps(ds), a);
}
// dots − 2^kShift·Σx (sx), exact in int32: weights stored unsigned with an offset (Q4_0, Q8_0, ...).
template <int kShift>
[[gnu::always_inline]] inline __m256i unbiased(__m256i dots, const int32_t* sx) {
  return _mm256_sub_epi32(dots, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sx)), kShift));
}
// Weights d·q with q signed: a += isum·(dw·dx) (Q8_0 and the IQ4 types on AVX2, which sum Σq·x
// directly; offset_tail below once the offset is out).
[[gnu::always_inline]] inline __m256 scaled_tail(__m256i isum, __m256 dw, const float* d, __m256 a) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_loadu_ps(d)), a);
}
// Weights d·(q − 2^kShift): a += (dots − 2^kShift·Σx)·(dw·dx).
template <int kShift>
[[gnu::always_inline]] inline __m256 offset_tail(__m256i dots, const int32_t* sx, __m256 dw, const float* d, __m256 a) {
  return scaled_tail(unbiased<kShift>(dots, sx), dw, d, a);
}

// A row's tail group over token pairs (ActLanes::pq), both ISAs: for each pair entry t (lanes 0-3:
// token t, 4-7: token t + 1) the two tokens' accumulators are fused into one vector, `tail(t,
// dots(t), fused)` runs the per-token loop's float operations on it, and it is split back. Lanes
// 0-3 of each token get exactly the loop's operations; lanes 4-7 would only have added +0, which
// leaves an accumulator (never −0) as it is, so the bits are the loop's. An odd last token takes
// its entry alone (the other half, the next token's or zeros, is dropped).
template <int NT, class Dots, class Tail>
[[gnu::always_inline]] inline void paired_tail_loop(__m256* acc, Dots&& dots, Tail&& tail) {
#pragma GCC unroll 8
  for (int t = 0; t < NT; t += 2) {
    const __m256 other = t + 1 < NT ? acc[t + 1] : acc[t];
    const __m256 c = tail(t, dots(t), _mm256_permute2f128_ps(acc[t], other, 0x20));
    acc[t] = _mm256_permute2f128_ps(c, acc[t], 0x30);
    if (t + 1 < NT) acc[t + 1] = _mm256_permute2f128_ps(c, acc[t + 1], 0x31);
  }
}

// Calls f.template operator()<NT>() with NT = nt (1..kQDotVMaxNT): one instantiation per tile size.
template <class F, int... NT>
void with_nt(std::integer_sequence<int, NT...>, int nt, F&& f) {
  ((nt == NT + 1 ? f.template operator()<NT + 1>() : void()), ...);
}
template <class F>
void with_nt(int nt, F&& f) {
  with_nt(std::make_integer_sequence<int, Kernels::kQDotVMaxNT>{}, std::clamp(nt, 1, Kernels::kQDotVMaxNT), f);
}

// Rows [0, rows.rows) of a lane kernel call (Kernels::Rows): row(w, r, acc) adds row r (at w) for NT
// tokens into acc; their sums go to out[t · ldo + r].
template <int NT, class Row>
[[gnu::always_inline]] inline void each_row(const Kernels::Rows& rows, float* out, int64_t ldo, Row&& row) {
  for (int64_t r = 0; r < rows.rows; ++r) {
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    row(rows.w + r * rows.stride, r, acc);
    for (int t = 0; t < NT; ++t) out[t * ldo + r] = hsum256(acc[t]);
  }
}

// K-quant rows (Q4_K, Q6_K): nb super-blocks, each one whole lane group;
// group.template operator()<NT>(w, x, g, acc) adds group g of the row at w for NT tokens. One
// function per NT (inlined into one dispatcher, the 16 row loops compile to slow code).
template <int NT, class B, class Group>
[[gnu::noinline]] void kv_rows(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, float* out, int64_t ldo,
                               Group group) {
  each_row<NT>(rows, out, ldo, [&](const uint8_t* w, int64_t, __m256* acc) {
    for (int64_t g = 0; g < nb; ++g) group.template operator()<NT>(reinterpret_cast<const B*>(w), x, g, acc);
  });
}
template <class B, class Group>
void kv_lanes(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo, Group group) {
  with_nt(nt, [&]<int NT>() { kv_rows<NT, B>(rows, x, nb, out, ldo, group); });
}

// n (8, 4 or 2) MLX scales or biases of type D (F32 or F16; bf16 goes by MlxGroupScales'
// shuffle) from p, exactly widened to f32 in lanes 0..n-1 (the other lanes unspecified); reads
// exactly n entries.
template <tensor::DType D>
inline __m256 widen_groups(const uint8_t* p, int n) {
  static_assert(D == tensor::DType::F32 || D == tensor::DType::F16);
  if constexpr (D == tensor::DType::F32) {
    if (n == 8) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    const __m128 v = n == 4 ? _mm_loadu_ps(reinterpret_cast<const float*>(p))
                            : _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
    return _mm256_castps128_ps256(v);
  } else {
    __m128i h;
    if (n == 8) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    } else if (n == 4) {
      h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    } else {
      int32_t v;
      std::memcpy(&v, p, 4);
      h = _mm_cvtsi32_si128(v);
    }
    return _mm256_cvtph_ps(h);
  }
}

// MLX affine rows (Kernels::MlxDotV): group.template operator()<NT, kFull>(w, g, m, dw, mw, acc)
// adds blocks [8g, 8g+m) of the row at w for NT tokens with the lanes' scales dw and biases mw.
// bpg = group_size / 32 blocks share a scale (1, 2 or 4: an MLX group never straddles two lane
// groups), so lane k takes entry k / bpg of the 8 / bpg from 8g / bpg, read as the file stores them
// (D) and widened here: a separate widening pass over a row block's scales was ~9 % of an MLX 4-bit
// decode step (bench/README.md, "MLX scales read in place"). A partial last group reads 8 / bpg
// entries too, past the row's (the next row's, finite; matmul pads a tensor's last row): its lanes
// past the row meet zero activations.
// Which scale and bias each lane of a row's group g takes (bpg = 1, 2 or 4 blocks a scale): shifts
// by log2(bpg), where divisions by a run-time bpg were an idiv per group (2 % of an MLX 8-bit
// decode's kernel samples on AVX2).
// bf16 (mlx-community's checkpoints) takes one broadcast load and one byte shuffle per vector,
// each lane's entry put straight into its dword's high half (bf16_pick), where the widening above
// and the permute took three or four operations.
struct MlxGroupScales {
  int bshift;
  __m256i gidx, bf16_pick;
  explicit MlxGroupScales(int group_size)
      : bshift(group_size == 32 ? 0 : group_size == 64 ? 1 : 2),
        gidx(_mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), bshift)), bf16_pick(pick(bshift)) {}
  // Lane k: bytes 2e, 2e + 1 of the broadcast entries (e = k >> bshift) over 16 zero bits.
  static __m256i pick(int bshift) {
    int32_t m[8];
    for (int k = 0; k < 8; ++k) {
      const int e = k >> bshift;
      m[k] = static_cast<int32_t>(0x8080u | (2u * e) << 16 | (2u * e + 1) << 24);
    }
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m));
  }
  // The n = 8 >> bshift bf16 entries at p in every 128-bit half (reads exactly those 2n bytes).
  [[gnu::always_inline]] __m256i bf16_entries(const uint8_t* p) const {
    if (bshift == 0) return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (bshift == 1) return _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  template <tensor::DType D>
  [[gnu::always_inline]] void at(const uint8_t* sc, const uint8_t* bi, int64_t g, __m256& dw, __m256& mw) const {
    constexpr size_t kSize = D == tensor::DType::F32 ? 4 : 2;
    const int n = 8 >> bshift;
    const size_t first = static_cast<size_t>((8 * g) >> bshift) * kSize;
    if constexpr (D == tensor::DType::BF16) {
      dw = _mm256_castsi256_ps(_mm256_shuffle_epi8(bf16_entries(sc + first), bf16_pick));
      mw = _mm256_castsi256_ps(_mm256_shuffle_epi8(bf16_entries(bi + first), bf16_pick));
    } else {
      dw = _mm256_permutevar8x32_ps(widen_groups<D>(sc + first, n), gidx);
      mw = _mm256_permutevar8x32_ps(widen_groups<D>(bi + first, n), gidx);
    }
  }
};
template <int NT, bool kFull, tensor::DType D, class Group>
[[gnu::always_inline]] inline void mlx_group(const uint8_t* w, const uint8_t* sc, const uint8_t* bi,
                                              const MlxGroupScales& gs, int64_t g, int m, __m256* acc, Group& group) {
  __m256 dw, mw;
  gs.at<D>(sc, bi, g, dw, mw);
  group.template operator()<NT, kFull>(w, g, m, dw, mw, acc);
}
template <int NT, tensor::DType D, class Group>
[[gnu::noinline]] void mlx_rows(const Kernels::Rows& rows, int64_t nb, float* out, int64_t ldo, Group group) {
  const MlxGroupScales gs(rows.group_size);
  const int64_t full = nb / 8;
  each_row<NT>(rows, out, ldo, [&](const uint8_t* w, int64_t r, __m256* acc) {
    const uint8_t* sc = static_cast<const uint8_t*>(rows.scales) + r * rows.group_stride;
    const uint8_t* bi = static_cast<const uint8_t*>(rows.biases) + r * rows.group_stride;
    for (int64_t g = 0; g < full; ++g) mlx_group<NT, true, D>(w, sc, bi, gs, g, 8, acc, group);
    if (8 * full < nb) mlx_group<NT, false, D>(w, sc, bi, gs, full, static_cast<int>(nb - 8 * full), acc, group);
  });
}
template <class Group>
void mlx_lanes_rows(const Kernels::Rows& rows, int64_t nb, int nt, float* out, int64_t ldo, Group group) {
  with_nt(nt, [&]<int NT>() {
    switch (rows.group_dtype) {
      case tensor::DType::F32: return mlx_rows<NT, tensor::DType::F32>(rows, nb, out, ldo, group);
      case tensor::DType::F16: return mlx_rows<NT, tensor::DType::F16>(rows, nb, out, ldo, group);
      default: return mlx_rows<NT, tensor::DType::BF16>(rows, nb, out, ldo, group);
    }
  });
}

// The lane layouts (tensor/lane_layout.h) of a row of nb blocks of B: a full group's quants in lane
// order (`group_bytes` each), then the tail's heads, the tail's quants as stored, the full
// groups' heads.
template <class B>
struct LaneRow {
  static constexpr size_t kHead = offsetof(B, qs);
  const uint8_t *groups, *tail, *tail_qs, *heads;  // full groups' quants, tail heads and quants, full groups' scales
  LaneRow(const uint8_t* w, int64_t nb, size_t group_bytes)
      : groups(w), tail(groups + group_bytes * (nb / 8)), tail_qs(tail + kHead * (nb % 8)),
        heads(tail + sizeof(B) * (nb % 8)) {}
};
inline __m256 f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Rows of nb 32-element blocks in 8-block groups (the GGUF lane layouts, MXFP4's two layouts):
// group.template operator()<NT, kFull>(w, g, m, acc) adds blocks [8g, 8g+m) of the row at w for NT
// tokens. A group that also takes the row's scale bytes, (w, e, g, m, acc), gets them from
// rows.scales, group_stride bytes a row (MXFP4's E8M0 bytes, which sit apart from the codes).
template <int NT, bool kFull, class Group>
[[gnu::always_inline]] inline void add_group(Group& group, const uint8_t* w, const uint8_t* e, int64_t g, int m,
                                             __m256* acc) {
  if constexpr (requires { group.template operator()<NT, kFull>(w, e, g, m, acc); })
    group.template operator()<NT, kFull>(w, e, g, m, acc);
  else
    group.template operator()<NT, kFull>(w, g, m, acc);
}
template <int NT, class Group>
[[gnu::noinline]] void group_rows(const Kernels::Rows& rows, int64_t nb, float* out, int64_t ldo, Group group) {
  const int64_t full = nb / 8;
  each_row<NT>(rows, out, ldo, [&](const uint8_t* w, int64_t r, __m256* acc) {
    const uint8_t* e = rows.scales ? static_cast<const uint8_t*>(rows.scales) + r * rows.group_stride : nullptr;
    for (int64_t g = 0; g < full; ++g) add_group<NT, true>(group, w, e, g, 8, acc);
    if (8 * full < nb) add_group<NT, false>(group, w, e, full, static_cast<int>(nb - 8 * full), acc);
  });
}
template <class Group>
void group_lanes(const Kernels::Rows& rows, int64_t nb, int nt, float* out, int64_t ldo, Group group) {
  with_nt(nt, [&]<int NT>() { group_rows<NT>(rows, nb, out, ldo, group); });
}

}  // namespace
}  // namespace rapid::compute

#define RAPID_QDOTV(fn, B)                                                                                 \
  void fn(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {     \
    group_lanes(rows, nb, nt, out, ldo,                                                                  \
                [&]<int NT, bool kFull>(const uint8_t* w, int64_t g, int m, __m256* acc)                 \
                    __attribute__((always_inline)) { fn##_group<NT, kFull>(reinterpret_cast<const B*>(w), x, g, m, acc); }); \
  }

// A K-quant entry point (kv_lanes) over `fn##_group<NT>(w, x, g, acc)`.
#define RAPID_KV_LANES(fn, B)                                                                            \
  void fn(const Kernels::Rows& rows, const ActLanes& x, int64_t nb, int nt, float* out, int64_t ldo) {     \
    kv_lanes<B>(rows, x, nb, nt, out, ldo,                                                               \
                []<int NT>(auto... a) __attribute__((always_inline)) { fn##_group<NT>(a...); });         \
  }
