// AMX panels (Kernels::Panel) against the lane kernels they stand in for: every (row, token) must
// be bitwise the lane kernel's result, so that a token's output never depends on whether its batch
// was large enough for panels. The lane kernels themselves are checked against the dequantized
// reference in compute_test and against mlx-lm in compute_mlx_test. On machines without AMX the
// panel tests skip and the matmul test checks the lane path's batch invariance alone.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/kernels.h"
#include "compute/matmul.h"
#include "compute/thread_pool.h"
#include "tensor/fp16.h"
#include "tensor/tensor.h"

using namespace rapid;
using namespace rapid::compute;

namespace {

struct Weight {
  tensor::DType dtype;
  int group_size = 0, bits = 4;  // MLX
  std::vector<uint8_t> data;
  std::vector<float> scales, biases;  // MLX, as f32 (+8 readable past the end, as MlxDotV wants)
  std::vector<uint16_t> scales16, biases16;
};

uint16_t f16(std::mt19937& rng, float lo, float hi) {
  return tensor::f32_to_f16(std::uniform_real_distribution<float>(lo, hi)(rng) * (rng() & 1 ? 1 : -1));
}

Weight random_weight(tensor::DType t, int gs, int bits, int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w;
  w.dtype = t, w.group_size = gs, w.bits = bits;
  if (t == tensor::DType::MLX_AFFINE) {
    w.data.resize(rows * cols * bits / 8);
    for (auto& b : w.data) b = static_cast<uint8_t>(rng());
    for (int64_t i = 0; i < rows * cols / gs; ++i) {
      w.scales16.push_back(f16(rng, 0.001f, 0.05f));
      w.biases16.push_back(f16(rng, 0.0f, 0.2f));
      w.scales.push_back(tensor::f16_to_f32(w.scales16.back()));
      w.biases.push_back(tensor::f16_to_f32(w.biases16.back()));
    }
    w.scales.resize(w.scales.size() + 8, 0.5f);  // what MlxDotV may read past the last row
    w.biases.resize(w.biases.size() + 8, 0.5f);
    w.scales16.resize(w.scales16.size() + 8, tensor::f32_to_f16(0.5f));
    w.biases16.resize(w.biases16.size() + 8, tensor::f32_to_f16(0.5f));
    return w;
  }
  const size_t bb = tensor::block_bytes(t);
  w.data.resize(rows * cols / tensor::block_elems(t) * bb);
  for (auto& b : w.data) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < w.data.size(); off += bb) {
    const bool two = t == tensor::DType::Q4_1 || t == tensor::DType::Q5_1 || t == tensor::DType::Q4_K ||
                     t == tensor::DType::Q5_K || t == tensor::DType::Q2_K;
    const size_t at = t == tensor::DType::Q6_K   ? offsetof(tensor::BlockQ6_K, d)
                      : t == tensor::DType::Q3_K ? offsetof(tensor::BlockQ3_K, d)
                      : t == tensor::DType::Q2_K ? offsetof(tensor::BlockQ2_K, d)
                                                 : 0;
    for (int h = 0; h < (two ? 2 : 1); ++h) {  // d (and m / dmin)
      const uint16_t d = f16(rng, 0.001f, 0.05f);
      std::memcpy(w.data.data() + off + at + 2 * h, &d, 2);
    }
  }
  if (t == tensor::DType::Q6_K) {
    // The ends of the panels' split sc·(q − 32): value 0 (q − 32 = −32) under scales −128 (4096, the
    // largest) and 127 (−4064, the smallest), in the first super-blocks of rows 0 and 1.
    for (int r = 0; r < 2 && r < rows; ++r) {
      auto* b = reinterpret_cast<tensor::BlockQ6_K*>(w.data.data() + r * tensor::row_bytes(t, cols));
      std::memset(b->ql, 0, sizeof b->ql);
      std::memset(b->qh, 0, sizeof b->qh);
      std::memset(b->scales, r == 0 ? 0x80 : 0x7f, sizeof b->scales);
    }
  }
  return w;
}

Kernels::QDotV lane_kernel(const Kernels& k, tensor::DType t) {
  switch (t) {
    case tensor::DType::Q4_0: return k.dot_q4_0v;
    case tensor::DType::Q4_1: return k.dot_q4_1v;
    case tensor::DType::Q5_0: return k.dot_q5_0v;
    case tensor::DType::Q5_1: return k.dot_q5_1v;
    case tensor::DType::Q8_0: return k.dot_q8_0v;
    case tensor::DType::Q4_K: return k.dot_q4_kv;
    case tensor::DType::Q6_K: return k.dot_q6_kv;
    default: return nullptr;
  }
}

// The lane kernel of the format at `isa` for row r and token t (one token per call: nt = 1).
float lane_result(const Kernels& k, const Weight& w, int64_t r, int64_t cols, const ActLanes& xl, const ActLanes& xl4,
                  int64_t t) {
  const int64_t nb = cols / 32;
  auto at = [&](const ActLanes& l) { return l.at(t); };
  float out = 0;
  if (w.dtype == tensor::DType::MLX_AFFINE) {
    // The kernel reads the row's f16 scales and biases as a file holds them (the panel their f32).
    const int64_t groups = cols / w.group_size;
    const Kernels::Rows m{.w = w.data.data() + r * cols * w.bits / 8, .stride = 0, .rows = 1,
                          .scales = w.scales16.data() + r * groups, .biases = w.biases16.data() + r * groups,
                          .group_stride = 0, .group_dtype = tensor::DType::F16, .group_size = w.group_size};
    (w.bits == 4 ? k.dot_mlx4v : k.dot_mlx8v)(m, at(w.bits == 4 ? xl4 : xl), nb, 1, &out, 1);
    return out;
  }
  auto qv = lane_kernel(k, w.dtype);
  qv(Kernels::Rows::one(w.data.data() + r * tensor::row_bytes(w.dtype, cols)), at(xl), nb / (tensor::block_elems(w.dtype) / 32),
     1, &out, 1);
  return out;
}

bool has_lane_kernel(const Kernels& k, tensor::DType t, int bits) {
  if (t != tensor::DType::MLX_AFFINE) return lane_kernel(k, t) != nullptr;
  return (bits == 4 ? k.dot_mlx4v : k.dot_mlx8v) != nullptr;
}

struct Format {
  tensor::DType dtype;
  int group_size, bits = 4;
};
const Format kFormats[] = {{tensor::DType::Q4_0, 0},        {tensor::DType::Q4_1, 0},          {tensor::DType::Q8_0, 0},
                           {tensor::DType::Q4_K, 0},        {tensor::DType::Q6_K, 0},          {tensor::DType::Q5_0, 0},
                           {tensor::DType::Q5_1, 0},
                           {tensor::DType::MLX_AFFINE, 32}, {tensor::DType::MLX_AFFINE, 64},  {tensor::DType::MLX_AFFINE, 128},
                           {tensor::DType::MLX_AFFINE, 32, 8}, {tensor::DType::MLX_AFFINE, 64, 8}, {tensor::DType::MLX_AFFINE, 128, 8}};
// Lane kernels without a panel: matmul keeps them at every n (never a panel of another format's).
const Format kLaneOnlyFormats[] = {{tensor::DType::Q2_K, 0}, {tensor::DType::Q3_K, 0}, {tensor::DType::Q5_K, 0}, {tensor::DType::IQ4_NL, 0},
                                   {tensor::DType::IQ4_XS, 0}, {tensor::DType::IQ2_XXS, 0}, {tensor::DType::IQ2_XS, 0},
                                   {tensor::DType::IQ2_S, 0}, {tensor::DType::IQ3_XXS, 0}, {tensor::DType::IQ3_S, 0},
                                   {tensor::DType::IQ1_S, 0}};  // IQ1_M's d is not at offset 0 (random_weight)

}  // namespace

// The panel against each ISA's lane kernel (where that ISA has one for the format): same bits for
// every row and token, for whole and partial 8-block groups, panels of 1..32 rows, token counts
// that end inside a 16-token tile.
TEST(AmxPanel, BitwiseEqualsLaneKernels) {
  const Kernels& amx = kernels_for(Isa::Avx512);
  if (!amx.panel) GTEST_SKIP() << "no AMX-INT8 on this machine (or RAPID_AMX=0)";
  std::mt19937 rng(31);
  for (const Format& f : kFormats)
    for (int64_t nb : {1, 4, 5, 8, 16, 18, 36, 40}) {
      if ((f.group_size && (nb * 32) % f.group_size) || nb * 32 % tensor::block_elems(f.dtype)) continue;
      const int64_t cols = nb * 32, n = 37, rows = 32;
      Weight w = random_weight(f.dtype, f.group_size, f.bits, rows, cols, rng);
      std::vector<float> x(n * cols);
      std::normal_distribution<float> nd;
      for (auto& v : x) v = nd(rng);
      std::vector<tensor::ActQ8> xq(n * nb), xq4;
      for (int64_t t = 0; t < n; ++t) amx.quantize_act(x.data() + t * cols, cols, xq.data() + t * nb);
      xq4.assign(xq.begin(), xq.begin() + n * nb);
      permute_act_for_mlx4(xq4.data(), n * nb);
      const int64_t g = (nb + 7) / 8 * n;
      std::vector<int32_t> lq(g * 64), lq4(g * 64), ls(g * 8), lhs(g * 8);
      std::vector<float> ld(g * 8), lds(g * 8);
      pack_act_lanes(xq4.data(), nb, n, 0, n, lq4.data(), ld.data(), lds.data(), ls.data(), nullptr);
      pack_act_lanes(xq.data(), nb, n, 0, n, lq.data(), ld.data(), lds.data(), ls.data(), lhs.data());  // same d, ds, sum
      const ActLanes xl{lq.data(), ld.data(), lds.data(), ls.data(), n, lhs.data()},
          xl4{lq4.data(), ld.data(), lds.data(), ls.data(), n};
      const int64_t tb = (n + 31) / 32 * 2 * nb;
      std::vector<int8_t> pq(tb * 512);
      std::vector<float> pd(tb * 16), pds(tb * 16);
      pack_panel_acts(xq.data(), nb, n, 0, tb / nb, pq.data(), pd.data(), pds.data());
      const PanelActs xp{pq.data(), pd.data(), pds.data(), nb, n};
      for (int prow : {32, 20, 16, 7, 1}) {
        PanelRows p{f.dtype, w.data.data(), f.dtype == tensor::DType::MLX_AFFINE ? static_cast<size_t>(cols * f.bits / 8)
                                                                                    : tensor::row_bytes(f.dtype, cols), prow};
        if (f.group_size)
          p.scales = w.scales.data(), p.biases = w.biases.data(), p.sstride = cols / f.group_size, p.group_size = f.group_size,
          p.bits = f.bits;
        std::vector<float> y(n * rows, -1.0f);
        amx.panel(p, xp, y.data(), rows);
        for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
          const Kernels& k = kernels_for(isa);
          if (!has_lane_kernel(k, f.dtype, f.bits)) continue;
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              if (r >= prow) {
                ASSERT_EQ(y[t * rows + r], -1.0f) << "wrote past the panel's rows";
                continue;
              }
              const float want = lane_result(k, w, r, cols, xl, xl4, t);
              ASSERT_EQ(std::memcmp(&y[t * rows + r], &want, 4), 0)
                  << tensor::dtype_name(f.dtype) << " gs " << f.group_size << " bits " << f.bits << " vs " << isa_name(isa) << " nb " << nb
                  << " rows " << prow << " row " << r << " token " << t << ": " << y[t * rows + r] << " vs " << want;
            }
        }
      }
    }
}

// Through matmul, on every ISA: a token's row of y is bitwise the same computed alone (n = 1, lane
// kernels) and inside batches of 40 and 70 (panels on AMX machines, lane kernels for the formats
// without one), with 1 and 2 threads.
TEST(AmxPanel, MatmulResultsDoNotDependOnTheBatch) {
  std::mt19937 rng(32);
  ThreadPool p1(1), p2(2);
  std::vector<Format> formats(std::begin(kFormats), std::end(kFormats));
  formats.insert(formats.end(), std::begin(kLaneOnlyFormats), std::end(kLaneOnlyFormats));
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (isa > best_isa()) continue;
    set_active_isa(isa);
    for (const Format& f : formats) {
      const bool k_quant = tensor::block_elems(f.dtype) == 256;
      const int64_t rows = 53, cols = k_quant ? 768 : 576;  // 576: a partial 8-block group
      if (f.group_size && cols % f.group_size) continue;
      Weight w = random_weight(f.dtype, f.group_size, f.bits, rows, cols, rng);
      tensor::Tensor tt;
      tt.name = "w";
      tt.dtype = f.dtype;
      tt.shape = {rows, cols};
      tt.data = w.data.data();
      if (f.group_size) {
        tt.bits = f.bits, tt.group_size = f.group_size, tt.group_dtype = tensor::DType::F16;
        tt.scales = w.scales16.data(), tt.biases = w.biases16.data();
      } else {
        tt.nbytes = w.data.size();
      }
      const WeightView wv = WeightView::of(tt);
      for (int64_t n : {40, 70}) {
        std::vector<float> x(n * cols);
        std::normal_distribution<float> nd;
        for (auto& v : x) v = nd(rng);
        std::vector<float> batch(n * rows), batch2(n * rows), alone(rows);
        MatmulScratch s;
        matmul(wv, x.data(), n, batch.data(), p1, s);
        matmul(wv, x.data(), n, batch2.data(), p2, s);
        ASSERT_EQ(std::memcmp(batch.data(), batch2.data(), batch.size() * 4), 0) << "threads changed a result";
        for (int64_t t = 0; t < n; ++t) {
          matmul(wv, x.data() + t * cols, 1, alone.data(), p1, s);
          ASSERT_EQ(std::memcmp(alone.data(), batch.data() + t * rows, rows * 4), 0)
              << tensor::dtype_name(f.dtype) << " gs " << f.group_size << " bits " << f.bits << " " << isa_name(isa) << " n " << n
              << " token " << t;
        }
      }
    }
  }
  set_active_isa(best_isa());
}
