// MLX affine matmul (decode GEMV and batched rows) against mlx.core itself: every bits x group
// size x scale dtype case of tests/golden/compute/mlx_matmul.json (scripts/make_mlx_matmul_goldens.py:
// mx.quantize'd weights, mx.quantized_matmul outputs), on every ISA this CPU has, exact and fast
// paths, plus batch invariance (a row's result never depends on how many rows share the call).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/kernels.h"
#include "compute/matmul.h"
#include "compute/thread_pool.h"
#include "matmul_invariance.h"
#include "tensor/lane_layout.h"
#include "tensor/tensor.h"

using namespace rapid;
using namespace rapid::compute;

namespace {

struct Case {
  int bits = 0, group_size = 0;
  std::string dtype;
  std::vector<uint32_t> weight;
  std::vector<uint16_t> s16, b16;
  std::vector<uint32_t> s32, b32;
  std::vector<float> y;
  std::vector<double> mag;

  tensor::Tensor tensor(int64_t rows, int64_t cols) const {
    tensor::Tensor t;
    t.name = "mlx_b" + std::to_string(bits) + "_g" + std::to_string(group_size) + "_" + dtype;
    t.dtype = tensor::DType::MLX_AFFINE;
    t.shape = {rows, cols};
    t.data = weight.data();
    t.bits = bits;
    t.group_size = group_size;
    t.group_dtype = dtype == "f32" ? tensor::DType::F32 : dtype == "f16" ? tensor::DType::F16 : tensor::DType::BF16;
    t.scales = dtype == "f32" ? static_cast<const void*>(s32.data()) : s16.data();
    t.biases = dtype == "f32" ? static_cast<const void*>(b32.data()) : b16.data();
    return t;
  }
};

using Golden = testing_util::MatmulGolden<Case>;

// One case of scripts/make_mlx_matmul_goldens.py's files.
Case parse_case(const nlohmann::json& c) {
  Case k;
  k.bits = c["bits"];
  k.group_size = c["group_size"];
  k.dtype = c["dtype"];
  k.weight = c["weight"].get<std::vector<uint32_t>>();
  if (k.dtype == "f32") {
    k.s32 = c["scales"].get<std::vector<uint32_t>>();
    k.b32 = c["biases"].get<std::vector<uint32_t>>();
  } else {
    k.s16 = c["scales"].get<std::vector<uint16_t>>();
    k.b16 = c["biases"].get<std::vector<uint16_t>>();
  }
  k.y = c["y"].get<std::vector<float>>();
  k.mag = c["mag"].get<std::vector<double>>();
  return k;
}

const Golden& golden() {
  static const Golden g = testing_util::read_matmul_golden<Case>("mlx_matmul.json", parse_case);
  return g;
}


}  // namespace

TEST(MlxMatmul, GoldenCoversEveryBitsGroupAndDtype) {
  const Golden& g = golden();
  EXPECT_EQ(g.cases.size(), 6u * 3u * 3u);
  for (auto& c : g.cases) {
    EXPECT_EQ(c.weight.size(), static_cast<size_t>(g.rows * g.cols * c.bits / 32));
    EXPECT_EQ(c.y.size(), static_cast<size_t>(g.n * g.rows));
  }
}

// Exact: f32 dequantization (bitwise mx.dequantize, see model_loader_test) and f32 dots, so only
// summation order differs from MLX. Fast: int8 activations, the same bound as the GGUF kernels
// (compute_test's Matmul.EveryFormatMatchesDequantizedReference).
TEST(MlxMatmul, MatchesMlxQuantizedMatmulOnEveryIsa) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (auto& c : g.cases) {
      tensor::Tensor t = c.tensor(g.rows, g.cols);
      testing_util::expect_matches_reference(WeightView::of(t), g.x.data(), g.n, c.y, c.mag, 1e-6,
                                             t.name + " " + isa_name(isa));
    }
  });
}

// Decode (n = 1), a tile (n = 4) and a ragged batch (n = 5) give every row bitwise the same result,
// on every ISA and with 1 or 2 threads.
TEST(MlxMatmul, ResultsAreBatchAndThreadInvariant) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (auto& c : g.cases) {
      tensor::Tensor t = c.tensor(g.rows, g.cols);
      testing_util::expect_batch_and_thread_invariant(WeightView::of(t), g.x.data(), g.n, t.name + " " + isa_name(isa));
    }
  });
}

// Rows whose width ends in a partial lane group (1-7 blocks of 32 past the last whole 8-block group:
// 288 ... 896 columns; tests/golden/compute/mlx_matmul_tails.json, from mx.quantized_matmul) against
// MLX, and each token's bits alone (decode: MLX 4-bit's four-row passes, their shared tails and
// reduction; two threads leave each a remainder row) as in a tile or a ragged batch; 4- and 8-bit
// rows in the file's order and in the lane order a loaded model repacks them to.
TEST(MlxMatmul, PartialLastGroupsMatchMlxAndKeepEachTokensBits) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/compute/mlx_matmul_tails.json");
  const auto j = nlohmann::json::parse(f);
  const int64_t rows = j["rows"], n = j["n"];
  int tails_seen = 0;
  for (const auto& jc : j["cases"]) {
    const Case c = parse_case(jc);
    const int64_t cols = jc["cols"];
    const auto x = j["x"][std::to_string(cols)].get<std::vector<float>>();
    ASSERT_EQ(x.size(), static_cast<size_t>(n * cols));
    tails_seen |= 1 << (cols / 32 % 8);
    tensor::Tensor t = c.tensor(rows, cols);
    // 4- and 8-bit rows also in the lane order a loaded model reads them in (MLX_LANES).
    std::vector<uint8_t> lanes;
    tensor::Tensor tl = t;
    if (c.bits == 4 || c.bits == 8) {
      const size_t row_bytes = static_cast<size_t>(cols * c.bits / 8);
      lanes.resize(rows * row_bytes);
      for (int64_t r = 0; r < rows; ++r)
        tensor::repack_mlx_lanes(c.bits, reinterpret_cast<const uint8_t*>(c.weight.data()) + r * row_bytes, cols / 32,
                                 lanes.data() + r * row_bytes);
      tl.dtype = tensor::DType::MLX_LANES, tl.data = lanes.data();
    }
    for (const tensor::Tensor* v : {&t, &tl}) {
      if (v == &tl && lanes.empty()) continue;
      const std::string what = t.name + (v == &tl ? " lanes" : "") + " cols " + std::to_string(cols);
      testing_util::for_each_isa([&](Isa isa) {
        const Kernels& k = kernels_for(isa);
        if (v == &tl && !(c.bits == 4 ? k.dot_mlx4_lanes : k.dot_mlx8_lanes)) return;  // an ISA without lane kernels
        testing_util::expect_matches_reference(WeightView::of(*v), x.data(), n, c.y, c.mag, 1e-6, what + " " + isa_name(isa));
        testing_util::expect_batch_and_thread_invariant(WeightView::of(*v), x.data(), n, what + " " + isa_name(isa));
      });
    }
  }
  EXPECT_EQ(tails_seen, 0b10111110) << "tails of 1, 2, 3, 4, 5 and 7 blocks";
}

// Prefill-sized calls walk rows in blocks, converting a block's scales and biases at its start
// (row_tiles): with 600 rows of 1024 columns the call spans several blocks, and each token of a
// 40-token call must get the bits it gets alone or in a tile of 4 or 16, with 1 or 2 threads, for
// every MLX width (2, 3, 4, 5, 6 and 8 bits) with f32 and bf16 scales, on every ISA.
TEST(MlxMatmul, ManyTokensOverSeveralRowBlocksGiveEachTokenItsOwnBits) {
  std::mt19937 rng(29);
  const int64_t rows = 600, cols = 1024, n = 40;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (float& v : x) v = u(rng);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (std::string dtype : {"f32", "bf16"}) {
      Case c;
      c.bits = bits, c.group_size = 64, c.dtype = dtype;
      c.weight.resize(static_cast<size_t>(rows * cols * bits / 32));
      for (uint32_t& w : c.weight) w = static_cast<uint32_t>(rng());
      const size_t groups = static_cast<size_t>(rows * cols / 64);
      for (size_t i = 0; i < groups; ++i) {
        const float s = 0.01f * (1.0f + u(rng)), b = 0.1f * u(rng);
        uint32_t sb, bb;
        std::memcpy(&sb, &s, 4);
        std::memcpy(&bb, &b, 4);
        if (dtype == "f32") {
          c.s32.push_back(sb), c.b32.push_back(bb);
        } else {
          c.s16.push_back(static_cast<uint16_t>(sb >> 16)), c.b16.push_back(static_cast<uint16_t>(bb >> 16));
        }
      }
      tensor::Tensor t = c.tensor(rows, cols);
      testing_util::for_each_isa([&](Isa isa) {
        testing_util::expect_batch_and_thread_invariant(WeightView::of(t), x.data(), n, t.name + " " + isa_name(isa));
      });
    }
}
