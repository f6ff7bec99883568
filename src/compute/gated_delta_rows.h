// The SIMD rows step of the Gated DeltaNet recurrence (gdn::RowsStep), written once over a
// 16-lane vector V that gated_delta_avx2.cpp (two __m256) and gated_delta_avx512.cpp (one __m512)
// provide. Element i of a row sits in lane i % 16; the tail past Dk is loaded as zeros (and
// stored masked), and V::sum reduces the 16 lanes in one tree (lanes l + l+8, then the AVX2 hsum
// order). So each row's arithmetic is the same on both ISAs, bitwise. How many rows a form
// interleaves (to overlap their dependency chains) changes nothing: a row's arithmetic does not
// depend on its neighbours. Include only from a TU compiled for V's ISA.
#pragma once
#include <cstdint>

namespace rapid::compute::gdn {

// V: T (16 floats), M (a tail mask); zero, set1, mask(rem), load/store (full), load(p, m) /
// store(p, x, m) (masked), mul, fmadd(a, b, c) = a*b + c, sum.
//
// The step in the order that reads each row twice and writes it once (the direct form, as the
// scalar step, writes g·row and reads it back): with rk = row·k, rq = row·q and kq = k·q,
//   d = β(v − g·rk);  y = g·rq + d·kq;  row ← g·row + d·k
// equal to the direct form up to f32 rounding. One pass computes both dots of R rows (2R
// independent accumulation chains, so the FMA latency is hidden), the second only updates.
// Cold: the rows are not in cache yet, so the first pass prefetches the rows 2R ahead.
template <class V, int R, bool Cold>
void rows_block(float* rows, const float* k, const float* q, int64_t dk, float g, float kq, const float* v,
                float beta, float* y) {
  using T = typename V::T;
  const int64_t full = dk & ~int64_t(15);
  const typename V::M m = V::mask(dk - full);
  auto ld = [](const float* p) { return V::load(p); };
  auto st = [](float* p, T x) { V::store(p, x); };
  auto ldm = [m](const float* p) { return V::load(p, m); };
  auto stm = [m](float* p, T x) { V::store(p, x, m); };
  T ak[R], aq[R];
  for (int r = 0; r < R; ++r) ak[r] = aq[r] = V::zero();
  auto dots = [&](int64_t i, T kk, T qq, auto load) {
    for (int r = 0; r < R; ++r) {
      if constexpr (Cold) __builtin_prefetch(rows + (r + 2 * R) * dk + i);
      const T x = load(rows + r * dk + i);
      ak[r] = V::fmadd(x, kk, ak[r]);
      aq[r] = V::fmadd(x, qq, aq[r]);
    }
  };
  for (int64_t i = 0; i < full; i += 16) dots(i, ld(k + i), ld(q + i), ld);
  if (full < dk) dots(full, ldm(k + full), ldm(q + full), ldm);
  T dv[R];
  for (int r = 0; r < R; ++r) {
    const float d = (v[r] - g * V::sum(ak[r])) * beta;
    y[r] = g * V::sum(aq[r]) + d * kq;
    dv[r] = V::set1(d);
  }
  const T gv = V::set1(g);
  auto update = [&](int64_t i, T kk, auto load, auto store) {
    for (int r = 0; r < R; ++r) {
      float* p = rows + r * dk + i;
      store(p, V::fmadd(kk, dv[r], V::mul(load(p), gv)));
    }
  };
  for (int64_t i = 0; i < full; i += 16) update(i, ld(k + i), ld, st);
  if (full < dk) update(full, ldm(k + full), ldm, stm);
}

template <class V, int R, bool Cold>
void rows_range(float* rows, int64_t n_rows, const float* k, const float* q, int64_t dk, float g, const float* v,
                float beta, float* y) {
  const int64_t full = dk & ~int64_t(15);
  typename V::T acc = V::zero();
  for (int64_t i = 0; i < full; i += 16) acc = V::fmadd(V::load(k + i), V::load(q + i), acc);
  if (full < dk) {
    const typename V::M m = V::mask(dk - full);
    acc = V::fmadd(V::load(k + full, m), V::load(q + full, m), acc);
  }
  const float kq = V::sum(acc);
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) rows_block<V, R, Cold>(rows + r * dk, k, q, dk, g, kq, v + r, beta, y + r);
  for (; r < n_rows; ++r) rows_block<V, 1, Cold>(rows + r * dk, k, q, dk, g, kq, v + r, beta, y + r);
}

// R rows at a time (as many as V's registers hold), then one by one. Prefetching only the cold
// rows: it gains 35-50% where they come from L3/DRAM (a decode step's 18 MiB of states) and
// costs 7% in load slots where they are in L1 (the blocked prefill after a block's first token).
template <class V, int R>
void rows_step(float* rows, int64_t n_rows, const float* k, const float* q, int64_t dk, float g, const float* v,
               float beta, float* y, bool cold) {
  if (cold) return rows_range<V, R, true>(rows, n_rows, k, q, dk, g, v, beta, y);
  rows_range<V, R, false>(rows, n_rows, k, q, dk, g, v, beta, y);
}

}  // namespace rapid::compute::gdn
