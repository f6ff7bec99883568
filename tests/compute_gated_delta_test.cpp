// The chunk-parallel (WY) Gated DeltaNet kernel against the recurrent form it replaces for
// prefill (the recurrent form is itself checked against mlx-lm in model_qwen35_test), prefill's
// blocked recurrent form against decode's steps, and the SIMD rows steps against the scalar one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/gated_delta.h"

using namespace rapid;
using namespace rapid::compute;

namespace {

struct Inputs {
  GatedDeltaShape s;
  int64_t n, ld;
  std::vector<float> qkv, log_g, beta, state0;
};

// Realistic inputs: unit-norm k, q with the 1/sqrt(Dk) readout scale, decays in (0, 1).
Inputs make(GatedDeltaShape s, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  Inputs in{s, n, 2 * s.k_heads * s.k_dim + s.v_heads * s.v_dim, {}, {}, {}, {}};
  in.qkv.resize(n * in.ld);
  for (float& x : in.qkv) x = nd(rng);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < 2 * s.k_heads; ++h)
      l2norm_scaled(in.qkv.data() + t * in.ld + h * s.k_dim, s.k_dim,
                    h < s.k_heads ? 1.0f / std::sqrt(float(s.k_dim)) : 1.0f, 1e-6f);
  in.log_g.resize(n * s.v_heads);
  in.beta.resize(n * s.v_heads);
  for (float& x : in.log_g) x = -3.0f * ud(rng) * ud(rng);
  for (float& x : in.beta) x = ud(rng);
  in.state0.resize(s.state_floats());
  for (float& x : in.state0) x = 0.3f * nd(rng);
  return in;
}

void recurrent(const Inputs& in, std::vector<float>& state, std::vector<float>& y) {
  const auto& s = in.s;
  const int64_t kd = s.k_heads * s.k_dim;
  state = in.state0;
  y.assign(in.n * s.v_heads * s.v_dim, 0.0f);
  for (int64_t t = 0; t < in.n; ++t) {
    const float* r = in.qkv.data() + t * in.ld;
    gated_delta_step(s, r, r + kd, r + 2 * kd, in.log_g.data() + t * s.v_heads, in.beta.data() + t * s.v_heads,
                     state.data(), y.data() + t * s.v_heads * s.v_dim, 0, s.v_heads);
  }
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double mx = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, double(std::fabs(b[i])));
    d = std::max(d, double(std::fabs(a[i] - b[i])));
  }
  return d / mx;
}

}  // namespace

// Several chunks and a partial last one, 2 value heads per key head, a Dk that is not a multiple
// of 8 (the AVX2 tails), at every ISA level: outputs and final state within 1e-5 of the
// largest value.
TEST(GatedDeltaChunked, EqualsRecurrentForm) {
  const Isa saved = active_isa();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    set_active_isa(isa);
    for (auto [shape, n] : {std::pair{GatedDeltaShape{2, 4, 32, 24}, int64_t(150)},
                            std::pair{GatedDeltaShape{1, 1, 20, 16}, int64_t(64)},
                            std::pair{GatedDeltaShape{2, 2, 16, 16}, int64_t(17)}}) {
      Inputs in = make(shape, n, 7 + static_cast<uint32_t>(n));
      std::vector<float> s_ref, y_ref;
      recurrent(in, s_ref, y_ref);
      std::vector<float> s_ch = in.state0, y_ch(y_ref.size(), 0.0f);
      const int64_t vd = shape.v_heads * shape.v_dim;
      gated_delta_chunked(shape, in.qkv.data(), in.ld, in.log_g.data(), in.beta.data(), n, s_ch.data(), y_ch.data(),
                          vd, 0, shape.v_heads);
      EXPECT_LE(rel_err(y_ch, y_ref), 1e-5) << "n " << n << " isa " << isa_name(active_isa());
      EXPECT_LE(rel_err(s_ch, s_ref), 1e-5) << "n " << n << " isa " << isa_name(active_isa());
    }
  }
  set_active_isa(saved);
}

// Splitting the heads (as the thread pool does) changes nothing: heads are independent.
TEST(GatedDeltaChunked, HeadRangesAreIndependent) {
  GatedDeltaShape shape{2, 4, 32, 32};
  Inputs in = make(shape, 80, 3);
  const int64_t vd = shape.v_heads * shape.v_dim;
  std::vector<float> s1 = in.state0, y1(80 * vd), s2 = in.state0, y2(80 * vd);
  gated_delta_chunked(shape, in.qkv.data(), in.ld, in.log_g.data(), in.beta.data(), 80, s1.data(), y1.data(), vd, 0, 4);
  for (int64_t h = 0; h < 4; ++h)
    gated_delta_chunked(shape, in.qkv.data(), in.ld, in.log_g.data(), in.beta.data(), 80, s2.data(), y2.data(), vd, h,
                        h + 1);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(s1, s2);
}

// Prefill's recurrent form (blocks of rows through all tokens) is bitwise n decode steps, at
// every ISA; a Dv that is not a multiple of the row block or of the 4-row interleave.
TEST(GatedDeltaRecurrent, BitwiseEqualsSteps) {
  const Isa saved = active_isa();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    set_active_isa(isa);
    for (auto [shape, n] : {std::pair{GatedDeltaShape{2, 4, 32, 43}, int64_t(37)},
                            std::pair{GatedDeltaShape{2, 4, 128, 75, true}, int64_t(9)}}) {
      Inputs in = make(shape, n, 11);
      std::vector<float> s_ref, y_ref;
      recurrent(in, s_ref, y_ref);
      std::vector<float> s_r = in.state0, y_r(y_ref.size(), 0.0f);
      const int64_t vd = shape.v_heads * shape.v_dim;
      gated_delta_recurrent(shape, in.qkv.data(), in.ld, in.log_g.data(), in.beta.data(), n, s_r.data(), y_r.data(), vd,
                            0, shape.v_heads);
      EXPECT_EQ(y_r, y_ref) << isa_name(active_isa());
      EXPECT_EQ(s_r, s_ref) << isa_name(active_isa());
    }
  }
  set_active_isa(saved);
}

// Each SIMD rows step against the scalar one (different summation order only), and AVX-512
// bitwise equal to AVX2 (the same 16-lane arithmetic); Dk with and without a tail, row counts
// around the 4-row interleave.
TEST(GatedDeltaStep, SimdMatchesScalarAndAvx512IsAvx2) {
  if (best_isa() < Isa::Avx2) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (int64_t dk : {8, 13, 32, 45, 128}) {
    for (int64_t rows : {1, 4, 7}) {
      std::vector<float> k(dk), q(dk), v(rows), s0(rows * dk);
      for (int64_t i = 0; i < dk; ++i) k[i] = nd(rng), q[i] = nd(rng);
      for (float& x : v) x = nd(rng);
      for (float& x : s0) x = nd(rng);
      auto run = [&](gdn::RowsStep f, std::vector<float>& s, std::vector<float>& y) {
        s = s0;
        y.assign(rows, 0.0f);
        f(s.data(), rows, k.data(), q.data(), dk, 0.9f, v.data(), 0.4f, y.data(), rows == 4);
      };
      std::vector<float> s1, y1, s2, y2;
      run(gdn::rows_step_scalar(), s1, y1);
      run(gdn::rows_step_avx2(), s2, y2);
      for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(y1[r], y2[r], 1e-4f * (1 + std::fabs(y1[r]))) << dk;
      for (size_t i = 0; i < s1.size(); ++i) EXPECT_NEAR(s1[i], s2[i], 1e-5f * (1 + std::fabs(s1[i]))) << dk;
      if (best_isa() < Isa::Avx512) continue;
      std::vector<float> s3, y3;
      run(gdn::rows_step_avx512(), s3, y3);
      EXPECT_EQ(y3, y2) << "dk " << dk << " rows " << rows;
      EXPECT_EQ(s3, s2) << "dk " << dk << " rows " << rows;
    }
  }
}

// The AVX-512 SiLU (polynomial e^-x) against the scalar one (std::exp), over the range activations
// take and beyond (exp overflow: silu → -0, and large x: silu → x), with a tail of 7.
TEST(GatedDeltaSilu, Avx512MatchesScalar) {
  if (best_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  std::vector<float> a;
  for (float x = -120.0f; x <= 120.0f; x += 0.37f) a.push_back(x);
  for (float x = -4.0f; x <= 4.0f; x += 0.0013f) a.push_back(x);
  a.resize(a.size() / 16 * 16 + 7);
  std::vector<float> b = a;
  gdn::silu_scalar()(a.data(), static_cast<int64_t>(a.size()));
  gdn::silu_avx512()(b.data(), static_cast<int64_t>(b.size()));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 3e-7f * std::fabs(a[i]) + 1e-30f) << i;
}
