// Checks shared by the quantized-format matmul tests (MLX affine, MXFP4): against a reference
// output, and decode (n = 1), 4-token and (for n >= 16) 16-token batches and the whole ragged batch
// giving every row bitwise the same result, with 1 or 2 threads; each on every ISA this CPU has.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compute/cpu_features.h"
#include "compute/matmul.h"
#include "compute/thread_pool.h"

namespace rapid::testing_util {

// fn(isa) with each ISA active in turn, then the best one again.
template <class F>
void for_each_isa(F&& fn) {
  for (compute::Isa isa : {compute::Isa::Scalar, compute::Isa::Avx2, compute::Isa::Avx512})
    if (isa <= compute::best_isa()) {
      compute::set_active_isa(isa);
      fn(isa);
    }
  compute::set_active_isa(compute::best_isa());
}

// y = x·wᵀ for n rows of x matches `want` ([n, rows]) within rel·mag (mag = Σ|w·x| per output):
// 1e-5 on the exact path (only the summation order differs), 1e-2 on the fast one (int8 activations).
inline void expect_matches_reference(const compute::WeightView& w, const float* x, int64_t n, const std::vector<float>& want,
                                     const std::vector<double>& mag, double floor, const std::string& what) {
  compute::ThreadPool pool(2);
  for (compute::MatmulPath path : {compute::MatmulPath::Exact, compute::MatmulPath::Fast}) {
    std::vector<float> y(n * w.rows);
    compute::MatmulScratch s;
    compute::matmul(w, x, n, y.data(), pool, s, path);
    const double rel = path == compute::MatmulPath::Exact ? 1e-5 : 1e-2;
    for (int64_t i = 0; i < n * w.rows; ++i)
      ASSERT_NEAR(y[i], want[i], rel * mag[i] + floor)
          << what << (path == compute::MatmulPath::Exact ? " exact" : " fast") << " i " << i;
  }
}

inline void expect_batch_and_thread_invariant(const compute::WeightView& w, const float* x, int64_t n, const std::string& what) {
  compute::ThreadPool p1(1), p2(2);
  compute::MatmulScratch s;
  std::vector<float> all(n * w.rows), all1(n * w.rows);
  compute::matmul(w, x, n, all.data(), p2, s, compute::MatmulPath::Fast);
  compute::matmul(w, x, n, all1.data(), p1, s, compute::MatmulPath::Fast);
  EXPECT_EQ(all, all1) << what << ": thread count changed the result";
  for (int64_t m : {int64_t{1}, int64_t{4}, int64_t{16}})
    for (int64_t t0 = 0; t0 + m <= n; t0 += m) {
      std::vector<float> part(m * w.rows);
      compute::matmul(w, x + t0 * w.cols, m, part.data(), p2, s, compute::MatmulPath::Fast);
      for (int64_t i = 0; i < m * w.rows; ++i)
        ASSERT_EQ(part[i], all[t0 * w.rows + i]) << what << " n " << m << " t0 " << t0;
    }
}

// A matmul golden file under tests/golden/compute/: activations x [n, cols] and one case per
// weight matrix [rows, cols], each case read from its JSON object by `parse`.
template <class Case>
struct MatmulGolden {
  int64_t rows = 0, cols = 0, n = 0;
  std::vector<float> x;
  std::vector<Case> cases;
};

template <class Case, class Parse>
MatmulGolden<Case> read_matmul_golden(const std::string& file, Parse parse) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/tests/golden/compute/" + file);
  auto j = nlohmann::json::parse(f);
  MatmulGolden<Case> g;
  g.rows = j["rows"];
  g.cols = j["cols"];
  g.n = j["n"];
  g.x = j["x"].get<std::vector<float>>();
  for (const auto& c : j["cases"]) g.cases.push_back(parse(c));
  return g;
}

}  // namespace rapid::testing_util
