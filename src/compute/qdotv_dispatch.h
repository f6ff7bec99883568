// The QDotV entry points of a lane kernel (kernels_avx2_lanes.cpp, kernels_avx512.cpp): the row
// loop over whole and partial 8-block groups, and the nt → template dispatch. Include after the
// ISA's intrinsics, hsum256 and a `fn##_group<NT, kFull>(w, x, g, m, acc)` for each kernel.
#pragma once
#include <algorithm>
#include <utility>

#include "compute/kernels.h"

namespace rapid::compute {
namespace {

// Calls f.template operator()<NT>() with NT = nt (1..kQDotVMaxNT): one instantiation per tile size.
template <class F, int... NT>
void with_nt(std::integer_sequence<int, NT...>, int nt, F&& f) {
  ((nt == NT + 1 ? f.template operator()<NT + 1>() : void()), ...);
}
template <class F>
void with_nt(int nt, F&& f) {
  with_nt(std::make_integer_sequence<int, Kernels::kQDotVMaxNT>{}, std::clamp(nt, 1, Kernels::kQDotVMaxNT), f);
}

}  // namespace
}  // namespace rapid::compute

#define RAPID_QDOTV(fn, B)                                                                       \
  template <int NT>                                                                              \
  void fn##_nt(const B* w, const ActLanes& x, int64_t nb, float* out) {                          \
    __m256 acc[NT];                                                                              \
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();                                   \
    const int64_t full = nb / 8;                                                                 \
    for (int64_t g = 0; g < full; ++g) fn##_group<NT, true>(w, x, g, 8, acc);                   \
    if (8 * full < nb) fn##_group<NT, false>(w, x, full, static_cast<int>(nb - 8 * full), acc);  \
    for (int t = 0; t < NT; ++t) out[t] = hsum256(acc[t]);                                       \
  }                                                                                              \
  void fn(const void* w, const ActLanes& x, int64_t nb, int nt, float* out) {                    \
    auto* wb = static_cast<const B*>(w);                                                         \
    switch (nt) {                                                                                \
      case 1: fn##_nt<1>(wb, x, nb, out); break;                                                 \
      case 2: fn##_nt<2>(wb, x, nb, out); break;                                                 \
      case 3: fn##_nt<3>(wb, x, nb, out); break;                                                 \
      case 4: fn##_nt<4>(wb, x, nb, out); break;                                                 \
      case 5: fn##_nt<5>(wb, x, nb, out); break;                                                 \
      case 6: fn##_nt<6>(wb, x, nb, out); break;                                                 \
      case 7: fn##_nt<7>(wb, x, nb, out); break;                                                 \
      case 8: fn##_nt<8>(wb, x, nb, out); break;                                                 \
      case 9: fn##_nt<9>(wb, x, nb, out); break;                                                 \
      case 10: fn##_nt<10>(wb, x, nb, out); break;                                               \
      case 11: fn##_nt<11>(wb, x, nb, out); break;                                               \
      case 12: fn##_nt<12>(wb, x, nb, out); break;                                               \
      case 13: fn##_nt<13>(wb, x, nb, out); break;                                               \
      case 14: fn##_nt<14>(wb, x, nb, out); break;                                               \
      case 15: fn##_nt<15>(wb, x, nb, out); break;                                               \
      default: fn##_nt<16>(wb, x, nb, out); break;                                               \
    }                                                                                            \
  }
