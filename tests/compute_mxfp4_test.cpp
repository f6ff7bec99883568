// MXFP4 dequantization and matmul against mlx.core itself (mode "mxfp4"): the cases of
// tests/golden/compute/mxfp4_matmul.json (scripts/make_mxfp4_goldens.py: mx.quantize'd and raw
// random weights, mx.dequantize values, mx.quantized_matmul outputs), on every ISA this CPU has,
// exact and fast paths, plus batch and thread invariance and the strided (gpt-oss gate/up) views.
// GGML's MXFP4 blocks read in place (DType::MXFP4_GGML): the same cases as GGUF stores them
// (tests/golden/compute/mxfp4_ggml.json, checked against gguf-py's dequantization by
// make_mxfp4_goldens.py --ggml) against the same references, and bitwise the MXFP4 layout's results.
// The lane kernels (Kernels::dot_mxfp4v / dot_mxfp4_ggmlv, which the fast path takes at every n on
// AVX2 and AVX-512) on gpt-oss's row length: against the format's definition in double, bitwise
// between the layouts and whatever the tile, and batch invariant through matmul up to 17 tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "compute/cpu_features.h"
#include "compute/kernels.h"
#include "compute/matmul.h"
#include "compute/thread_pool.h"
#include "matmul_invariance.h"
#include "tensor/dequantize.h"
#include "tensor/mxfp4.h"
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

// The golden cases' values as GGML blocks [rows, cols/32, 17], by name.
struct GgmlCase {
  std::string name;
  std::vector<uint8_t> blocks;

  tensor::Tensor tensor(int64_t rows, int64_t cols) const {
    tensor::Tensor t;
    t.name = "mxfp4_ggml_" + name;
    t.dtype = tensor::DType::MXFP4_GGML;
    t.shape = {rows, cols};
    t.data = blocks.data();
    t.nbytes = blocks.size();
    return t;
  }
};

const std::vector<GgmlCase>& ggml_cases() {
  static const std::vector<GgmlCase> cases = [] {
    std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/compute/mxfp4_ggml.json");
    auto j = nlohmann::json::parse(f);
    std::vector<GgmlCase> v;
    for (const auto& c : j["cases"]) v.push_back({c["name"], c["blocks"].get<std::vector<uint8_t>>()});
    return v;
  }();
  return cases;
}

// GGML blocks as DType::MXFP4's separate nibbles (elements 2k, 2k + 1 in byte k) and scales, from
// the two layouts' definitions (what the GGUF loader did before it read the blocks in place).
void repack(const uint8_t* blocks, size_t nblocks, std::vector<uint8_t>& nib, std::vector<uint8_t>& sc) {
  nib.assign(nblocks * 16, 0);
  sc.assign(nblocks, 0);
  for (size_t b = 0; b < nblocks; ++b) {
    const uint8_t* in = blocks + 17 * b;
    sc[b] = in[0];
    auto code = [&](int i) { return i < 16 ? in[1 + i] & 0x0f : in[1 + i - 16] >> 4; };
    for (int k = 0; k < 16; ++k) nib[16 * b + k] = static_cast<uint8_t>(code(2 * k) | code(2 * k + 1) << 4);
  }
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

TEST(Mxfp4Ggml, BlockTableEntry) {
  EXPECT_EQ(tensor::block_elems(tensor::DType::MXFP4_GGML), 32);
  EXPECT_EQ(block_bytes(tensor::DType::MXFP4_GGML), 17u);  // the E8M0 byte and 16 nibble bytes
  EXPECT_EQ(tensor::row_bytes(tensor::DType::MXFP4_GGML, 2880), 1530u);
  EXPECT_TRUE(tensor::is_ggml_quant(tensor::DType::MXFP4_GGML));
  EXPECT_STREQ(tensor::dtype_name(tensor::DType::MXFP4_GGML), "MXFP4_GGML");
}

// gguf-py's dequantization of the blocks (the golden's `deq`, equal as values: make_mxfp4_goldens.py
// --ggml checks it), and bitwise our dequantization of the same values in the MXFP4 layout.
TEST(Mxfp4Ggml, DequantizeEqualsGgufPyAndTheMxfp4Layout) {
  const Golden& g = golden();
  ASSERT_EQ(ggml_cases().size(), g.cases.size());
  for (size_t i = 0; i < g.cases.size(); ++i) {
    ASSERT_EQ(ggml_cases()[i].name, g.cases[i].name);
    tensor::Tensor t = ggml_cases()[i].tensor(g.rows, g.cols), m = g.cases[i].tensor(g.rows, g.cols);
    std::vector<float> row(g.cols), mrow(g.cols);
    for (int64_t r = 0; r < g.rows; ++r) {
      tensor::dequantize_row(t, r, row.data());
      tensor::dequantize_row(m, r, mrow.data());
      for (int64_t c = 0; c < g.cols; ++c)
        ASSERT_EQ(row[c], g.cases[i].deq[r * g.cols + c]) << t.name << " r " << r << " c " << c;
      ASSERT_EQ(std::memcmp(row.data(), mrow.data(), g.cols * sizeof(float)), 0) << t.name << " r " << r;
    }
  }
  tensor::Tensor t = ggml_cases()[0].tensor(g.rows, g.cols);
  t.nbytes -= 1;
  std::vector<float> row(g.cols);
  EXPECT_THROW(tensor::dequantize_row(t, g.rows - 1, row.data()), Error);
}

TEST(Mxfp4Ggml, MatmulMatchesMlxQuantizedMatmulOnEveryIsa) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (size_t i = 0; i < g.cases.size(); ++i) {
      tensor::Tensor t = ggml_cases()[i].tensor(g.rows, g.cols);
      testing_util::expect_matches_reference(WeightView::of(t), g.x.data(), g.n, g.cases[i].y, g.cases[i].mag, 1e-30,
                                             t.name + " " + isa_name(isa));
    }
  });
}

// Both paths, decode (n = 1), a tile and a ragged batch: every output bitwise the MXFP4 layout's on
// the same values, on every ISA.
TEST(Mxfp4Ggml, MatmulEqualsTheMxfp4LayoutBitwiseOnEveryIsa) {
  const Golden& g = golden();
  ThreadPool pool(2);
  testing_util::for_each_isa([&](Isa isa) {
    for (size_t i = 0; i < g.cases.size(); ++i) {
      const WeightView a = WeightView::of(ggml_cases()[i].tensor(g.rows, g.cols));
      const WeightView b = WeightView::of(g.cases[i].tensor(g.rows, g.cols));
      for (MatmulPath path : {MatmulPath::Exact, MatmulPath::Fast})
        for (int64_t n : {int64_t{1}, int64_t{4}, g.n}) {
          MatmulScratch s;
          std::vector<float> ya(n * g.rows), yb(n * g.rows);
          matmul(a, g.x.data(), n, ya.data(), pool, s, path);
          matmul(b, g.x.data(), n, yb.data(), pool, s, path);
          ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
              << g.cases[i].name << " " << isa_name(isa) << (path == MatmulPath::Fast ? " fast" : " exact")
              << " n " << n;
        }
    }
  });
}

TEST(Mxfp4Ggml, ResultsAreBatchAndThreadInvariant) {
  const Golden& g = golden();
  testing_util::for_each_isa([&](Isa isa) {
    for (const GgmlCase& c : ggml_cases())
      testing_util::expect_batch_and_thread_invariant(WeightView::of(c.tensor(g.rows, g.cols)), g.x.data(), g.n,
                                                      c.name + " " + isa_name(isa));
  });
}

// The kernels themselves on gpt-oss-20b's row length (90 blocks), random codes, scales (the
// golden's range) and activations: dot_mxfp4_ggml on the blocks gives bitwise dot_mxfp4 on
// their repacked copy, for 1-4 tokens, on every ISA.
TEST(Mxfp4Ggml, KernelEqualsDotMxfp4OnTheRepackedRow) {
  constexpr int64_t kCols = 2880, kNb = kCols / 32, kTokens = 4;
  std::mt19937 rng(20);
  std::vector<uint8_t> blocks(17 * kNb);
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  const uint8_t edge[] = {0, 1, 127, 150};  // the subnormal scales, 1 and the golden's largest
  for (int64_t b = 0; b < kNb; ++b) blocks[17 * b] = b < 4 ? edge[b] : static_cast<uint8_t>(100 + rng() % 51);
  std::vector<uint8_t> nib, sc;
  repack(blocks.data(), kNb, nib, sc);
  std::normal_distribution<float> nd;
  std::vector<float> x(kTokens * kCols);
  for (auto& v : x) v = nd(rng);
  testing_util::for_each_isa([&](Isa isa) {
    const Kernels& k = kernels();
    std::vector<tensor::ActQ8> xq(kTokens * kNb);
    for (int64_t t = 0; t < kTokens; ++t) k.quantize_act(x.data() + t * kCols, kCols, xq.data() + t * kNb);
    permute_act_for_mlx4(xq.data(), static_cast<int64_t>(xq.size()));
    for (int nt = 1; nt <= kTokens; ++nt) {
      float a[4], b[4];
      k.dot_mxfp4_ggml(blocks.data(), xq.data(), kNb, kNb, nt, a);
      k.dot_mxfp4(nib.data(), sc.data(), xq.data(), kNb, kNb, nt, b);
      for (int t = 0; t < nt; ++t)
        ASSERT_EQ(std::memcmp(&a[t], &b[t], 4), 0) << isa_name(isa) << " nt " << nt << " t " << t;
    }
  });
}

namespace {

// gpt-oss-20b's row length (90 blocks: 11 whole lane groups and a partial one) with random codes,
// E8M0 scales (the subnormal 0 and 1, then the golden's range) and activations, in both layouts.
struct GptOssRows {
  static constexpr int64_t kCols = 2880, kNb = kCols / 32;
  int64_t rows;
  std::vector<uint8_t> blocks, nib, sc;  // GGML blocks; the same values repacked (MXFP4)
  GptOssRows(int64_t rows_, std::mt19937& rng) : rows(rows_), blocks(17 * kNb * rows_) {
    for (auto& b : blocks) b = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < kNb * rows; ++b) blocks[17 * b] = b < 2 ? static_cast<uint8_t>(b) : static_cast<uint8_t>(100 + rng() % 51);
    repack(blocks.data(), kNb * rows, nib, sc);
  }
  tensor::Tensor ggml() const {
    tensor::Tensor t;
    t.name = "gptoss_ggml";
    t.dtype = tensor::DType::MXFP4_GGML;
    t.shape = {rows, kCols};
    t.data = blocks.data();
    t.nbytes = blocks.size();
    return t;
  }
  tensor::Tensor mxfp4() const {
    tensor::Tensor t;
    t.name = "gptoss_mxfp4";
    t.dtype = tensor::DType::MXFP4;
    t.shape = {rows, kCols};
    t.data = nib.data();
    t.nbytes = nib.size();
    t.scales = sc.data();
    return t;
  }
};

// n tokens' activation blocks packed by pack_act_lanes, in their plain order or in nibble order.
struct Packed {
  std::vector<int32_t> q, sum;
  std::vector<float> d, ds;
  int64_t n;
  Packed(std::vector<tensor::ActQ8> x, int64_t nb, int64_t n_, bool nibble_order) : n(n_) {
    if (nibble_order) permute_act_for_mlx4(x.data(), static_cast<int64_t>(x.size()));
    const int64_t g = (nb + 7) / 8 * n;
    q.resize(g * 64), sum.resize(g * 8), d.resize(g * 8), ds.resize(g * 8);
    pack_act_lanes(x.data(), nb, n, 0, n, q.data(), d.data(), ds.data(), sum.data(), nullptr);
  }
  ActLanes at(int64_t t) const { return {q.data() + t * 64, d.data() + t * 8, ds.data() + t * 8, sum.data() + t * 8, n}; }
};

// Rows [r, r + n) of w for dot_mxfp4v (codes, their E8M0 bytes beside) and dot_mxfp4_ggmlv (GGML blocks).
Kernels::Rows mxfp4_rows(const GptOssRows& w, int64_t r, int64_t n) {
  const size_t cb = GptOssRows::kNb * 16, sb = GptOssRows::kNb;
  return {.w = w.nib.data() + r * cb, .stride = cb, .rows = n, .scales = w.sc.data() + r * sb, .group_stride = sb};
}
Kernels::Rows ggml_rows(const GptOssRows& w, int64_t r, int64_t n) {
  const size_t rb = GptOssRows::kNb * 17;
  return {.w = w.blocks.data() + r * rb, .stride = rb, .rows = n};
}

}  // namespace

// A call over a span of rows gives each row the bits of a call over that row alone, in both
// layouts (matmul hands the lane kernels up to 8 rows a call).
TEST(Mxfp4Ggml, LaneKernelsOverSpansOfRowsGiveEachRowsBits) {
  constexpr int64_t kRows = 11, kNb = GptOssRows::kNb;
  std::mt19937 rng(23);
  const GptOssRows w(kRows, rng);
  std::normal_distribution<float> nd;
  const int64_t n = Kernels::kQDotVMaxNT;
  std::vector<float> x(n * GptOssRows::kCols);
  for (auto& v : x) v = nd(rng);
  bool ran = false;
  testing_util::for_each_isa([&](Isa isa) {
    const Kernels& k = kernels();
    if (!k.dot_mxfp4v || !k.dot_mxfp4_ggmlv) return;
    ran = true;
    std::vector<tensor::ActQ8> xq(n * kNb);
    for (int64_t t = 0; t < n; ++t) k.quantize_act(x.data() + t * GptOssRows::kCols, GptOssRows::kCols, xq.data() + t * kNb);
    const Packed plain(xq, kNb, n, false), nibble(xq, kNb, n, true);
    for (int nt : {1, 5, 16})
      for (int64_t span : {int64_t{2}, int64_t{8}, kRows}) {
        std::vector<float> ga(nt * kRows), ma(nt * kRows), g1(nt), m1(nt);
        for (int64_t r = 0; r < kRows; r += span) {
          const int64_t e = std::min(kRows, r + span);
          k.dot_mxfp4_ggmlv(ggml_rows(w, r, e - r), plain.at(0), kNb, nt, ga.data() + r, kRows);
          k.dot_mxfp4v(mxfp4_rows(w, r, e - r), nibble.at(0), kNb, nt, ma.data() + r, kRows);
        }
        for (int64_t r = 0; r < kRows; ++r) {
          k.dot_mxfp4_ggmlv(ggml_rows(w, r, 1), plain.at(0), kNb, nt, g1.data(), 1);
          k.dot_mxfp4v(mxfp4_rows(w, r, 1), nibble.at(0), kNb, nt, m1.data(), 1);
          for (int t = 0; t < nt; ++t) {
            const std::string what = std::string(isa_name(isa)) + " nt " + std::to_string(nt) + " span " +
                                     std::to_string(span) + " row " + std::to_string(r) + " t " + std::to_string(t);
            ASSERT_EQ(std::memcmp(&ga[t * kRows + r], &g1[t], 4), 0) << "ggml " << what;
            ASSERT_EQ(std::memcmp(&ma[t * kRows + r], &m1[t], 4), 0) << "mxfp4 " << what;
            ASSERT_EQ(std::memcmp(&ma[t * kRows + r], &ga[t * kRows + r], 4), 0) << "layouts " << what;
          }
        }
      }
  });
  if (!ran) GTEST_SKIP() << "no lane kernels on this CPU";
}

// For every tile (nt = 1..16 at every start): dot_mxfp4_ggmlv on the blocks and dot_mxfp4v on the
// repacked row give bitwise the same result, the same as the token computed alone, and within
// float rounding of the blocks' definition (2^(e-127)·E2M1 against the int8 activations) in double.
TEST(Mxfp4Ggml, LaneKernelsMatchTheDefinitionAndEachOtherWhateverTheTile) {
  constexpr int64_t kNb = GptOssRows::kNb, kTokens = Kernels::kQDotVMaxNT + 1;
  std::mt19937 rng(21);
  const GptOssRows w(1, rng);
  std::normal_distribution<float> nd;
  std::vector<float> x(kTokens * GptOssRows::kCols);
  for (auto& v : x) v = nd(rng);
  bool ran = false;
  testing_util::for_each_isa([&](Isa isa) {
    const Kernels& k = kernels();
    if (!k.dot_mxfp4v || !k.dot_mxfp4_ggmlv) return;  // per block only (scalar)
    ran = true;
    std::vector<tensor::ActQ8> xq(kTokens * kNb);
    for (int64_t t = 0; t < kTokens; ++t) k.quantize_act(x.data() + t * GptOssRows::kCols, GptOssRows::kCols, xq.data() + t * kNb);
    const Packed plain(xq, kNb, kTokens, false), nibble(xq, kNb, kTokens, true);
    std::vector<float> one(kTokens);
    for (int64_t t = 0; t < kTokens; ++t) {
      k.dot_mxfp4_ggmlv(Kernels::Rows::one(w.blocks.data()), plain.at(t), kNb, 1, &one[t], 1);
      double ref = 0, mag = 0;
      for (int64_t b = 0; b < kNb; ++b) {
        const uint8_t* blk = w.blocks.data() + 17 * b;
        const tensor::ActQ8& a = xq[t * kNb + b];
        long s = 0;
        for (int j = 0; j < 16; ++j)
          s += tensor::mxfp4::kTwiceE2M1[blk[1 + j] & 0x0f] * a.qs[j] + tensor::mxfp4::kTwiceE2M1[blk[1 + j] >> 4] * a.qs[j + 16];
        const double v = std::ldexp(0.5 * static_cast<double>(s), blk[0] - 127) * a.d;
        ref += v;
        mag += std::fabs(v);
      }
      ASSERT_NEAR(one[t], ref, 1e-5 * mag + 1e-30) << isa_name(isa) << " t " << t;
    }
    for (int nt = 1; nt <= Kernels::kQDotVMaxNT; ++nt)
      for (int64_t t0 = 0; t0 + nt <= kTokens; ++t0) {
        float a[Kernels::kQDotVMaxNT], b[Kernels::kQDotVMaxNT];
        k.dot_mxfp4_ggmlv(Kernels::Rows::one(w.blocks.data()), plain.at(t0), kNb, nt, a, 1);
        k.dot_mxfp4v(mxfp4_rows(w, 0, 1), nibble.at(t0), kNb, nt, b, 1);
        for (int i = 0; i < nt; ++i) {
          ASSERT_EQ(std::memcmp(&a[i], &one[t0 + i], 4), 0) << isa_name(isa) << " ggml nt " << nt << " t " << t0 + i;
          ASSERT_EQ(std::memcmp(&b[i], &one[t0 + i], 4), 0) << isa_name(isa) << " mxfp4 nt " << nt << " t " << t0 + i;
        }
      }
  });
  if (!ran) GTEST_SKIP() << "no lane kernels on this CPU";
}

// Through matmul on gpt-oss's row length: decode, 4- and 16-token batches and a 17-token one (two
// lane tiles, 9 + 8) give every row bitwise the same result, in both layouts alike, on every ISA.
TEST(Mxfp4Ggml, LanesAreBatchInvariantAndLayoutIndependentThroughMatmul) {
  constexpr int64_t kRows = 37, kTokens = 17;
  std::mt19937 rng(22);
  const GptOssRows w(kRows, rng);
  std::normal_distribution<float> nd;
  std::vector<float> x(kTokens * GptOssRows::kCols);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  testing_util::for_each_isa([&](Isa isa) {
    const WeightView a = WeightView::of(w.ggml()), b = WeightView::of(w.mxfp4());
    testing_util::expect_batch_and_thread_invariant(a, x.data(), kTokens, std::string("ggml ") + isa_name(isa));
    testing_util::expect_batch_and_thread_invariant(b, x.data(), kTokens, std::string("mxfp4 ") + isa_name(isa));
    for (int64_t n : {int64_t{1}, int64_t{16}, kTokens}) {
      MatmulScratch s;
      std::vector<float> ya(n * kRows), yb(n * kRows);
      matmul(a, x.data(), n, ya.data(), pool, s, MatmulPath::Fast);
      matmul(b, x.data(), n, yb.data(), pool, s, MatmulPath::Fast);
      ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0) << isa_name(isa) << " n " << n;
    }
  });
}
