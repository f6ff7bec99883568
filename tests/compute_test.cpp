// Kernels vs independent references: tensor/'s scalar dequantizer (checked against gguf-py and
// mlx.core in model_loader_test), hardware F16C/AVX512-BF16 conversions, double-precision dot products, transformers' RoPE
// frequencies (tests/golden/model/rope_cases.json) and a naive attention.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <immintrin.h>
#include <nlohmann/json.hpp>
#include <memory>
#include <limits>
#include <random>

#include <unistd.h>
#include <set>

#include "compute/attention.h"
#include "compute/cpu_features.h"
#include "compute/kernels.h"
#include "compute/matmul.h"
#include "compute/ops.h"
#include "compute/rope.h"
#include "compute/thread_pool.h"
#include "matmul_invariance.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/lane_layout.h"
#include "tensor/mlx_affine.h"
#include "tensor/tensor.h"

using namespace rapid;
using namespace rapid::compute;

namespace {

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::Scalar};
  if (best_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (best_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
}

// Random but well-formed blocks: f16 scales set to moderate values, the rest random bytes.
std::vector<uint8_t> random_rows(tensor::DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  size_t rb = tensor::row_bytes(t, cols);
  std::vector<uint8_t> buf(rb * rows);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> sc(0.001f, 0.05f);
  auto f16 = [&](uint8_t* p) { uint16_t h = tensor::f32_to_f16(sc(rng) * (rng() & 1 ? 1 : -1)); std::memcpy(p, &h, 2); };
  size_t bb = block_bytes(t);
  for (size_t off = 0; off < buf.size(); off += bb) {
    uint8_t* b = buf.data() + off;
    switch (t) {
      case tensor::DType::Q4_0: case tensor::DType::Q5_0: case tensor::DType::Q8_0: f16(b); break;
      case tensor::DType::IQ4_NL: case tensor::DType::IQ4_XS: f16(b); break;
      case tensor::DType::IQ2_XXS: case tensor::DType::IQ2_XS: case tensor::DType::IQ2_S:
      case tensor::DType::IQ3_XXS: case tensor::DType::IQ3_S: case tensor::DType::IQ1_S: f16(b); break;
      case tensor::DType::IQ1_M: {  // d's 16 bits in the top nibbles of the four scale words (bytes 48..55)
        uint16_t d, sc[4];
        f16(reinterpret_cast<uint8_t*>(&d));
        std::memcpy(sc, b + 48, 8);
        for (int k = 0; k < 4; ++k) sc[k] = static_cast<uint16_t>((sc[k] & 0x0fff) | ((d >> (4 * k)) & 15) << 12);
        std::memcpy(b + 48, sc, 8);
        break;
      }
      case tensor::DType::Q4_1: case tensor::DType::Q5_1: f16(b); f16(b + 2); break;
      case tensor::DType::Q2_K: f16(b + 80); f16(b + 82); break;
      case tensor::DType::Q3_K: f16(b + 108); break;
      case tensor::DType::Q4_K: case tensor::DType::Q5_K: f16(b); f16(b + 2); break;
      case tensor::DType::Q6_K: f16(b + 208); break;
      case tensor::DType::F16: f16(b); break;
      case tensor::DType::BF16: { uint16_t h = tensor::f32_to_bf16(sc(rng) * 20 - 0.5f); std::memcpy(b, &h, 2); break; }
      case tensor::DType::F32: { float f = sc(rng) * 20 - 0.5f; std::memcpy(b, &f, 4); break; }
      default: break;
    }
  }
  return buf;
}

std::vector<float> random_vec(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The load-time lane layouts (tensor/lane_layout.h) and their kernels, per GGUF format.
struct LaneFormat {
  tensor::DType from, to;
  Kernels::QDotV Kernels::*gathering, Kernels::*lanes;
  void repack(const std::vector<uint8_t>& src, int64_t rows, int64_t nb, std::vector<uint8_t>& dst) const {
    const size_t rb = tensor::row_bytes(from, nb * 32);
    dst.resize(src.size());
    for (int64_t r = 0; r < rows; ++r) tensor::repack_lanes(from, src.data() + r * rb, nb * 32, dst.data() + r * rb);
  }
};
const LaneFormat kLaneFormats[] = {
    {tensor::DType::Q8_0, tensor::DType::Q8_0_LANES, &Kernels::dot_q8_0v, &Kernels::dot_q8_0_lanes},
    {tensor::DType::Q4_0, tensor::DType::Q4_0_LANES, &Kernels::dot_q4_0v, &Kernels::dot_q4_0_lanes},
    {tensor::DType::Q4_1, tensor::DType::Q4_1_LANES, &Kernels::dot_q4_1v, &Kernels::dot_q4_1_lanes},
    {tensor::DType::Q4_K, tensor::DType::Q4_K_LANES, &Kernels::dot_q4_kv, &Kernels::dot_q4_k_lanes},
    {tensor::DType::Q6_K, tensor::DType::Q6_K_LANES, &Kernels::dot_q6_kv, &Kernels::dot_q6_k_lanes},
    {tensor::DType::IQ4_NL, tensor::DType::IQ4_NL_LANES, &Kernels::dot_iq4_nlv, &Kernels::dot_iq4_nl_lanes},
    {tensor::DType::IQ4_XS, tensor::DType::IQ4_XS_LANES, &Kernels::dot_iq4_xsv, &Kernels::dot_iq4_xs_lanes},
};
// A kernel's nb: 32-element blocks, or super-blocks for the K-quants.
int64_t kernel_nb(tensor::DType t, int64_t nb) { return nb / (tensor::block_elems(t) / 32); }

// A [rows, cols] weight of type t over buf's bytes.
tensor::Tensor weight_tensor(tensor::DType t, int64_t rows, int64_t cols, const std::vector<uint8_t>& buf) {
  tensor::Tensor tt;
  tt.name = "w";
  tt.dtype = t;
  tt.shape = {rows, cols};
  tt.data = buf.data();
  tt.nbytes = buf.size();
  return tt;
}

const tensor::DType kAllGgml[] = {tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q5_0, tensor::DType::Q5_1, tensor::DType::Q8_0,
                          tensor::DType::Q2_K, tensor::DType::Q3_K, tensor::DType::Q4_K, tensor::DType::Q5_K, tensor::DType::Q6_K,
                          tensor::DType::IQ4_NL, tensor::DType::IQ4_XS, tensor::DType::IQ2_XXS, tensor::DType::IQ2_XS,
                          tensor::DType::IQ2_S, tensor::DType::IQ3_XXS, tensor::DType::IQ3_S, tensor::DType::IQ1_S,
                          tensor::DType::IQ1_M};

}  // namespace

TEST(Kernels, QuantizeActIsIdenticalOnEveryIsa) {
  std::mt19937 rng(3);
  auto x = random_vec(1024, rng, 2.0f);
  x[5] = 0;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  std::vector<tensor::ActQ8> ref(32), got(32);
  kernels_for(Isa::Scalar).quantize_act(x.data(), 1024, ref.data());
  for (Isa isa : isas()) {
    kernels_for(isa).quantize_act(x.data(), 1024, got.data());
    for (int b = 0; b < 32; ++b) {
      EXPECT_EQ(ref[b].d, got[b].d) << isa_name(isa);
      EXPECT_EQ(ref[b].sum, got[b].sum) << isa_name(isa);
      EXPECT_EQ(std::memcmp(ref[b].qs, got[b].qs, 32), 0) << isa_name(isa) << " block " << b;
    }
  }
  // The int8 values really reconstruct x: |x - d q| <= d/2.
  for (int b = 0; b < 32; ++b)
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(x[b * 32 + j] - ref[b].d * ref[b].qs[j]), ref[b].d * 0.5f + 1e-7f);
}

// The gated MLPs' silu(g)·u and gelu_tanh(g)·u on every ISA: within a few float ulps of double, at
// the extremes too (exp over- and underflow), and every element the same bits whatever range it is
// computed in (threads split an MLP's rows differently for different batches: batch invariance).
// gelu_tanh is computed as g·σ(2z); its double reference is the same identity, tied to the
// tanh definition where that is well conditioned. Its error grows with |2z|, which is rounded in
// f32 before e^(−2z): a relative 2z·ε more.
TEST(Kernels, GatedActivationsMatchDoubleAndIgnoreTheRange) {
  std::mt19937 rng(23);
  std::vector<float> g, u;
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.5f, -88.5f, 89.0f, -89.0f, 100.0f, -100.0f, 120.0f,
                  -120.0f, 1e30f, -1e30f})
    g.push_back(v);
  for (int i = 0; i < 4000; ++i) g.push_back(std::uniform_real_distribution<float>(-20.f, 20.f)(rng));
  for (int i = 0; i < 200; ++i) g.push_back(std::uniform_real_distribution<float>(-0.01f, 0.01f)(rng));
  for (size_t i = 0; i < g.size(); ++i) u.push_back(std::uniform_real_distribution<float>(-3.f, 3.f)(rng));
  const int64_t n = static_cast<int64_t>(g.size());
  const double k = std::sqrt(2.0 / M_PI);
  for (bool gelu : {false, true})
    for (Isa isa : isas()) {
      const Kernels& kr = kernels_for(isa);
      const auto f = gelu ? kr.gelu_tanh_mul : kr.silu_mul;
      const std::string what = std::string(gelu ? "gelu_tanh " : "silu ") + isa_name(isa);
      std::vector<float> out(n);
      f(g.data(), u.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const double x = g[i], a = gelu ? 2.0 * k * (x + 0.044715 * x * x * x) : x;
        const double ref = x / (1.0 + std::exp(-a)) * u[i];
        const double tol = gelu ? 1e-6 + 5e-7 * std::min(std::fabs(a), 200.0) : 1e-6;
        EXPECT_NEAR(out[i], ref, tol * std::fabs(ref) + 1e-30) << what << " g " << g[i];
        if (gelu && std::fabs(x) < 3)
          EXPECT_NEAR(ref, 0.5 * x * (1.0 + std::tanh(a / 2)) * u[i], 1e-12 * (std::fabs(ref) + 1e-30)) << x;
      }
      for (int64_t r0 : {1, 3, 7, 9, 15, 17})
        for (int64_t len : {1, 2, 5, 8, 13, 16, 31, 100}) {
          std::vector<float> part(len);
          f(g.data() + r0, u.data() + r0, len, part.data());
          ASSERT_EQ(std::memcmp(part.data(), out.data() + r0, len * sizeof(float)), 0) << what << " " << r0 << "+" << len;
        }
      std::vector<float> in_place = g;  // out may alias gate
      f(in_place.data(), u.data(), n, in_place.data());
      ASSERT_EQ(std::memcmp(in_place.data(), out.data(), n * sizeof(float)), 0) << what;
    }
}

// Greedy sampling's argmax is std::max_element's answer on every ISA: first index among ties,
// NaNs never chosen (except x[0], which max_element returns), -inf-only vectors, every tail length.
TEST(Kernels, ArgmaxIsMaxElementOnEveryIsa) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> coarse(-4, 4);  // few distinct values: many ties
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> cases;
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 1000, 49152, 49155}) {
    std::vector<float> a(n), b(n);
    for (auto& e : a) e = std::uniform_real_distribution<float>(-30.f, 30.f)(rng);
    for (auto& e : b) e = float(coarse(rng));
    cases.push_back(a);
    cases.push_back(b);
    std::vector<float> c = b;  // NaNs sprinkled everywhere but x[0], -inf too
    for (int64_t i = 1; i < n; i += 3) c[i] = nan;
    for (int64_t i = 2; i < n; i += 5) c[i] = -inf;
    cases.push_back(c);
    cases.push_back(std::vector<float>(n, -inf));
    std::vector<float> d(n, -inf);  // NaN first: max_element returns 0
    d[0] = nan;
    if (n > 1) d[n - 1] = 1.0f;
    cases.push_back(d);
    std::vector<float> e = b;  // the max only in the scalar tail
    e[n - 1] = 100.0f;
    cases.push_back(e);
  }
  for (Isa isa : isas())
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& x = cases[c];
      EXPECT_EQ(kernels_for(isa).argmax_f32(x.data(), int64_t(x.size())), std::max_element(x.begin(), x.end()) - x.begin())
          << isa_name(isa) << " case " << c << " n " << x.size();
    }
}

// Integer dots == dequantized weights · dequantized int8 activations (exact math in double).
TEST(Kernels, IntegerDotsMatchDequantizedReference) {
  std::mt19937 rng(4);
  const int64_t cols = 768, nb = cols / 32;
  for (tensor::DType t : {tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q8_0, tensor::DType::Q4_K, tensor::DType::Q6_K, tensor::DType::Q5_0, tensor::DType::Q5_1,
                 tensor::DType::Q5_K}) {
    auto w = random_rows(t, 1, cols, rng);
    std::vector<float> wf(cols);
    tensor::dequantize_row_raw(t, w.data(), cols, wf.data());
    std::vector<tensor::ActQ8> xq(4 * nb);
    for (int tt = 0; tt < 4; ++tt) {
      auto x = random_vec(cols, rng);
      kernels_for(Isa::Scalar).quantize_act(x.data(), cols, xq.data() + tt * nb);
    }
    double ref[4];
    for (int tt = 0; tt < 4; ++tt) {
      double s = 0, mag = 0;
      for (int64_t i = 0; i < cols; ++i) {
        const tensor::ActQ8& a = xq[tt * nb + i / 32];
        double xv = static_cast<double>(a.d) * a.qs[i % 32];
        s += wf[i] * xv;
        mag += std::fabs(wf[i] * xv);
      }
      ref[tt] = s;
      (void)mag;
    }
    for (Isa isa : isas()) {
      const Kernels& k = kernels_for(isa);
      auto fn = t == tensor::DType::Q4_0 ? k.dot_q4_0 : t == tensor::DType::Q4_1 ? k.dot_q4_1 : t == tensor::DType::Q8_0 ? k.dot_q8_0
              : t == tensor::DType::Q4_K ? k.dot_q4_k : t == tensor::DType::Q6_K ? k.dot_q6_k
              : t == tensor::DType::Q5_0 ? k.dot_q5_0 : t == tensor::DType::Q5_1 ? k.dot_q5_1 : k.dot_q5_k;
      ASSERT_TRUE(fn) << tensor::dtype_name(t) << " " << isa_name(isa);
      float one[4];  // each activation row alone (nt = 1)
      for (int tt = 0; tt < 4; ++tt) fn(w.data(), xq.data() + tt * nb, nb, cols / tensor::block_elems(t), 1, one + tt);
      for (int nt = 1; nt <= 4; ++nt) {
        float out[4];
        fn(w.data(), xq.data(), nb, cols / tensor::block_elems(t), nt, out);
        for (int tt = 0; tt < nt; ++tt) {
          EXPECT_NEAR(out[tt], ref[tt], 1e-4 * (std::fabs(ref[tt]) + 1.0))
              << tensor::dtype_name(t) << " " << isa_name(isa) << " nt " << nt << " t " << tt;
          // A row's result never depends on how many rows share the tile (batch invariance).
          EXPECT_EQ(out[tt], one[tt]) << tensor::dtype_name(t) << " " << isa_name(isa) << " nt " << nt << " t " << tt;
        }
      }
    }
  }
}

TEST(Kernels, FloatDotsAndAxpyMatchDouble) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 16, 33, 64, 100, 577}) {
    auto a = random_vec(n, rng), b = random_vec(n, rng);
    std::vector<uint16_t> h(n), bf(n);
    for (int64_t i = 0; i < n; ++i) { h[i] = tensor::f32_to_f16(b[i]); bf[i] = tensor::f32_to_bf16(b[i]); }
    double r32 = 0, r16 = 0, rbf = 0;
    for (int64_t i = 0; i < n; ++i) {
      r32 += (double)a[i] * b[i];
      r16 += (double)a[i] * tensor::f16_to_f32(h[i]);
      rbf += (double)a[i] * tensor::bf16_to_f32(bf[i]);
    }
    for (Isa isa : isas()) {
      const Kernels& k = kernels_for(isa);
      double tol = 1e-5 * n;
      EXPECT_NEAR(k.dot_f32(a.data(), b.data(), n), r32, tol) << isa_name(isa) << " n " << n;
      EXPECT_NEAR(k.dot_f16(a.data(), h.data(), n), r16, tol) << isa_name(isa) << " n " << n;
      EXPECT_NEAR(k.dot_bf16(a.data(), bf.data(), n), rbf, tol) << isa_name(isa) << " n " << n;
      std::vector<float> y(n, 1.0f), y16(n, 1.0f), ybf(n, 1.0f);
      k.axpy_f32(0.5f, b.data(), y.data(), n);
      k.axpy_f16(0.5f, h.data(), y16.data(), n);
      k.axpy_bf16(0.5f, bf.data(), ybf.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(y[i], 1.0 + 0.5 * b[i], 1e-6);
        EXPECT_NEAR(y16[i], 1.0 + 0.5 * tensor::f16_to_f32(h[i]), 1e-6);
        EXPECT_NEAR(ybf[i], 1.0 + 0.5 * tensor::bf16_to_f32(bf[i]), 1e-6);
      }
      std::vector<uint16_t> h2(n), bf2(n);
      k.f32_to_f16(b.data(), h2.data(), n);
      k.f32_to_bf16(b.data(), bf2.data(), n);
      EXPECT_EQ(h, h2) << isa_name(isa);
      EXPECT_EQ(bf, bf2) << isa_name(isa);
    }
  }
}

// matmul over every weight format, 1 and 2 threads, exact and fast paths, vs double reference.
TEST(Matmul, EveryFormatMatchesDequantizedReference) {
  std::mt19937 rng(6);
  const int64_t rows = 37, cols = 512;
  std::vector<tensor::DType> types(std::begin(kAllGgml), std::end(kAllGgml));
  types.insert(types.end(), {tensor::DType::F32, tensor::DType::F16, tensor::DType::BF16});
  ThreadPool p1(1), p2(2);
  for (Isa isa : isas())
  for (tensor::DType t : types) {
    set_active_isa(isa);
    auto buf = random_rows(t, rows, cols, rng);
    const tensor::Tensor tt = weight_tensor(t, rows, cols, buf);
    WeightView w = WeightView::of(tt);
    std::vector<float> wf(rows * cols);
    for (int64_t r = 0; r < rows; ++r) dequantize_row(tt, r, wf.data() + r * cols);
    for (int64_t n : {1, 3, 6}) {
      auto x = random_vec(n * cols, rng);
      std::vector<double> ref(n * rows), mag(n * rows);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double s = 0, m = 0;
          for (int64_t c = 0; c < cols; ++c) {
            s += (double)wf[r * cols + c] * x[i * cols + c];
            m += std::fabs((double)wf[r * cols + c] * x[i * cols + c]);
          }
          ref[i * rows + r] = s;
          mag[i * rows + r] = m;
        }
      for (MatmulPath path : {MatmulPath::Exact, MatmulPath::Fast}) {
        std::vector<float> y1(n * rows), y2(n * rows);
        MatmulScratch s1, s2;
        matmul(w, x.data(), n, y1.data(), p1, s1, path);
        matmul(w, x.data(), n, y2.data(), p2, s2, path);
        EXPECT_EQ(y1, y2) << "thread count changed the result, " << tensor::dtype_name(t);
        // Exact: f32 rounding only. Fast: int8 activations (≤ 1/254 relative per element).
        double rel = path == MatmulPath::Exact ? 1e-5 : 1e-2;
        for (int64_t i = 0; i < n * rows; ++i)
          ASSERT_NEAR(y1[i], ref[i], rel * mag[i] + 1e-6)
              << tensor::dtype_name(t) << " " << isa_name(isa) << (path == MatmulPath::Exact ? " exact" : " fast")
              << " n " << n << " i " << i;
      }
    }
  }
  set_active_isa(best_isa());
}

// Prefill-sized calls walk rows in blocks and each block through every token tile (row_tiles);
// the matrices here span several blocks (700 rows of 1024 columns), so every token of a 40-token
// call (3 tiles; AMX panels where present) must still get the bits it gets alone, in a tile of 4
// or of 16, with 1 or 2 threads, for every GGUF block format and MXFP4's GGML blocks, on every ISA.
// 1088 columns end each row in a 2-block tail, which matmul pairs by token for 2+ tokens
// (pair_tail_lanes): each token's bits must still be its own.
TEST(Matmul, ManyTokensOverSeveralRowBlocksGiveEachTokenItsOwnBits) {
  std::mt19937 rng(23);
  const int64_t rows = 700, n = 40;
  std::vector<tensor::DType> types(std::begin(kAllGgml), std::end(kAllGgml));
  types.push_back(tensor::DType::MXFP4_GGML);
  for (int64_t cols : {1024, 1088}) {
    for (tensor::DType t : types) {
      if (cols % tensor::block_elems(t)) continue;  // K-quants: 256-element super-blocks
      const auto x = random_vec(n * cols, rng);
      std::vector<uint8_t> buf;
      if (t == tensor::DType::MXFP4_GGML) {  // E8M0 bytes near 127 (scales near 1), random nibbles
        buf.resize(static_cast<size_t>(rows * cols / 32 * 17));
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i % 17 == 0 ? 124 + rng() % 6 : rng());
      } else {
        buf = random_rows(t, rows, cols, rng);
      }
      const tensor::Tensor tt = weight_tensor(t, rows, cols, buf);
      testing_util::for_each_isa([&](Isa isa) {
        testing_util::expect_batch_and_thread_invariant(WeightView::of(tt), x.data(), n,
                                                        std::string(tensor::dtype_name(t)) + " " + isa_name(isa) +
                                                            " cols " + std::to_string(cols));
      });
    }
  }
}

// matmul over a repacked weight: every token's bits are the GGUF layout's, for decode, lane tiles
// and (on AMX machines) panels, and batch- and thread-invariant like every other format. The
// 32-element formats' rows end in tails of 2 blocks (576 columns), 1, 3, 4 and 5 (decode takes
// rows four at a time and the short tails of several rows in one vector; 70 rows leave a remainder).
TEST(Matmul, RepackedWeightsGiveTheGgufLayoutsBits) {
  std::mt19937 rng(33);
  const int64_t rows = 70, n = 70;
  ThreadPool pool(2);
  MatmulScratch s;
  bool ran = false;
  for (const LaneFormat& f : kLaneFormats) {
    if (!(kernels().*f.lanes)) continue;
    ran = true;
    const bool k_quant = tensor::block_elems(f.from) == 256;
    for (int64_t cols : k_quant ? std::vector<int64_t>{512} : std::vector<int64_t>{576, 544, 608, 640, 672}) {
      const auto x = random_vec(n * cols, rng);
      const auto buf = random_rows(f.from, rows, cols, rng);
      std::vector<uint8_t> packed;
      f.repack(buf, rows, cols / 32, packed);
      const tensor::Tensor a = weight_tensor(f.from, rows, cols, buf), b = weight_tensor(f.to, rows, cols, packed);
      for (int64_t m : {1, 3, 17, 40, 70}) {
        std::vector<float> ya(m * rows), yb(m * rows);
        matmul(WeightView::of(a), x.data(), m, ya.data(), pool, s, MatmulPath::Fast);
        matmul(WeightView::of(b), x.data(), m, yb.data(), pool, s, MatmulPath::Fast);
        ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0)
            << tensor::dtype_name(f.to) << " cols " << cols << " n " << m;
      }
      testing_util::expect_batch_and_thread_invariant(WeightView::of(b), x.data(), n,
                                                      std::string(tensor::dtype_name(f.to)) + " cols " + std::to_string(cols));
    }
  }
  if (!ran) GTEST_SKIP() << "nothing is repacked on this ISA";
}

// The MLX lane kernels read a row's scales and biases in place, and a row ending in a partial
// 8-block group reads up to 7 entries past its own: matmul must keep those reads inside the tensor
// (a tiny router's rows are a group each). NaN past the arrays' ends would reach the results.
TEST(Matmul, MlxRowsNeverReadPastTheTensorsScales) {
  std::mt19937 rng(35);
  ThreadPool pool(2);
  MatmulScratch s;
  for (int bits : {4, 8})
    for (auto [cols, gs] : {std::pair<int64_t, int>{64, 64}, {64, 32}, {160, 32}, {288, 32}})
      for (int64_t rows : {1, 3, 5, 9}) {
        std::vector<uint8_t> w(rows * cols * bits / 8);
        for (auto& b : w) b = static_cast<uint8_t>(rng());
        const int64_t groups = rows * cols / gs;
        const uint16_t nan = 0x7fc1;  // bf16 NaN
        std::vector<uint16_t> sc(groups + 16, nan), bi(groups + 16, nan);
        for (int64_t i = 0; i < groups; ++i)
          sc[i] = tensor::f32_to_bf16(0.01f + 0.001f * (rng() % 10)), bi[i] = tensor::f32_to_bf16(-0.05f * (rng() % 4));
        tensor::Tensor t;
        t.name = "router", t.dtype = tensor::DType::MLX_AFFINE, t.shape = {rows, cols}, t.data = w.data(), t.nbytes = w.size();
        t.bits = bits, t.group_size = gs, t.group_dtype = tensor::DType::BF16, t.scales = sc.data(), t.biases = bi.data();
        for (int64_t n : {1, 16, 40}) {
          const auto x = random_vec(n * cols, rng);
          std::vector<float> fast(n * rows), exact(n * rows);
          matmul(WeightView::of(t), x.data(), n, fast.data(), pool, s, MatmulPath::Fast);
          matmul(WeightView::of(t), x.data(), n, exact.data(), pool, s, MatmulPath::Exact);
          std::vector<float> wr(cols);
          for (int64_t r = 0; r < rows; ++r) {
            tensor::dequantize_row(t, r, wr.data());
            for (int64_t j = 0; j < n; ++j) {
              double mag = 0;  // Σ |w·x|: int8 activations are within ~1 % of it
              for (int64_t c = 0; c < cols; ++c) mag += std::fabs(wr[c] * x[j * cols + c]);
              ASSERT_NEAR(fast[j * rows + r], exact[j * rows + r], 0.02 * mag + 1e-4)
                  << "bits " << bits << " cols " << cols << " gs " << gs << " rows " << rows << " n " << n << " row " << r;
            }
          }
        }
      }
}

// MLX 4- and 8-bit rows in lane order (DType::MLX_LANES): each block given back in element order,
// the in-place repack the same bytes as the copy, dequantized rows and the exact path unchanged, and
// matmul bitwise the plain rows' at every batch size (lane kernel; AMX panels from 32 tokens).
TEST(Matmul, MlxLaneOrderGivesThePlainRowsBits) {
  std::mt19937 rng(34);
  const int64_t rows = 70, n = 70;
  ThreadPool pool(2);
  MatmulScratch s;
  for (int bits : {4, 8}) {
    const Kernels::MlxDotV kernel = bits == 4 ? kernels().dot_mlx4_lanes : kernels().dot_mlx8_lanes;
  for (int64_t cols : {256, 576, 1600}) {  // one group; two and a 2-block tail; six and a 2-block tail
    const int64_t nb = cols / 32, stride = cols * bits / 8;
    for (int gs : {32, 64, 128}) {
      if (cols % gs) continue;
      std::vector<uint8_t> plain(rows * stride), packed(rows * stride);
      for (auto& b : plain) b = static_cast<uint8_t>(rng());
      std::vector<uint16_t> sc(rows * cols / gs), bi(rows * cols / gs);
      for (size_t i = 0; i < sc.size(); ++i)
        sc[i] = tensor::f32_to_bf16(0.001f + 0.01f * (rng() % 100) / 100.0f), bi[i] = tensor::f32_to_bf16(-0.2f + 0.004f * (rng() % 100));
      for (int64_t r = 0; r < rows; ++r)
        tensor::repack_mlx_lanes(bits, plain.data() + r * stride, nb, packed.data() + r * stride);
      std::vector<uint8_t> in_place = plain;
      for (int64_t r = 0; r < rows; ++r)
        tensor::repack_mlx_lanes(bits, in_place.data() + r * stride, nb, in_place.data() + r * stride);
      const std::string what =
          "bits " + std::to_string(bits) + " cols " + std::to_string(cols) + " gs " + std::to_string(gs);
      ASSERT_EQ(in_place, packed) << what;
      for (int64_t r = 0; r < rows; r += 23)
        for (int64_t b = 0; b < nb; ++b) {
          uint8_t back[32];
          tensor::mlx_lanes_block(bits, packed.data() + r * stride, nb, b, back);
          ASSERT_EQ(std::memcmp(back, plain.data() + r * stride + 4 * bits * b, 4 * bits), 0)
              << what << " row " << r << " block " << b;
        }
      auto tensor_of = [&](tensor::DType dt, const std::vector<uint8_t>& data) {
        tensor::Tensor t;
        t.name = "w", t.dtype = dt, t.shape = {rows, cols}, t.data = data.data(), t.nbytes = data.size();
        t.bits = bits, t.group_size = gs, t.group_dtype = tensor::DType::BF16, t.scales = sc.data(), t.biases = bi.data();
        return t;
      };
      const tensor::Tensor a = tensor_of(tensor::DType::MLX_AFFINE, plain), b = tensor_of(tensor::DType::MLX_LANES, packed);
      std::vector<float> ra(cols), rb(cols);
      for (int64_t r = 0; r < rows; r += 31) {
        tensor::dequantize_row(a, r, ra.data());
        tensor::dequantize_row(b, r, rb.data());
        ASSERT_EQ(std::memcmp(ra.data(), rb.data(), cols * 4), 0) << what << " dequantized row " << r;
      }
      const auto x = random_vec(n * cols, rng);
      for (MatmulPath path : {MatmulPath::Fast, MatmulPath::Exact}) {
        if (path == MatmulPath::Fast && !kernel) continue;
        for (int64_t m : {1, 3, 17, 40, 70}) {
          std::vector<float> ya(m * rows), yb(m * rows);
          matmul(WeightView::of(a), x.data(), m, ya.data(), pool, s, path);
          matmul(WeightView::of(b), x.data(), m, yb.data(), pool, s, path);
          ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * 4), 0)
              << what << " n " << m << (path == MatmulPath::Fast ? " fast" : " exact");
        }
      }
      if (kernel) testing_util::expect_batch_and_thread_invariant(WeightView::of(b), x.data(), n, what);
    }
  }
  }
}

// matmul_groups (a mixture-of-experts layer's experts in one region): every group's rows are
// bitwise matmul()'s, whatever the thread count, the other groups, or a shared input's reuse, and
// combine sees each row of each group exactly once, after that row's outputs are written.
TEST(Matmul, GroupsAreBitwiseTheirOwnMatmuls) {
  std::mt19937 rng(21);
  const int64_t cols = 512;
  struct W {
    std::vector<uint8_t> buf;
    WeightView w;
  };
  auto weight = [&](tensor::DType t, int64_t rows) {
    auto ww = std::make_unique<W>();
    ww->buf = random_rows(t, rows, cols, rng);
    ww->w = WeightView::of(weight_tensor(t, rows, cols, ww->buf));
    return ww;
  };
  // (gate, up) pairs and lone weights of several formats and sizes; n = 40 takes AMX panels where present.
  auto a0 = weight(tensor::DType::Q4_0, 96), b0 = weight(tensor::DType::Q4_0, 96), a1 = weight(tensor::DType::Q8_0, 37),
       a2 = weight(tensor::DType::Q4_K, 64), b2 = weight(tensor::DType::Q4_K, 64), a3 = weight(tensor::DType::Q4_0, 96),
       b3 = weight(tensor::DType::Q4_0, 96);
  auto x0 = random_vec(3 * cols, rng), x1 = random_vec(5 * cols, rng), x2 = random_vec(40 * cols, rng);
  struct Spec {
    const W *a, *b;
    const float* x;
    int64_t n;
  };
  const std::vector<Spec> specs = {{a0.get(), b0.get(), x0.data(), 3}, {a1.get(), nullptr, x1.data(), 5},
                                   {a2.get(), b2.get(), x2.data(), 40}, {a3.get(), b3.get(), x0.data(), 3}};
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> ya(specs.size()), yb(specs.size());
    std::vector<MatmulGroup> groups;
    for (size_t g = 0; g < specs.size(); ++g) {
      const Spec& sp = specs[g];
      ya[g].assign(static_cast<size_t>(sp.n * sp.a->w.rows), NAN);
      yb[g].assign(ya[g].size(), NAN);
      groups.push_back({{&sp.a->w, ya[g].data()}, {sp.b ? &sp.b->w : nullptr, sp.b ? yb[g].data() : nullptr}, sp.x, sp.n});
    }
    std::vector<std::vector<int>> seen(specs.size());
    for (size_t g = 0; g < specs.size(); ++g) seen[g].assign(static_cast<size_t>(specs[g].a->w.rows), 0);
    std::vector<MatmulScratch> scratch(specs.size());
    std::atomic<int> unwritten{0};
    matmul_groups(groups.data(), static_cast<int>(groups.size()), pool, scratch.data(), [&](int g, int64_t r0, int64_t r1) {
      const int64_t rows = specs[g].a->w.rows;
      for (int64_t r = r0; r < r1; ++r) {
        ++seen[g][r];
        for (int64_t t = 0; t < specs[g].n; ++t)
          unwritten += std::isnan(ya[g][t * rows + r]) || (specs[g].b && std::isnan(yb[g][t * rows + r]));
      }
    });
    EXPECT_EQ(unwritten.load(), 0) << "combine ran before its rows were computed";
    for (size_t g = 0; g < specs.size(); ++g) {
      for (int c : seen[g]) ASSERT_EQ(c, 1) << "group " << g << ", " << threads << " threads";
      MatmulScratch s;
      std::vector<float> ref(ya[g].size());
      matmul(specs[g].a->w, specs[g].x, specs[g].n, ref.data(), pool, s);
      EXPECT_EQ(0, std::memcmp(ref.data(), ya[g].data(), ref.size() * 4)) << "group " << g << ", " << threads << " threads";
      if (!specs[g].b) continue;
      matmul(specs[g].b->w, specs[g].x, specs[g].n, ref.data(), pool, s);
      EXPECT_EQ(0, std::memcmp(ref.data(), yb[g].data(), ref.size() * 4)) << "group " << g << " b, " << threads << " threads";
    }
  }
}

TEST(Matmul, MlxAffineMatchesFormula) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  for (Isa isa : isas())
  for (int bits : {4, 8}) {
    set_active_isa(isa);
    for (int gs : {32, 64, 128}) {
      const int64_t rows = 9, cols = 256, groups = cols / gs;
      std::vector<uint32_t> packed(rows * cols * bits / 32);
      for (auto& v : packed) v = rng();
      std::vector<uint16_t> sc(rows * groups), bi(rows * groups);
      std::uniform_real_distribution<float> u(-0.1f, 0.1f);
      for (auto& v : sc) v = tensor::f32_to_f16(u(rng));
      for (auto& v : bi) v = tensor::f32_to_f16(u(rng));
      tensor::Tensor t;
      t.name = "mlx";
      t.dtype = tensor::DType::MLX_AFFINE;
      t.shape = {rows, cols};
      t.data = packed.data();
      t.bits = bits;
      t.group_size = gs;
      t.group_dtype = tensor::DType::F16;
      t.scales = sc.data();
      t.biases = bi.data();
      auto x = random_vec(cols, rng);
      std::vector<float> y(rows), yf(rows);
      MatmulScratch s;
      matmul(WeightView::of(t), x.data(), 1, y.data(), pool, s, MatmulPath::Exact);
      matmul(WeightView::of(t), x.data(), 1, yf.data(), pool, s, MatmulPath::Fast);
      for (int64_t r = 0; r < rows; ++r) {
        double ref = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          // value c of row r: bits [c*bits, (c+1)*bits) of the row's little-endian uint32 stream
          uint64_t bit = c * bits;
          const uint32_t* row = packed.data() + r * cols * bits / 32;
          uint32_t q = (row[bit / 32] >> (bit % 32)) & ((1u << bits) - 1);
          int64_t g = r * groups + c / gs;
          ref += (tensor::f16_to_f32(sc[g]) * q + tensor::f16_to_f32(bi[g])) * x[c];
          mag += std::fabs((tensor::f16_to_f32(sc[g]) * q + tensor::f16_to_f32(bi[g])) * x[c]);
        }
        EXPECT_NEAR(y[r], ref, 1e-5 * mag + 1e-6) << bits << "-bit gs " << gs << " row " << r;
        EXPECT_NEAR(yf[r], ref, 1e-2 * mag) << "fast " << isa_name(isa) << " " << bits << "-bit gs " << gs << " row " << r;
      }
    }
  }
  set_active_isa(best_isa());
}

TEST(Matmul, RejectsMalformedWeights) {
  tensor::Tensor t;
  t.name = "bad";
  t.dtype = tensor::DType::Q4_0;
  t.shape = {4, 48};  // not a multiple of 32
  EXPECT_THROW(WeightView::of(t), std::exception);
  t.dtype = tensor::DType::I32;
  t.shape = {4, 64};
  EXPECT_THROW(WeightView::of(t), std::exception);
}

// Row sizes from the formats' block layouts (GGML: 18-byte Q4_0 / 210-byte Q6_K / 34-byte Q8_0 blocks;
// MXFP4: 16 nibble bytes + 1 E8M0 scale per 32; MLX: bits / 8 per value, a bf16 scale and bias per group).
TEST(Matmul, RowPrefetchAsksForEveryStreamOfTheRowAhead) {
  static uint8_t buf[3][64];
  WeightView w;
  w.data = buf[0];
  w.dtype = tensor::DType::Q6_K, w.cols = 1024, w.row_stride = 4 * 210;
  EXPECT_EQ(row_prefetch(w).ahead, 0);  // off until asked for (matmul.cpp says why)
  set_row_prefetch(true);
  RowPrefetch p = row_prefetch(w);
  EXPECT_EQ(p.streams, 1);
  EXPECT_EQ(p.bytes[0], 840u);
  EXPECT_EQ(p.ahead, 4);  // 4096 / 840
  w.dtype = tensor::DType::Q8_0, w.cols = 8192, w.row_stride = 256 * 34;
  EXPECT_EQ(row_prefetch(w).ahead, 1);  // a row wider than the distance: the next one
  w.dtype = tensor::DType::Q4_0, w.cols = 1024, w.row_stride = 32 * 18;
  EXPECT_EQ(row_prefetch(w).ahead, 7);
  w.dtype = tensor::DType::F16, w.row_stride = 2048;
  EXPECT_EQ(row_prefetch(w).ahead, 0);

  // MLX 4-bit, group 64, bf16 scales and biases: the packed row and both group arrays.
  w.dtype = tensor::DType::MLX_AFFINE, w.bits = 4, w.group_size = 64, w.group_dtype = tensor::DType::BF16;
  w.cols = 1024, w.row_stride = 512, w.scales = buf[1], w.biases = buf[2];
  p = row_prefetch(w);
  ASSERT_EQ(p.streams, 3);
  EXPECT_EQ(p.ahead, 8);
  EXPECT_EQ(p.base[0], buf[0]);
  EXPECT_EQ(p.base[1], buf[1]);
  EXPECT_EQ(p.base[2], buf[2]);
  for (int i : {1, 2}) {
    EXPECT_EQ(p.stride[i], 32u);
    EXPECT_EQ(p.bytes[i], 32u);
  }
  w.group_dtype = tensor::DType::F32;
  EXPECT_EQ(row_prefetch(w).bytes[1], 64u);

  // gpt-oss's interleaved gate view (every other row): strides doubled, one row's bytes asked for.
  w = WeightView{};
  w.dtype = tensor::DType::MXFP4, w.data = buf[0], w.scales = buf[1], w.cols = 2880;
  w.row_stride = 2 * 1440, w.scale_stride = 2 * 90;
  p = row_prefetch(w);
  ASSERT_EQ(p.streams, 2);
  EXPECT_EQ(p.ahead, 2);  // 4096 / 1440
  EXPECT_EQ(p.stride[0], 2880u);
  EXPECT_EQ(p.bytes[0], 1440u);
  EXPECT_EQ(p.stride[1], 180u);
  EXPECT_EQ(p.bytes[1], 90u);
  // GGML's blocks hold their scales in place: one stream.
  w.dtype = tensor::DType::MXFP4_GGML, w.scales = nullptr, w.row_stride = 90 * 17;
  p = row_prefetch(w);
  EXPECT_EQ(p.streams, 1);
  EXPECT_EQ(p.bytes[0], 1530u);
  set_row_prefetch(false);
}

// Weights over half the last-level cache (every model's of the process together) are asked for
// into L2 (T1), smaller ones into every level; either way a matmul's results are the same bits (a
// prefetch is a hint). No model is created in this test binary, so the count starts at zero.
TEST(Matmul, RowPrefetchGoesToL2ForWeightsBeyondTheCache) {
  std::mt19937 rng(36);
  const int64_t rows = 40, cols = 512, n = 3;
  const auto buf = random_rows(tensor::DType::Q4_0, rows, cols, rng);
  const tensor::Tensor t = weight_tensor(tensor::DType::Q4_0, rows, cols, buf);
  const WeightView w = WeightView::of(t);
  const auto x = random_vec(n * cols, rng);
  ThreadPool pool(2);
  MatmulScratch s;
  std::vector<float> near(n * rows), far(n * rows);
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t llc = l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
  set_row_prefetch(true);
  note_weight_bytes(llc / 4);  // a model
  EXPECT_FALSE(row_prefetch(w).to_l2);
  matmul(w, x.data(), n, near.data(), pool, s);
  note_weight_bytes(llc / 4 + 1);  // and a second one: together over half the cache
  EXPECT_TRUE(row_prefetch(w).to_l2);
  matmul(w, x.data(), n, far.data(), pool, s);
  set_row_prefetch(false);
  EXPECT_EQ(std::memcmp(near.data(), far.data(), near.size() * 4), 0);
}

TEST(Rope, FrequenciesMatchTransformers) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/model/rope_cases.json");
  auto j = nlohmann::json::parse(f);
  for (auto& c : j["cases"]) {
    RopeParams sc;
    sc.rotary_dim = c["head_dim"].get<int64_t>();
    sc.base = c["theta"].get<double>();
    sc.max_position_embeddings = c["max_pos"].get<int64_t>();
    auto& s = c["scaling"];
    sc.type = s["rope_type"];
    sc.factor = s.value("factor", 1.0);
    sc.low_freq_factor = s.value("low_freq_factor", 1.0);
    sc.high_freq_factor = s.value("high_freq_factor", 4.0);
    sc.original_max_position_embeddings = s.value("original_max_position_embeddings", 0);
    sc.beta_fast = s.value("beta_fast", 32.0);
    sc.beta_slow = s.value("beta_slow", 1.0);
    Rope r(sc);
    auto want = c["inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(r.inv_freq().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(r.inv_freq()[i], want[i], 2e-6 * want[i]) << sc.type << " i " << i;
    EXPECT_NEAR(r.attention_factor(), c["attention_factor"].get<double>(), 1e-6) << sc.type;
  }
}

// Unscaled RoPE over `dim` dimensions at base 10000.
static RopeParams plain_rope(int64_t dim) {
  RopeParams p;
  p.rotary_dim = dim;
  p.base = 10000.0;
  p.max_position_embeddings = 100;
  return p;
}

TEST(Rope, RotateHalfPairsDimensionIWithIPlusHalf) {
  Rope r(plain_rope(8));
  float c[4], s[4];
  r.angles(3, c, s);
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  r.apply(x, 1, 8, c, s);
  const float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int i = 0; i < 4; ++i) {
    double th = 3.0 * std::pow(10000.0, -2.0 * i / 8);
    EXPECT_NEAR(x[i], in[i] * std::cos(th) - in[i + 4] * std::sin(th), 1e-5);
    EXPECT_NEAR(x[i + 4], in[i + 4] * std::cos(th) + in[i] * std::sin(th), 1e-5);
  }
}

// Pair order (GGUF Q/K rows): element 2i is rotate_half element i, 2i+1 is element i + half;
// apply_pairs on the permuted vector gives exactly the permuted result of apply.
TEST(Rope, PairOrderIsThePermutedRotateHalf) {
  Rope r(plain_rope(8));
  float c[4], s[4];
  r.angles(5, c, s);
  float x[16], p[16];
  for (int i = 0; i < 16; ++i) x[i] = 0.1f * float(i * 7 % 11) - 0.4f;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      p[h * 8 + 2 * i] = x[h * 8 + i];
      p[h * 8 + 2 * i + 1] = x[h * 8 + i + 4];
    }
  r.apply(x, 2, 8, c, s);
  r.apply_pairs(p, 2, 8, c, s);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(p[h * 8 + 2 * i], x[h * 8 + i]);
      EXPECT_EQ(p[h * 8 + 2 * i + 1], x[h * 8 + i + 4]);
    }
}

// Paged KV storage for the attention tests: blocks of `bs` slots laid out like cache::BlockPool
// pages (per layer K[kv][bs][hd] then V), handed out in a scrambled order so that a kernel which
// assumed contiguous pages would read the wrong keys.
struct TestPages {
  std::vector<std::vector<uint8_t>> store;
  std::vector<uint8_t*> bases;
  KvView view;
  TestPages(tensor::DType dt, int64_t T, int64_t nkv, int64_t hd, int32_t shift, int32_t layers = 2, int32_t layer = 1) {
    const int64_t bs = int64_t(1) << shift;
    const size_t es = dt == tensor::DType::F32 ? 4 : 2, plane = size_t(nkv * bs * hd) * es;
    const int64_t nblocks = (T + bs - 1) / bs;
    store.resize(size_t(nblocks));
    for (auto& b : store) b.assign(plane * 2 * layers, 0xAB);  // garbage outside written slots
    for (int64_t i = 0; i < nblocks; ++i) bases.push_back(store[size_t((i * 7 + 3) % nblocks)].data());
    view.dtype = dt;
    view.blocks = bases.data();
    view.k_off = size_t(layer) * 2 * plane;
    view.v_off = view.k_off + plane;
    view.block_shift = shift;
    view.slot_mask = bs - 1;
    view.slot_stride = size_t(hd) * es;
    view.head_stride = size_t(bs) * view.slot_stride;
  }
};

// Attention over paged KV (block_size 16, lengths not a multiple of it) vs a naive double
// implementation: GQA, causal, sliding window, all KV dtypes.
TEST(Attention, MatchesNaiveReference) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  const int64_t nh = 6, nkv = 2, hd = 40;
  for (auto [T, pos0] : {std::pair<int64_t, int64_t>{23, 9}, {37, 30}, {5, 0}}) {
    const int64_t n = T - pos0;
    auto K = random_vec(T * nkv * hd, rng), Vv = random_vec(T * nkv * hd, rng), Q = random_vec(n * nh * hd, rng);
    for (tensor::DType dt : {tensor::DType::F32, tensor::DType::F16, tensor::DType::BF16}) {
      for (int64_t window : {0, 5, 17}) {
        TestPages pg(dt, T, nkv, hd, 4);
        const KvView& kv = pg.view;
        kv_store(kv, 0, T, nkv, hd, K.data(), Vv.data());
        const AttentionParams p{.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                                .scale = 1.0f / std::sqrt((float)hd), .window = window};
        std::vector<float> out(n * nh * hd);
        attention(Q.data(), n, pos0, kv, p, out.data(), pool);
        auto round = [&](float v) { return dt == tensor::DType::F16 ? tensor::f16_to_f32(tensor::f32_to_f16(v)) : dt == tensor::DType::BF16 ? tensor::bf16_to_f32(tensor::f32_to_bf16(v)) : v; };
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < nh; ++h) {
            int64_t pos = pos0 + t, kvh = h / (nh / nkv);
            int64_t first = window ? std::max<int64_t>(0, pos - window + 1) : 0;
            std::vector<double> sc;
            double mx = -1e300;
            for (int64_t j = first; j <= pos; ++j) {
              double s = 0;
              for (int64_t d = 0; d < hd; ++d) s += (double)Q[(t * nh + h) * hd + d] * round(K[(j * nkv + kvh) * hd + d]);
              sc.push_back(s * p.scale);
              mx = std::max(mx, sc.back());
            }
            double z = 0;
            for (auto& s : sc) z += s = std::exp(s - mx);
            for (int64_t d = 0; d < hd; ++d) {
              double o = 0;
              for (size_t j = 0; j < sc.size(); ++j) o += sc[j] / z * round(Vv[((first + j) * nkv + kvh) * hd + d]);
              ASSERT_NEAR(out[(t * nh + h) * hd + d], o, 1e-4) << tensor::dtype_name(dt) << " window " << window << " T " << T;
            }
          }
      }
    }
  }
}

// Several sequences in one attention_batch give bitwise the results of separate calls, and a
// query's output does not depend on how its sequence's queries were chunked (nor on block size).
TEST(Attention, BatchedAndChunkedAreBitwiseIdentical) {
  std::mt19937 rng(11);
  ThreadPool pool(3);
  const int64_t nh = 4, nkv = 2, hd = 32;
  const AttentionParams p{.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .scale = 0.17f, .softcap = 30.0f};
  const int64_t lens[3] = {19, 40, 3}, news[3] = {7, 1, 3};
  std::vector<std::unique_ptr<TestPages>> pages;
  std::vector<std::vector<float>> qs, solo(3), batched(3);
  std::vector<AttentionSegment> segs;
  for (int i = 0; i < 3; ++i) {
    const int64_t T = lens[i], n = news[i], pos0 = T - n;
    auto K = random_vec(T * nkv * hd, rng), Vv = random_vec(T * nkv * hd, rng);
    qs.push_back(random_vec(n * nh * hd, rng));
    pages.push_back(std::make_unique<TestPages>(tensor::DType::F16, T, nkv, hd, 4));
    kv_store(pages[i]->view, 0, T, nkv, hd, K.data(), Vv.data());
    solo[i].resize(n * nh * hd);
    batched[i].resize(n * nh * hd);
    attention(qs[i].data(), n, pos0, pages[i]->view, p, solo[i].data(), pool);
    // The same sequence with block_size 4 and its queries one at a time.
    TestPages small(tensor::DType::F16, T, nkv, hd, 2);
    kv_store(small.view, 0, T, nkv, hd, K.data(), Vv.data());
    std::vector<float> one(n * nh * hd);
    for (int64_t t = 0; t < n; ++t)
      attention(qs[i].data() + t * nh * hd, 1, pos0 + t, small.view, p, one.data() + t * nh * hd, pool);
    ASSERT_EQ(0, std::memcmp(one.data(), solo[i].data(), one.size() * 4)) << "sequence " << i;
    AttentionSegment sg;
    sg.q = qs[i].data();
    sg.n = n;
    sg.pos0 = pos0;
    sg.kv = pages[i]->view;
    sg.out = batched[i].data();
    segs.push_back(sg);
  }
  attention_batch(segs.data(), segs.size(), p, pool);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(0, std::memcmp(solo[i].data(), batched[i].data(), solo[i].size() * 4)) << "sequence " << i;
}

// Decode batches large enough to be split per sequence (all kv heads in one task) give each
// query bitwise the result it gets alone (one task per head) or inside a prefill.
TEST(Attention, DecodeBatchesMatchSoloBitwise) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  const int64_t nh = 9, nkv = 3, hd = 64, qs = nh * hd;
  const AttentionParams p{.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .scale = 0.125f};
  for (int64_t per : {1, 2, 3}) {  // query tokens per sequence (decode, short verification)
    std::vector<std::unique_ptr<TestPages>> pages;
    std::vector<std::vector<float>> qv, solo, batched;
    std::vector<AttentionSegment> segs;
    for (int i = 0; i < 8; ++i) {
      const int64_t T = 20 + 37 * i;
      auto K = random_vec(T * nkv * hd, rng), Vv = random_vec(T * nkv * hd, rng);
      pages.push_back(std::make_unique<TestPages>(tensor::DType::F16, T, nkv, hd, 4));
      kv_store(pages.back()->view, 0, T, nkv, hd, K.data(), Vv.data());
      qv.push_back(random_vec(per * qs, rng));
      solo.emplace_back(per * qs);
      batched.emplace_back(per * qs);
      for (int64_t t = 0; t < per; ++t)  // one token at a time: each alone in its call
        attention(qv[i].data() + t * qs, 1, T - per + t, pages[i]->view, p, solo[i].data() + t * qs, pool);
      AttentionSegment sg;
      sg.q = qv[i].data();
      sg.n = per;
      sg.pos0 = T - per;
      sg.kv = pages[i]->view;
      sg.out = batched[i].data();
      segs.push_back(sg);
    }
    attention_batch(segs.data(), segs.size(), p, pool);
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(0, std::memcmp(solo[i].data(), batched[i].data(), solo[i].size() * 4)) << "seq " << i << " per " << per;
  }
}

// Past 512 keys a row folds per-segment softmax states, and the decode of one sequence on 2 threads
// runs the segments as tasks of their own. Each query must match a naive reference, and get bitwise
// the result it gets inside the whole prefill (tiles of 32 queries, 1 or 2 threads), decoded alone
// on 1 thread (one task folding in turn) or on 2 (split), or in a batch of decodes (not split):
// with and without a window that leaves a row's first segments empty, sinks and softcap.
TEST(Attention, LongContextKeySegmentsGiveTheSameBitsInAnySplit) {
  std::mt19937 rng(31);
  ThreadPool p1(1), p2(2);
  const int64_t nh = 6, nkv = 3, hd = 64, qs = nh * hd, T = 1400;
  auto K = random_vec(T * nkv * hd, rng), Vv = random_vec(T * nkv * hd, rng), Q = random_vec(T * qs, rng);
  const auto sinks = random_vec(nh, rng);
  TestPages pg(tensor::DType::F16, T, nkv, hd, 4);
  kv_store(pg.view, 0, T, nkv, hd, K.data(), Vv.data());
  auto f16 = [](float v) { return tensor::f16_to_f32(tensor::f32_to_f16(v)); };
  for (int64_t window : {0, 700})
    for (bool with_sinks : {false, true}) {
      const AttentionParams p{.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .scale = 0.125f, .window = window,
                              .softcap = with_sinks ? 0.0f : 20.0f, .sinks = with_sinks ? sinks.data() : nullptr};
      const std::string what = "window " + std::to_string(window) + (with_sinks ? " sinks" : " softcap");
      std::vector<float> pre(T * qs), pre2(T * qs);
      attention(Q.data(), T, 0, pg.view, p, pre.data(), p1);
      attention(Q.data(), T, 0, pg.view, p, pre2.data(), p2);
      ASSERT_EQ(0, std::memcmp(pre.data(), pre2.data(), pre.size() * 4)) << what << ": prefill, 1 vs 2 threads";
      for (int64_t pos : {int64_t{T - 1}, int64_t{1024}, int64_t{1023}, int64_t{600}, int64_t{100}}) {
        for (ThreadPool* pool : {&p1, &p2}) {
          std::vector<float> d(qs);
          attention(Q.data() + pos * qs, 1, pos, pg.view, p, d.data(), *pool);
          ASSERT_EQ(0, std::memcmp(d.data(), pre.data() + pos * qs, qs * 4))
              << what << ": decode at " << pos << " on " << pool->size() << " threads vs the prefill";
        }
        const int64_t first = window ? std::max<int64_t>(0, pos - window + 1) : 0;
        for (int64_t h = 0; h < nh; ++h) {
          const int64_t kvh = h / (nh / nkv);
          std::vector<double> sc;
          double mx = with_sinks ? sinks[h] : -1e300;
          for (int64_t j = first; j <= pos; ++j) {
            double s = 0;
            for (int64_t d = 0; d < hd; ++d) s += (double)Q[pos * qs + h * hd + d] * f16(K[(j * nkv + kvh) * hd + d]);
            s *= p.scale;
            if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
            sc.push_back(s);
            mx = std::max(mx, s);
          }
          double z = with_sinks ? std::exp(sinks[h] - mx) : 0;
          for (auto& s : sc) z += s = std::exp(s - mx);
          for (int64_t d = 0; d < hd; ++d) {
            double o = 0;
            for (size_t j = 0; j < sc.size(); ++j) o += sc[j] / z * f16(Vv[((first + j) * nkv + kvh) * hd + d]);
            ASSERT_NEAR(pre[pos * qs + h * hd + d], o, 1e-4) << what << " pos " << pos << " head " << h;
          }
        }
      }
      // Eight decodes in one call (enough tasks: not split) get their prefill bits too.
      std::vector<AttentionSegment> segs(8);
      std::vector<float> out(8 * qs);
      for (int i = 0; i < 8; ++i) {
        segs[i].q = Q.data() + (T - 1 - i) * qs;
        segs[i].n = 1;
        segs[i].pos0 = T - 1 - i;
        segs[i].kv = pg.view;
        segs[i].out = out.data() + i * qs;
      }
      attention_batch(segs.data(), segs.size(), p, p2);
      for (int i = 0; i < 8; ++i)
        ASSERT_EQ(0, std::memcmp(out.data() + i * qs, pre.data() + (T - 1 - i) * qs, qs * 4)) << what << " batch row " << i;
    }
}

TEST(Ops, RmsNormSoftmaxActivations) {
  std::mt19937 rng(9);
  auto x = random_vec(96, rng), w = random_vec(96, rng);
  std::vector<float> y(96), y1(96);
  rms_norm(x.data(), w.data(), 96, 1e-6f, false, y.data());
  rms_norm(x.data(), w.data(), 96, 1e-6f, true, y1.data());
  double ss = 0;
  for (float v : x) ss += (double)v * v;
  double inv = 1 / std::sqrt(ss / 96 + 1e-6);
  for (int i = 0; i < 96; ++i) {
    EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-5);
    EXPECT_NEAR(y1[i], x[i] * inv * (1 + w[i]), 1e-5);
  }
  std::vector<float> s = {1, 2, 3, -INFINITY};
  softmax(s.data(), 4);
  double z = std::exp(1) + std::exp(2) + std::exp(3);
  EXPECT_NEAR(s[2], std::exp(3) / z, 1e-6);
  EXPECT_EQ(s[3], 0.0f);
  float g[3] = {-2, 0.5f, 3}, u[3] = {1, 2, -1}, o[3];
  silu_mul(g, u, 3, o);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(o[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
  gelu_tanh_mul(g, u, 3, o);
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(o[i], 0.5 * g[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i], 1e-6);
}

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 64, 1000, 4097}) {
      for (int64_t grain : {1, 7, 256}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << grain;
      }
    }
  }
}

namespace {

// A weight row for a lane kernel test: a GGUF format (gs = 0; MXFP4_GGML among them) or MLX affine
// 4- or 8-bit of group gs, with its scales / biases as f32 (sc, bi) and, for half-precision groups
// (gd F16 / BF16), as the file holds them (sc16, bi16: what Kernels::MlxDotV reads; 8 finite
// entries past the last group, as it may read), or MXFP4 with its E8M0 bytes e.
struct LaneRow {
  tensor::DType t;
  int gs;
  std::vector<uint8_t> w;
  std::vector<float> sc, bi;
  std::vector<uint8_t> e;
  int bits = 4;  // MLX
  tensor::DType gd = tensor::DType::F32;
  std::vector<uint16_t> sc16, bi16;
  std::string name() const {
    return gs ? "mlx" + std::to_string(bits) + " g" + std::to_string(gs) + " " + tensor::dtype_name(gd)
              : tensor::dtype_name(t);
  }
  int64_t act_per_block() const { return gs ? 1 : tensor::block_elems(t) / 32; }
  // Activations permute_act_for_mlx4'd.
  bool nibble_order() const { return (gs != 0 && bits == 4) || t == tensor::DType::MXFP4; }
};
// E8M0 scale bytes: the subnormal scales 0 and 1 first, then 2^-9 .. 2^-2 (weights of the other
// formats' size, for the per-block comparison's tolerance).
uint8_t mxfp4_scale(int64_t b, std::mt19937& rng) { return static_cast<uint8_t>(b < 2 ? b : 118 + rng() % 8); }
std::vector<LaneRow> lane_rows(int64_t nb, std::mt19937& rng) {
  std::vector<LaneRow> rows;
  for (tensor::DType t : {tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q5_0, tensor::DType::Q5_1,
                          tensor::DType::Q8_0, tensor::DType::Q2_K, tensor::DType::Q3_K, tensor::DType::Q4_K, tensor::DType::Q5_K,
                          tensor::DType::Q6_K, tensor::DType::IQ4_NL, tensor::DType::IQ4_XS, tensor::DType::IQ2_XXS,
                          tensor::DType::IQ2_XS, tensor::DType::IQ2_S, tensor::DType::IQ3_XXS, tensor::DType::IQ3_S,
                          tensor::DType::IQ1_S, tensor::DType::IQ1_M})
    if (nb % (tensor::block_elems(t) / 32) == 0) rows.push_back({t, 0, random_rows(t, 1, nb * 32, rng), {}, {}, {}});
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int gs : {32, 64, 128})
      for (tensor::DType gd : {tensor::DType::F32, tensor::DType::F16, tensor::DType::BF16}) {
        if (nb % (gs / 32)) continue;
        LaneRow r{tensor::DType::MLX_AFFINE, gs, std::vector<uint8_t>(nb * 4 * bits), random_vec(nb * 32 / gs + 8, rng, 0.02f),
                  random_vec(nb * 32 / gs + 8, rng, 0.1f), {}, bits, gd};
        for (auto& b : r.w) b = static_cast<uint8_t>(rng());
        if (gd != tensor::DType::F32)  // the f32 values become the halves' exact widenings
          for (auto [f, h] : {std::pair{&r.sc, &r.sc16}, std::pair{&r.bi, &r.bi16}})
            for (float& v : *f) {
              h->push_back(gd == tensor::DType::F16 ? tensor::f32_to_f16(v) : tensor::f32_to_bf16(v));
              v = gd == tensor::DType::F16 ? tensor::f16_to_f32(h->back()) : tensor::bf16_to_f32(h->back());
            }
        rows.push_back(std::move(r));
      }
  LaneRow fp4{tensor::DType::MXFP4, 0, std::vector<uint8_t>(nb * 16), {}, {}, std::vector<uint8_t>(nb)};
  for (auto& b : fp4.w) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < nb; ++b) fp4.e[b] = mxfp4_scale(b, rng);
  rows.push_back(std::move(fp4));
  LaneRow ggml{tensor::DType::MXFP4_GGML, 0, std::vector<uint8_t>(nb * 17), {}, {}, {}};
  for (int64_t b = 0; b < nb; ++b) {
    ggml.w[17 * b] = mxfp4_scale(b, rng);
    for (int j = 1; j < 17; ++j) ggml.w[17 * b + j] = static_cast<uint8_t>(rng());
  }
  rows.push_back(std::move(ggml));
  return rows;
}
// The lane kernel of k for r (false if k has none) over nt tokens of packed activations.
bool run_lanes(const Kernels& k, const LaneRow& r, const ActLanes& a, int64_t nb, int nt, float* out) {
  if (r.gs) {
    const Kernels::MlxDotV f = r.bits == 2 ? k.dot_mlx2v : r.bits == 3 ? k.dot_mlx3v : r.bits == 4 ? k.dot_mlx4v
                             : r.bits == 5 ? k.dot_mlx5v : r.bits == 6 ? k.dot_mlx6v : k.dot_mlx8v;
    const bool half = r.gd != tensor::DType::F32;
    const Kernels::Rows m{.w = r.w.data(), .stride = 0, .rows = 1,
                          .scales = half ? static_cast<const void*>(r.sc16.data()) : r.sc.data(),
                          .biases = half ? static_cast<const void*>(r.bi16.data()) : r.bi.data(), .group_stride = 0,
                          .group_dtype = r.gd, .group_size = r.gs};
    if (f) f(m, a, nb, nt, out, 1);
    return f != nullptr;
  }
  using D = tensor::DType;
  if (r.t == D::MXFP4) {
    const Kernels::Rows m{.w = r.w.data(), .stride = 0, .rows = 1, .scales = r.e.data()};
    if (k.dot_mxfp4v) k.dot_mxfp4v(m, a, nb, nt, out, 1);
    return k.dot_mxfp4v != nullptr;
  }
  if (r.t == D::MXFP4_GGML) {
    if (k.dot_mxfp4_ggmlv) k.dot_mxfp4_ggmlv(Kernels::Rows::one(r.w.data()), a, nb, nt, out, 1);
    return k.dot_mxfp4_ggmlv != nullptr;
  }
  auto qv = r.t == D::Q4_0 ? k.dot_q4_0v : r.t == D::Q4_1 ? k.dot_q4_1v : r.t == D::Q8_0 ? k.dot_q8_0v
          : r.t == D::Q5_0 ? k.dot_q5_0v : r.t == D::Q5_1 ? k.dot_q5_1v : r.t == D::Q4_K ? k.dot_q4_kv
          : r.t == D::Q5_K ? k.dot_q5_kv : r.t == D::Q3_K ? k.dot_q3_kv : r.t == D::IQ4_NL ? k.dot_iq4_nlv
          : r.t == D::IQ4_XS ? k.dot_iq4_xsv : r.t == D::Q2_K ? k.dot_q2_kv : r.t == D::IQ2_XXS ? k.dot_iq2_xxsv
          : r.t == D::IQ2_XS ? k.dot_iq2_xsv : r.t == D::IQ2_S ? k.dot_iq2_sv : r.t == D::IQ3_XXS ? k.dot_iq3_xxsv
          : r.t == D::IQ3_S ? k.dot_iq3_sv : r.t == D::IQ1_S ? k.dot_iq1_sv : r.t == D::IQ1_M ? k.dot_iq1_mv
          : k.dot_q6_kv;
  if (qv) qv(Kernels::Rows::one(r.w.data()), a, nb / r.act_per_block(), nt, out, 1);
  return qv != nullptr;
}
// k's per-block kernel for r on one token's nb blocks (in nibble order for MLX and MXFP4; in plain
// order for MXFP4_GGML, whose per-block kernel wants them in nibble order, permuted here).
float run_per_block(const Kernels& k, const LaneRow& r, const tensor::ActQ8* x, int64_t nb) {
  float out;
  if (r.t == tensor::DType::MXFP4) {
    k.dot_mxfp4(r.w.data(), r.e.data(), x, nb, nb, 1, &out);
    return out;
  }
  if (r.t == tensor::DType::MXFP4_GGML) {
    std::vector<tensor::ActQ8> xn(x, x + nb);
    permute_act_for_mlx4(xn.data(), nb);
    k.dot_mxfp4_ggml(r.w.data(), xn.data(), nb, nb, 1, &out);
    return out;
  }
  if (r.gs && r.bits != 4 && r.bits != 8) {
    // No per-block kernel: each value read from the row (tensor::mlx::unpack, checked against mlx
    // in model_loader_test), s·q + b, in double.
    double s = 0;
    for (int64_t i = 0; i < nb * 32; ++i) {
      const double w = static_cast<double>(r.sc[i / r.gs]) * tensor::mlx::unpack(r.w.data(), i, r.bits) + r.bi[i / r.gs];
      s += w * x[i / 32].d * x[i / 32].qs[i % 32];
    }
    return static_cast<float>(s);
  }
  if (r.gs) {
    const int bpg = r.gs / 32;
    std::vector<float> gsum(nb / bpg, 0.0f);
    for (int64_t b = 0; b < nb; ++b) gsum[b / bpg] += x[b].d * static_cast<float>(x[b].sum);
    (r.bits == 4 ? k.dot_mlx4 : k.dot_mlx8)(r.w.data(), r.sc.data(), r.bi.data(), r.gs, x, nb, nb, 1, gsum.data(), &out);
    return out;
  }
  using D = tensor::DType;
  if (r.t == D::Q2_K || r.t == D::Q3_K || r.t == D::IQ4_NL || r.t == D::IQ4_XS || r.t == D::IQ2_XXS ||
      r.t == D::IQ2_XS || r.t == D::IQ2_S || r.t == D::IQ3_XXS || r.t == D::IQ3_S || r.t == D::IQ1_S || r.t == D::IQ1_M) {
    // No per-block kernel: the dequantized row against the int8 activations, in double.
    std::vector<float> wf(nb * 32);
    tensor::dequantize_row_raw(r.t, r.w.data(), nb * 32, wf.data());
    double s = 0;
    for (int64_t i = 0; i < nb * 32; ++i) s += static_cast<double>(wf[i]) * x[i / 32].d * x[i / 32].qs[i % 32];
    return static_cast<float>(s);
  }
  auto qd = r.t == D::Q4_0 ? k.dot_q4_0 : r.t == D::Q4_1 ? k.dot_q4_1 : r.t == D::Q8_0 ? k.dot_q8_0
          : r.t == D::Q5_0 ? k.dot_q5_0 : r.t == D::Q5_1 ? k.dot_q5_1 : r.t == D::Q4_K ? k.dot_q4_k
          : r.t == D::Q5_K ? k.dot_q5_k : k.dot_q6_k;
  qd(r.w.data(), x, nb, nb / r.act_per_block(), 1, &out);
  return out;
}
// n tokens of nb random activation blocks (in nibble order for MLX rows), and their lane packing;
// with the tail in token pairs where matmul pairs it (a 1-4 block tail, 2+ tokens).
struct LaneActs {
  std::vector<tensor::ActQ8> xq;
  std::vector<int32_t> q, sum, hs, pq, psum;
  std::vector<float> d, ds, pd, pds;
  int64_t n;
  LaneActs(const std::vector<tensor::ActQ8>& x, int64_t nb, int64_t n_, bool pairs = true) : xq(x), n(n_) {
    const int64_t g = (nb + 7) / 8 * n;
    q.resize(g * 64), sum.resize(g * 8), hs.resize(g * 8), d.resize(g * 8), ds.resize(g * 8);
    pack_act_lanes(xq.data(), nb, n, 0, n, q.data(), d.data(), ds.data(), sum.data(), hs.data());
    if (!pairs || n < 2 || !pairs_tail(nb)) return;
    pq.resize(n * 64), psum.resize(n * 8), pd.resize(n * 8), pds.resize(n * 8);
    pair_tail_lanes(at(0), nb, n, pq.data(), pd.data(), pds.data(), psum.data());
  }
  ActLanes at(int64_t t) const {
    ActLanes a{q.data(), d.data(), ds.data(), sum.data(), n, hs.data()};
    if (!pq.empty()) a.pq = pq.data(), a.pd = pd.data(), a.pds = pds.data(), a.psum = psum.data();
    return a.at(t);
  }
};
LaneActs random_acts(int64_t nb, int64_t n, bool nibble_order, std::mt19937& rng) {
  std::vector<tensor::ActQ8> xq(n * nb);
  for (int64_t t = 0; t < n; ++t) kernels_for(Isa::Scalar).quantize_act(random_vec(nb * 32, rng).data(), nb * 32, xq.data() + t * nb);
  if (nibble_order) permute_act_for_mlx4(xq.data(), n * nb);
  return LaneActs(xq, nb, n);
}
const int64_t kLaneNbs[] = {1, 5, 8, 12, 18, 48, 50};  // tails of 1, 5, 0, 4 and 2 blocks

// matmul packs MLX 4-bit activations in nibble order straight from the plain blocks, and per token
// range over its threads: both must give the buffers that packing the permuted blocks at once gives.
TEST(PackActLanes, NibbleOrderAndTokenRangesGiveThePermutedBlocksPacking) {
  std::mt19937 rng(31);
  for (int64_t nb : kLaneNbs) {
    const int64_t n = 5, g = (nb + 7) / 8 * n;
    std::vector<tensor::ActQ8> xq(n * nb);
    for (int64_t t = 0; t < n; ++t)
      kernels_for(Isa::Scalar).quantize_act(random_vec(nb * 32, rng).data(), nb * 32, xq.data() + t * nb);
    std::vector<tensor::ActQ8> xq4 = xq;
    permute_act_for_mlx4(xq4.data(), n * nb);
    const LaneActs want(xq4, nb, n);
    std::vector<int32_t> q(g * 64, -1), sum(g * 8, -1);
    std::vector<float> d(g * 8, -1), ds(g * 8, -1);
    for (auto [t0, t1] : {std::pair<int64_t, int64_t>{3, 5}, {0, 1}, {1, 3}})
      pack_act_lanes(xq.data(), nb, n, t0, t1, q.data(), d.data(), ds.data(), sum.data(), nullptr, true);
    EXPECT_EQ(q, want.q) << "nb " << nb;
    EXPECT_EQ(sum, want.sum) << "nb " << nb;
    EXPECT_EQ(d, want.d) << "nb " << nb;
    EXPECT_EQ(ds, want.ds) << "nb " << nb;
  }
}
// Σ |w·x| over a GGUF row (0 for MLX / MXFP4 rows): random K-quant rows can sum terms of ~1e4 to ~1,
// where two float orders of the same integer dots differ by far more than 1e-4 of the result.
double row_magnitude(const LaneRow& r, const tensor::ActQ8* x, int64_t nb) {
  if (r.gs || r.t == tensor::DType::MXFP4 || r.t == tensor::DType::MXFP4_GGML) return 0;
  std::vector<float> wf(nb * 32);
  tensor::dequantize_row_raw(r.t, r.w.data(), nb * 32, wf.data());
  double m = 0;
  for (int64_t i = 0; i < nb * 32; ++i) m += std::fabs(static_cast<double>(wf[i]) * x[i / 32].d * x[i / 32].qs[i % 32]);
  return m;
}

}  // namespace

// The 8-blocks-at-a-time kernels (QDotV, MlxDotV) agree with the per-block ones and give every
// token the same bits whatever tile (nt, position) it is computed in: batch invariance depends on it.
TEST(Kernels, LaneKernelsMatchAndIgnoreTheTile) {
  std::mt19937 rng(12);
  for (Isa isa : isas()) {
    const Kernels& k = kernels_for(isa);
    for (int64_t nb : kLaneNbs)
      for (const LaneRow& r : lane_rows(nb, rng)) {
        const int64_t n = Kernels::kQDotVMaxNT + 3;
        const LaneActs x = random_acts(nb, n, r.nibble_order(), rng);
        std::vector<float> one(n);
        if (!run_lanes(k, r, x.at(0), nb, 1, &one[0])) continue;
        const std::string what = r.name() + " " + isa_name(isa) + " nb " + std::to_string(nb);
        for (int64_t tt = 0; tt < n; ++tt) {
          run_lanes(k, r, x.at(tt), nb, 1, &one[tt]);
          const float ref = run_per_block(k, r, x.xq.data() + tt * nb, nb);
          const double mag = row_magnitude(r, x.xq.data() + tt * nb, nb);
          EXPECT_NEAR(one[tt], ref, 1e-4 * (std::fabs(ref) + 1.0) + 1e-7 * mag) << what;
        }
        for (int nt = 2; nt <= Kernels::kQDotVMaxNT; ++nt)
          for (int64_t t0 = 0; t0 + nt <= n; ++t0) {
            float out[Kernels::kQDotVMaxNT];
            run_lanes(k, r, x.at(t0), nb, nt, out);
            for (int i = 0; i < nt; ++i)
              ASSERT_EQ(std::memcmp(&out[i], &one[t0 + i], 4), 0) << what << " nt " << nt << " t " << t0 + i;
          }
      }
  }
}

// AVX-512 has a lane kernel for every format that AVX2 has (MXFP4's two layouts too), with the AVX2 kernel's float operations
// (only the exact integer part differs), so a token gets the same bits on either machine.
TEST(Kernels, LaneKernelsAreBitwiseTheSameOnAvx2AndAvx512) {
  if (best_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(13);
  const Kernels &k2 = kernels_for(Isa::Avx2), &k5 = kernels_for(Isa::Avx512);
  for (int64_t nb : kLaneNbs)
    for (const LaneRow& r : lane_rows(nb, rng)) {
      const int64_t n = Kernels::kQDotVMaxNT;
      const LaneActs x = random_acts(nb, n, r.nibble_order(), rng);
      float a2[Kernels::kQDotVMaxNT], a5[Kernels::kQDotVMaxNT];
      if (!run_lanes(k2, r, x.at(0), nb, n, a2)) continue;  // no AVX2 lane kernel for this format
      ASSERT_TRUE(run_lanes(k5, r, x.at(0), nb, n, a5)) << r.name();
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(std::memcmp(&a2[i], &a5[i], 4), 0) << r.name() << " nb " << nb << " t " << i << ": " << a2[i] << " vs " << a5[i];
    }
}

// Every ISA's f16 / bf16 widening is bitwise the scalar definition for every non-NaN pattern,
// subnormals and infinities included, at every length (vector body and tail).
TEST(Kernels, HalfToFloatRowsAreExact) {
  std::vector<uint16_t> h;
  for (uint32_t v = 0; v < 65536; ++v) {
    const bool f16_nan = (v & 0x7c00) == 0x7c00 && (v & 0x3ff);
    const bool bf16_nan = (v & 0x7f80) == 0x7f80 && (v & 0x7f);
    if (!f16_nan && !bf16_nan) h.push_back(static_cast<uint16_t>(v));
  }
  for (Isa isa : isas()) {
    const Kernels& k = kernels_for(isa);
    for (int64_t n : {static_cast<int64_t>(h.size()), int64_t{37}, int64_t{7}, int64_t{16}}) {
      std::vector<float> a(n), b(n);
      k.f16_to_f32(h.data() + 1000, a.data(), n > 1000 ? n - 1000 : n);
      k.bf16_to_f32(h.data() + 1000, b.data(), n > 1000 ? n - 1000 : n);
      for (int64_t i = 0; i < (n > 1000 ? n - 1000 : n); ++i) {
        const float ra = tensor::f16_to_f32(h[1000 + i]), rb = tensor::bf16_to_f32(h[1000 + i]);
        ASSERT_EQ(std::memcmp(&a[i], &ra, 4), 0) << isa_name(isa) << " f16 " << h[1000 + i];
        ASSERT_EQ(std::memcmp(&b[i], &rb, 4), 0) << isa_name(isa) << " bf16 " << h[1000 + i];
      }
    }
  }
}

// A lane layout holds its GGUF row's values: dequantized bitwise the same, each block given back
// byte for byte, the same row size; only rows of whole 8-block groups fit.
TEST(LaneLayout, HoldsTheRowsValues) {
  std::mt19937 rng(31);
  EXPECT_TRUE(tensor::lanes_fit(256));
  EXPECT_TRUE(tensor::lanes_fit(576));  // SmolLM2's hidden size: 2 groups and 2 tail blocks
  EXPECT_FALSE(tensor::lanes_fit(224));  // 7 blocks: no whole group
  EXPECT_FALSE(tensor::lanes_fit(100));
  for (const LaneFormat& f : kLaneFormats)
    for (int64_t nb : {8, 9, 11, 15, 16, 18, 20, 50, 112}) {  // every tail length, 0-7 blocks
      if (nb % (tensor::block_elems(f.from) / 32)) continue;
      const auto src = random_rows(f.from, 3, nb * 32, rng);
      std::vector<uint8_t> dst;
      f.repack(src, 3, nb, dst);
      const size_t rb = tensor::row_bytes(f.from, nb * 32), bb = tensor::block_bytes(f.from);
      ASSERT_EQ(tensor::lane_layout_of(f.from), f.to);
      ASSERT_TRUE(tensor::is_lane_layout(f.to));
      ASSERT_EQ(tensor::row_bytes(f.to, nb * 32), rb);
      const std::string what = std::string(tensor::dtype_name(f.to)) + " nb " + std::to_string(nb);
      for (int r = 0; r < 3; ++r) {
        std::vector<float> a(nb * 32), b(nb * 32);
        tensor::dequantize_row_raw(f.from, src.data() + r * rb, nb * 32, a.data());
        tensor::dequantize_row_raw(f.to, dst.data() + r * rb, nb * 32, b.data());
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what << " row " << r;
        for (int64_t blk = 0; blk < nb; ++blk) {
          uint8_t back[34];
          const uint8_t* row = dst.data() + r * rb;
          if (f.from == tensor::DType::Q8_0) {
            const tensor::BlockQ8_0 q = tensor::q8_0_lanes_block(row, nb, blk);
            std::memcpy(back, &q, sizeof q);
          } else if (f.from == tensor::DType::Q4_0) {
            const tensor::BlockQ4_0 q = tensor::q4_0_lanes_block(row, nb, blk);
            std::memcpy(back, &q, sizeof q);
          } else if (f.from == tensor::DType::Q4_1) {
            const tensor::BlockQ4_1 q = tensor::q4_1_lanes_block(row, nb, blk);
            std::memcpy(back, &q, sizeof q);
          } else if (f.from == tensor::DType::IQ4_NL) {
            const tensor::BlockIQ4_NL q = tensor::iq4_nl_lanes_block(row, nb, blk);
            std::memcpy(back, &q, sizeof q);
          } else if (f.from == tensor::DType::IQ4_XS) {
            if (blk >= kernel_nb(f.from, nb)) break;  // super-blocks
            const tensor::BlockIQ4_XS q = tensor::iq4_xs_lanes_block(reinterpret_cast<const tensor::BlockIQ4_XS*>(row)[blk]);
            ASSERT_EQ(std::memcmp(&q, src.data() + r * rb + bb * blk, bb), 0) << what << " super-block " << blk;
            continue;
          } else if (f.from == tensor::DType::Q4_K) {
            if (blk >= kernel_nb(f.from, nb)) break;  // super-blocks
            const tensor::BlockQ4_K q = tensor::q4_k_lanes_block(reinterpret_cast<const tensor::BlockQ4_K*>(row)[blk]);
            ASSERT_EQ(std::memcmp(&q, src.data() + r * rb + bb * blk, bb), 0) << what << " super-block " << blk;
            continue;
          } else {
            if (blk >= kernel_nb(f.from, nb)) break;
            const tensor::BlockQ6_K q = tensor::q6_k_lanes_block(reinterpret_cast<const tensor::BlockQ6_K*>(row)[blk]);
            ASSERT_EQ(std::memcmp(&q, src.data() + r * rb + bb * blk, bb), 0) << what << " super-block " << blk;
            continue;
          }
          ASSERT_EQ(std::memcmp(back, src.data() + r * rb + bb * blk, bb), 0) << what << " block " << blk;
        }
      }
    }
}

// A lane layout's kernel is bitwise the gathering lane kernel on the row as GGUF stores it, for
// every tile size (so a token's result is the same with or without the load-time repack, in any batch).
TEST(Kernels, LaneLayoutKernelsAreBitwiseTheGatheringOnes) {
  std::mt19937 rng(32);
  bool ran = false;
  for (Isa isa : isas()) {
    const Kernels& k = kernels_for(isa);
    for (const LaneFormat& f : kLaneFormats) {
      if (!(k.*f.lanes)) continue;
      ran = true;
      for (int64_t nb : {8, 9, 11, 13, 14, 15, 16, 18, 20, 48, 50, 112}) {  // every tail length
        if (nb % (tensor::block_elems(f.from) / 32)) continue;
        const auto src = random_rows(f.from, 1, nb * 32, rng);
        std::vector<uint8_t> dst;
        f.repack(src, 1, nb, dst);
        const LaneActs x = random_acts(nb, Kernels::kQDotVMaxNT, false, rng);
        for (int nt = 1; nt <= Kernels::kQDotVMaxNT; ++nt) {
          float a[Kernels::kQDotVMaxNT], b[Kernels::kQDotVMaxNT];
          (k.*f.gathering)(Kernels::Rows::one(src.data()), x.at(0), kernel_nb(f.from, nb), nt, a, 1);
          (k.*f.lanes)(Kernels::Rows::one(dst.data()), x.at(0), kernel_nb(f.from, nb), nt, b, 1);
          for (int i = 0; i < nt; ++i)
            ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0)
                << tensor::dtype_name(f.to) << " " << isa_name(isa) << " nb " << nb << " nt " << nt << " t " << i;
        }
      }
    }
  }
  if (!ran) GTEST_SKIP() << "no ISA here has the lane layout kernels (AVX-512 VNNI)";
}

// Every ISA's chunked attention: near a naive softmax reference, and bitwise the same result for a
// query whether its prefill is one call, chunks of 5 or single tokens (the latter take the paged
// decode route on AVX-512 and AVX2), and whether or not another sequence shares the batch. With attention
// sinks (gpt-oss: a per-head logit in the denominator only), some above every score.
TEST(Attention, EveryIsaMatchesReferenceAndIsChunkInvariant) {
  std::mt19937 rng(21);
  ThreadPool pool(3);
  const std::vector<float> sinks = {-3.0f, 0.5f, 2.0f, 40.0f, -0.7f, 1.2f, 0.0f, 3.5f, -1.5f};
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    set_active_isa(isa);
    // Head dims 64 and 40 take AVX2's paged decode (lanes over d); 36, its fallback through load.
    for (auto [nh, nkv, hd] : {std::tuple<int64_t, int64_t, int64_t>{9, 3, 64}, {4, 2, 40}, {4, 2, 36}}) {
      for (tensor::DType dt : {tensor::DType::F16, tensor::DType::BF16, tensor::DType::F32}) {
        for (auto [window, softcap, sink] : {std::tuple<int64_t, float, bool>{0, 0.0f, false}, {23, 0.0f, false},
                                             {0, 20.0f, false}, {0, 0.0f, true}, {23, 0.0f, true}}) {
          const int64_t T = 150, n = 47, pos0 = T - n;
          auto K = random_vec(T * nkv * hd, rng), Vv = random_vec(T * nkv * hd, rng), Q = random_vec(n * nh * hd, rng);
          TestPages pg(dt, T, nkv, hd, 4), other(dt, 40, nkv, hd, 3);
          kv_store(pg.view, 0, T, nkv, hd, K.data(), Vv.data());
          kv_store(other.view, 0, 40, nkv, hd, K.data(), Vv.data());
          const AttentionParams p{.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                                  .scale = 1.0f / std::sqrt((float)hd), .window = window, .softcap = softcap,
                                  .sinks = sink ? sinks.data() : nullptr};
          const int64_t qs = nh * hd;
          std::vector<float> whole(n * qs), ones(n * qs), fives(n * qs), batched(n * qs), oq(5 * qs);
          attention(Q.data(), n, pos0, pg.view, p, whole.data(), pool);
          for (int64_t t = 0; t < n; ++t) attention(Q.data() + t * qs, 1, pos0 + t, pg.view, p, ones.data() + t * qs, pool);
          for (int64_t t = 0; t < n; t += 5)
            attention(Q.data() + t * qs, std::min<int64_t>(5, n - t), pos0 + t, pg.view, p, fives.data() + t * qs, pool);
          AttentionSegment sg[2];
          sg[0].q = Q.data();
          sg[0].n = 5;
          sg[0].pos0 = 35;
          sg[0].kv = other.view;
          sg[0].out = oq.data();
          sg[1].q = Q.data();
          sg[1].n = n;
          sg[1].pos0 = pos0;
          sg[1].kv = pg.view;
          sg[1].out = batched.data();
          attention_batch(sg, 2, p, pool);
          const std::string what = std::string(isa_name(isa)) + " " + tensor::dtype_name(dt) + " hd " + std::to_string(hd) +
                                   " window " + std::to_string(window) + " softcap " + std::to_string(softcap) +
                                   (sink ? " sinks" : "");
          ASSERT_EQ(0, std::memcmp(whole.data(), ones.data(), whole.size() * 4)) << what;
          ASSERT_EQ(0, std::memcmp(whole.data(), fives.data(), whole.size() * 4)) << what;
          ASSERT_EQ(0, std::memcmp(whole.data(), batched.data(), whole.size() * 4)) << what;
          auto round = [&](float v) { return dt == tensor::DType::F16 ? tensor::f16_to_f32(tensor::f32_to_f16(v)) : dt == tensor::DType::BF16 ? tensor::bf16_to_f32(tensor::f32_to_bf16(v)) : v; };
          for (int64_t t = 0; t < n; t += 7)
            for (int64_t h = 0; h < nh; ++h) {
              const int64_t pos = pos0 + t, kvh = h / (nh / nkv), first = window ? std::max<int64_t>(0, pos - window + 1) : 0;
              std::vector<double> sc;
              double mx = -1e300, z = 0;
              for (int64_t j = first; j <= pos; ++j) {
                double s = 0;
                for (int64_t d = 0; d < hd; ++d) s += (double)Q[t * qs + h * hd + d] * round(K[(j * nkv + kvh) * hd + d]);
                s *= p.scale;
                if (softcap > 0) s = softcap * std::tanh(s / softcap);
                sc.push_back(s);
                mx = std::max(mx, s);
              }
              if (sink) mx = std::max(mx, double(sinks[h]));
              for (auto& s : sc) z += s = std::exp(s - mx);
              if (sink) z += std::exp(sinks[h] - mx);  // the sink's share of the softmax has no value
              for (int64_t d = 0; d < hd; ++d) {
                double o = 0;
                for (size_t j = 0; j < sc.size(); ++j) o += sc[j] / z * round(Vv[((first + j) * nkv + kvh) * hd + d]);
                ASSERT_NEAR(whole[t * qs + h * hd + d], o, 2e-5) << what;
              }
            }
        }
      }
    }
  }
  set_active_isa(best_isa());
}
