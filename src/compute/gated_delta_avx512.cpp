// AVX-512 rows step of the Gated DeltaNet recurrence and SiLU (compiled with -mavx512f/dq; used only when
// the CPU has them): gated_delta_rows.h over one __m512, tails by mask registers. Bitwise equal to
// the AVX2 step: same lanes, same operations per lane, and sum() folds the high 256 bits onto
// the low ones and then reduces them in AVX2's hsum256 order, so a sequence's state and outputs
// do not depend on which of the two ISAs ran it. It costs nothing measurable: the reduction is
// two of the ~40 vector operations of a row step at Dk = 128.
#include <immintrin.h>

#include "compute/avx2_hsum.h"
#include "compute/avx512_exp.h"
#include "compute/gated_delta.h"
#include "compute/gated_delta_rows.h"

namespace rapid::compute {
namespace {

struct V {
  using T = __m512;
  using M = __mmask16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static M mask(int64_t rem) { return static_cast<M>((1u << rem) - 1); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T load(const float* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  static void store(float* p, T x, M m) { _mm512_mask_storeu_ps(p, m, x); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(T x) { return hsum256(_mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1))); }
};

void silu(float* x, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : V::mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(x + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}

}  // namespace

gdn::RowsStep gdn::rows_step_avx512() { return gdn::rows_step<V, 4>; }
gdn::Silu gdn::silu_avx512() { return silu; }

}  // namespace rapid::compute
