// AVX2 rows step of the Gated DeltaNet recurrence (compiled with -mavx2 -mfma; used only when the
// CPU has them): gated_delta_rows.h over 16 lanes held as two __m256 (lanes 0-7, 8-15).
#include <immintrin.h>

#include "compute/avx2_hsum.h"
#include "compute/gated_delta.h"
#include "compute/gated_delta_rows.h"

namespace rapid::compute {
namespace {

struct V {
  struct T {
    __m256 lo, hi;
  };
  struct M {
    __m256i lo, hi;
  };
  static T zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static T set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static __m256i lanes_below(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static M mask(int64_t rem) { return {lanes_below(rem), lanes_below(rem - 8)}; }
  static T load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static T load(const float* p, M m) { return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)}; }
  static void store(float* p, T x) {
    _mm256_storeu_ps(p, x.lo);
    _mm256_storeu_ps(p + 8, x.hi);
  }
  static void store(float* p, T x, M m) {
    _mm256_maskstore_ps(p, m.lo, x.lo);
    _mm256_maskstore_ps(p + 8, m.hi, x.hi);
  }
  static T mul(T a, T b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static T fmadd(T a, T b, T c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static float sum(T x) { return hsum256(_mm256_add_ps(x.lo, x.hi)); }
};

}  // namespace

gdn::RowsStep gdn::rows_step_avx2() { return gdn::rows_step<V, 2>; }

}  // namespace rapid::compute
