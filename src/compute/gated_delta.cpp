#include "compute/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/ops.h"

namespace rapid::compute {
namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

void rows_step_scalar_impl(float* rows, int64_t n_rows, const float* k, const float* q, int64_t dk, float g,
                           const float* v, float beta, float* y, bool) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = rows + r * dk;
    float kv = 0;
    for (int64_t i = 0; i < dk; ++i) {
      row[i] *= g;
      kv += row[i] * k[i];
    }
    const float d = (v[r] - kv) * beta;
    float out = 0;
    for (int64_t i = 0; i < dk; ++i) {
      row[i] += k[i] * d;
      out += row[i] * q[i];
    }
    y[r] = out;
  }
}

void silu_scalar_impl(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = silu(x[i]);
}

gdn::Silu silu_fn() { return active_isa() == Isa::Avx512 ? gdn::silu_avx512() : gdn::silu_scalar(); }

gdn::RowsStep rows_step() {
  switch (active_isa()) {
    case Isa::Avx512: return gdn::rows_step_avx512();
    case Isa::Avx2: return gdn::rows_step_avx2();
    default: return gdn::rows_step_scalar();
  }
}

}  // namespace

gdn::RowsStep gdn::rows_step_scalar() { return rows_step_scalar_impl; }
gdn::Silu gdn::silu_scalar() { return silu_scalar_impl; }

void causal_conv1d_silu(const float* w, int64_t C, int64_t K, float* state, const float* x,
                        int64_t n, float* out, int64_t c0, int64_t c1) {
  const int64_t keep = K - 1, m = c1 - c0;
  const gdn::Silu act = silu_fn();
  // The taps by j, contiguous over the channels (w is [C, K]: a stride of K would keep the channel
  // loop scalar, 6 % of a Qwen3.5 prefill). The same products and sums in the same order.
  thread_local std::vector<float> taps;
  taps.resize(static_cast<size_t>(K * m));
  for (int64_t j = 0; j < K; ++j)
    for (int64_t c = 0; c < m; ++c) taps[j * m + c] = w[(c0 + c) * K + j];
  // window = [state (K-1 rows); x (n rows)]; token t reads rows t .. t+K-1.
  auto in = [&](int64_t r) { return r < keep ? state + r * C : x + (r - keep) * C; };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * C + c0;
    if (K == 4) {  // every released hybrid: the sum in registers, one pass over the channels
      const float *r0 = in(t) + c0, *r1 = in(t + 1) + c0, *r2 = in(t + 2) + c0, *r3 = in(t + 3) + c0;
      const float *w0 = taps.data(), *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m;
      for (int64_t c = 0; c < m; ++c) {
        float acc = 0;
        acc += w0[c] * r0[c];
        acc += w1[c] * r1[c];
        acc += w2[c] * r2[c];
        acc += w3[c] * r3[c];
        o[c] = acc;
      }
    } else {
      for (int64_t c = 0; c < m; ++c) o[c] = 0;
      for (int64_t j = 0; j < K; ++j) {
        const float* r = in(t + j) + c0;
        const float* wj = taps.data() + j * m;
        for (int64_t c = 0; c < m; ++c) o[c] += wj[c] * r[c];
      }
    }
    act(o, m);
  }
  // New state: the last K-1 rows of the window. Row r takes window row n + r > r, so in ascending
  // r a state row is always read before it is overwritten.
  for (int64_t r = 0; r < keep; ++r)
    std::memmove(state + r * C + c0, in(n + r) + c0, static_cast<size_t>(m) * sizeof(float));
}

void l2norm_scaled(float* x, int64_t n, float scale, float eps) {
  const float ss = static_cast<float>(sum_squares(x, n));
  const float f = scale / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

void gated_delta_gates(const float* a, const float* b, const float* A_log, const float* dt_bias,
                       int64_t v_heads, float* log_g, float* beta) {
  for (int64_t h = 0; h < v_heads; ++h) {
    const float u = a[h] + dt_bias[h];
    const float softplus = std::fmax(u, 0.0f) + std::log1p(std::exp(-std::fabs(u)));
    log_g[h] = -std::exp(A_log[h]) * softplus;
    beta[h] = 1.0f / (1.0f + std::exp(-b[h]));
  }
}

void gated_delta_step(const GatedDeltaShape& s, const float* q, const float* k, const float* v,
                      const float* log_g, const float* beta, float* state, float* y, int64_t h0, int64_t h1) {
  const gdn::RowsStep step = rows_step();
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = s.k_head(h) * s.k_dim;
    step(state + h * s.v_dim * s.k_dim, s.v_dim, k + kh, q + kh, s.k_dim, std::exp(log_g[h]), v + h * s.v_dim,
         beta[h], y + h * s.v_dim, true);
  }
}

void gated_delta_recurrent(const GatedDeltaShape& s, const float* qkv, int64_t ld, const float* log_g,
                           const float* beta, int64_t n, float* state, float* y, int64_t ldy, int64_t h0,
                           int64_t h1) {
  const gdn::RowsStep step = rows_step();
  const int64_t key_dim = s.k_heads * s.k_dim;
  // 16 KiB of state rows per block stay in L1 while a span of tokens streams by; spans of 64
  // tokens keep the q/k rows a head's blocks re-read in L2 (the token stride is a whole qkv row).
  const int64_t block = std::max<int64_t>(1, 4096 / s.k_dim), span = 64;
  for (int64_t t0 = 0; t0 < n; t0 += span) {
    const int64_t t1 = std::min(n, t0 + span);
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kh = s.k_head(h) * s.k_dim;
      float* S = state + h * s.v_dim * s.k_dim;
      for (int64_t r0 = 0; r0 < s.v_dim; r0 += block) {
        const int64_t rows = std::min(block, s.v_dim - r0);
        for (int64_t t = t0; t < t1; ++t) {
          const float* row = qkv + t * ld;
          step(S + r0 * s.k_dim, rows, row + key_dim + kh, row + kh, s.k_dim, std::exp(log_g[t * s.v_heads + h]),
               row + 2 * key_dim + h * s.v_dim + r0, beta[t * s.v_heads + h], y + t * ldy + h * s.v_dim + r0,
               t == t0);
        }
      }
    }
  }
}

void gated_rms_norm(const float* x, const float* z, const float* w, int64_t n, float eps, float* out) {
  const float ss = static_cast<float>(sum_squares(x, n));
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  thread_local std::vector<float> sz;  // silu(z): out may alias x, not a scratch row
  sz.assign(z, z + n);
  silu_fn()(sz.data(), n);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r * w[i] * sz[i];
}

}  // namespace rapid::compute
