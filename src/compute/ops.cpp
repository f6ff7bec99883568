#include "compute/ops.h"

#include <algorithm>
#include <cmath>

#include <emmintrin.h>

#include "compute/kernels.h"

namespace rapid::compute {

// Σ x² in double over eight independent chains (SSE2, in every x86-64): one chain waited on each
// add's latency (the norms were 6 % of a Qwen3.5 prefill). Every f32 square is exact in double.
double sum_squares(const float* x, int64_t n) {
  __m128d a[4] = {_mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd()};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 4; ++j) {
      const __m128d v = _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(x + i + 2 * j))));
      a[j] = _mm_add_pd(a[j], _mm_mul_pd(v, v));
    }
  alignas(16) double s[8];
  for (int j = 0; j < 4; ++j) _mm_store_pd(s + 2 * j, a[j]);
  for (; i < n; ++i) s[0] += static_cast<double>(x[i]) * x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, bool add_one, float* out) {
  // Sum of squares in double: cheap at these sizes and keeps parity with f32 references tight.
  const double ss = sum_squares(x, n);
  float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (!w) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  } else if (add_one) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * (1.0f + w[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * w[i];
  }
}

void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  // Mean and variance in double (two passes), as rms_norm: tight parity with f32 references.
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(n) + eps));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * w[i] + b[i];
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  if (mx == -INFINITY) {  // fully masked row: define as uniform zero output
    for (int64_t i = 0; i < n; ++i) x[i] = 0;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) { kernels().silu_mul(gate, up, n, out); }

void swiglu_oai_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    out[i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
  }
}

void gated_act_rows(const GatedAct& a, float* g, float* u, int64_t n, int64_t ld, int64_t r0, int64_t r1,
                    const float* gate_bias, const float* up_bias) {
  const int64_t m = r1 - r0;
  for (int64_t t = 0; t < n; ++t) {
    float *gt = g + t * ld + r0, *ut = u + t * ld + r0;
    if (gate_bias)
      for (int64_t r = 0; r < m; ++r) gt[r] += gate_bias[r0 + r];
    if (up_bias)
      for (int64_t r = 0; r < m; ++r) ut[r] += up_bias[r0 + r];
    switch (a.kind) {
      case GatedAct::Silu: silu_mul(gt, ut, m, gt); break;
      case GatedAct::GeluTanh: gelu_tanh_mul(gt, ut, m, gt); break;
      case GatedAct::SwigluOai: swiglu_oai_mul(gt, ut, m, a.alpha, a.limit, gt); break;
    }
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  kernels().gelu_tanh_mul(gate, up, n, out);
}

void gelu_erf_inplace(float* x, int64_t n) {
  const float r = 0.7071067811865476f;  // 1/sqrt(2)
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * r));
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

}  // namespace rapid::compute
