// MXFP4 dequantization and matmul against mlx.core itself (mode "mxfp4"): the cases of
// tests/golden/compute/mxfp4_matmul.json (scripts/make_mxfp4_goldens.py: mx.quantize'd and raw
// random weights, mx.dequantize values, mx.quantized_matmul outputs), on every ISA this CPU has,
// exact and fast paths, plus batch and thread invariance and the strided (gpt-oss gate/up) views.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "compute/cpu_features.h"
#include "compute/matmul.h"
#include "compute/thread_pool.h"
#include "matmul_invariance.h"
#include "tensor/dequantize.h"
#include "tensor/quant_formats.h"
#include "tensor/tensor.h"

using namespace rapid;
using namespace rapid::compute;

namespace {

struct Case {
  std::string name;
  std::vector<uint32_t> weight;
  std::vector<uint8_t> scales;
  std::vector<float> deq, y;
  std::vector<double> mag;

  tensor::Tensor tensor(int64_t rows, int64_t cols) const {
    tensor::Tensor t;
    t.name = "mxfp4_" + name;
    t.dtype = tensor::DType::MXFP4;
    t.shape = {rows, cols};
    t.data = weight.data();
    t.nbytes = weight.size() * 4;
    t.bits = 4;
    t.group_size = 32;
    t.group_dtype = tensor::DType::U8;
    t.scales = scales.data();
    return t;
  }
};

using Golden = testing_util::MatmulGolden<Case>;

const Golden& golden() {
  static const Golden g = testing_util::read_matmul_golden<Case>("mxfp4_matmul.json", [](const nlohmann::json& c) {
    return Case{c["name"], c["weight"].get<std::vector<uint32_t>>(), c["scales"].get<std::vector<uint8_t>>(),
                c["deq"].get<std::vector<float>>(), c["y"].get<std::vector<float>>(),
                c["mag"].get<std::vector<double>>()};
  });
  return g;
}


}  // namespace

TEST(Mxfp4, BlockTableEntry) {
  EXPECT_EQ(tensor::block_elems(tensor::DType::MXFP4), 32);
  EXPECT_EQ(block_bytes(tensor::DType::MXFP4), 16u);  // nibbles only: the E8M0 byte is in `scales`
  EXPECT_EQ(tensor::row_bytes(tensor::DType::MXFP4, 2880), 1440u);
  EXPECT_FALSE(tensor::is_ggml_quant(tensor::DType::MXFP4));
  EXPECT_STREQ(tensor::dtype_name(tensor::DType::MXFP4), "MXFP4");
}

// Bitwise mx.dequantize, every E2M1 code and scale (E8M0 0 = 2^-127 and 1 included).
TEST(Mxfp4, DequantizeEqualsMlxBitwise) {
  const Golden& g = golden();
  ASSERT_EQ(g.cases.size(), 3u);
  for (auto& c : g.cases) {
    tensor::Tensor t = c.tensor(g.rows, g.cols);
    std::vector<float> row(g.cols);
    for (int64_t r = 0; r < g.rows; ++r) {
      tensor::dequantize_row(t, r, row.data());
      for (int64_t i = 0; i < g.cols; ++i) ASSERT_EQ(row[i], c.deq[r * g.cols + i]) << c.name << " r " << r << " c " << i;
    }
  }
}

TEST(Mxfp4, ShortTensorIsRefused) {
  const Golden& g = golden();
  tensor::Tensor t = g.cases[0].tensor(g.rows, g.cols);
  t.nbytes -= 1;
  std::vector<float> row(g.cols);
  EXPECT_THROW(tensor::dequantize_row(t, 0, row.data()), Error);
  t = g.cases[0].tensor(g.rows, g.cols);
  t.scales = nullptr;
  EXPECT_THROW(WeightView::of(t), Error);
}

// Exact: the f32 dequantization and f32 dots (only summation order differs from MLX). Fast: int8
// activations against 2·E2M1 int8 weights, the bound of the other quantized kernels.
TEST(Mxfp4, MatmulMatchesMlxQuantizedMatmulOnEveryIsa) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (auto& c : g.cases) {
      tensor::Tensor t = c.tensor(g.rows, g.cols);
      testing_util::expect_matches_reference(WeightView::of(t), g.x.data(), g.n, c.y, c.mag, 1e-30,
                                             c.name + " " + isa_name(isa));
    }
  });
}

// Decode (n = 1), a tile (n = 4) and a ragged batch (n = 5) give every row bitwise the same result,
// with 1 or 2 threads, on every ISA.
TEST(Mxfp4, ResultsAreBatchAndThreadInvariant) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (auto& c : g.cases) {
      tensor::Tensor t = c.tensor(g.rows, g.cols);
      testing_util::expect_batch_and_thread_invariant(WeightView::of(t), g.x.data(), g.n, c.name + " " + isa_name(isa));
    }
  });
}

// A view of every other row (gpt-oss's interleaved gate/up rows: both strides doubled) computes
// exactly those rows of the full matmul.
TEST(Mxfp4, StridedRowViewEqualsThoseRows) {
  const Golden& g = golden();
  ThreadPool pool(2);
  const Case& c = g.cases[2];
  tensor::Tensor t = c.tensor(g.rows, g.cols);
  WeightView full = WeightView::of(t);
  for (MatmulPath path : {MatmulPath::Exact, MatmulPath::Fast}) {
    MatmulScratch s;
    std::vector<float> y(g.n * g.rows);
    matmul(full, g.x.data(), g.n, y.data(), pool, s, path);
    for (int64_t off : {0, 1}) {
      WeightView v = full;
      v.rows = g.rows / 2;
      v.row_stride *= 2;
      v.scale_stride *= 2;
      v.data = static_cast<const uint8_t*>(full.data) + off * full.row_stride;
      v.scales = static_cast<const uint8_t*>(full.scales) + off * full.scale_stride;
      std::vector<float> yv(g.n * v.rows);
      matmul(v, g.x.data(), g.n, yv.data(), pool, s, path);
      for (int64_t t0 = 0; t0 < g.n; ++t0)
        for (int64_t r = 0; r < v.rows; ++r) ASSERT_EQ(yv[t0 * v.rows + r], y[t0 * g.rows + 2 * r + off]);
    }
  }
}
