// A check shared by the quantized-format matmul tests: decode (n = 1), 4-token tiles and the whole
// ragged batch give every row bitwise the same result, with 1 or 2 threads.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compute/matmul.h"
#include "compute/thread_pool.h"

namespace rapid::testing_util {

inline void expect_batch_and_thread_invariant(const WeightView& w, const float* x, int64_t n, const std::string& what) {
  ThreadPool p1(1), p2(2);
  MatmulScratch s;
  std::vector<float> all(n * w.rows), all1(n * w.rows);
  matmul(w, x, n, all.data(), p2, s, MatmulPath::Fast);
  matmul(w, x, n, all1.data(), p1, s, MatmulPath::Fast);
  EXPECT_EQ(all, all1) << what << ": thread count changed the result";
  for (int64_t m : {int64_t{1}, int64_t{4}})
    for (int64_t t0 = 0; t0 + m <= n; t0 += m) {
      std::vector<float> part(m * w.rows);
      matmul(w, x + t0 * w.cols, m, part.data(), p2, s, MatmulPath::Fast);
      for (int64_t i = 0; i < m * w.rows; ++i)
        ASSERT_EQ(part[i], all[t0 * w.rows + i]) << what << " n " << m << " t0 " << t0;
    }
}

}  // namespace rapid::testing_util
