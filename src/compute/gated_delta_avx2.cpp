// AVX2 row step of the Gated DeltaNet recurrence (compiled with -mavx2 -mfma; used only when the
// CPU has them). Eight state elements per lane group, scalar tail.
#include <immintrin.h>

#include "compute/avx2_hsum.h"
#include "compute/gated_delta.h"

namespace rapid::compute {
namespace {


void row_step(float* row, const float* k, const float* q, int64_t dk, float g, float v, float beta, float* y) {
  const int64_t n8 = dk & ~int64_t(7);
  const __m256 gv = _mm256_set1_ps(g);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i), gv);
    _mm256_storeu_ps(row + i, r);
    acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(k + i), acc);
  }
  float kv = hsum256(acc);
  for (int64_t i = n8; i < dk; ++i) {
    row[i] *= g;
    kv += row[i] * k[i];
  }
  const float d = (v - kv) * beta;
  const __m256 dv = _mm256_set1_ps(d);
  acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), dv, _mm256_loadu_ps(row + i));
    _mm256_storeu_ps(row + i, r);
    acc = _mm256_fmadd_ps(r, _mm256_loadu_ps(q + i), acc);
  }
  float out = hsum256(acc);
  for (int64_t i = n8; i < dk; ++i) {
    row[i] += k[i] * d;
    out += row[i] * q[i];
  }
  *y = out;
}

}  // namespace

gdn::RowStep gdn::row_step_avx2() { return row_step; }

}  // namespace rapid::compute
