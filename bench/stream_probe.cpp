// STREAM-style DRAM read-bandwidth probe for the benchmark report header.
// Decode speed of a small LLM on CPU is bounded by how fast weights stream from DRAM, so the
// report prints this figure next to the tok/s numbers to make runs on different machines
// comparable. Standalone on purpose (no project libraries): the harness compiles it with
//   g++ -O3 -march=native -pthread bench/stream_probe.cpp -o stream_probe
// Usage: stream_probe [MiB per thread, default 512] [max threads, default 2]
// Output: one JSON object {"read_gbps": {"1": x, "2": y}, "mib_per_thread": n}.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Sums the buffer with wide loads; the sum is returned so the loads cannot be optimised away.
// Several independent accumulators keep enough loads in flight to saturate the memory system.
double read_sum(const double* p, size_t n) {
#if defined(__AVX512F__)
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_pd(a0, _mm512_load_pd(p + i));
    a1 = _mm512_add_pd(a1, _mm512_load_pd(p + i + 8));
    a2 = _mm512_add_pd(a2, _mm512_load_pd(p + i + 16));
    a3 = _mm512_add_pd(a3, _mm512_load_pd(p + i + 24));
  }
  double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
  for (; i < n; ++i) s += p[i];
  return s;
#else
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
#endif
}

// Each thread owns its own buffer (first-touched by itself) far larger than the last-level
// cache; best of several passes, as STREAM reports.
double measure(int threads, size_t bytes_per_thread, int reps) {
  const size_t n = bytes_per_thread / sizeof(double);
  std::vector<double*> bufs(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      bufs[t] = static_cast<double*>(std::aligned_alloc(64, n * sizeof(double)));
      for (size_t i = 0; i < n; ++i) bufs[t][i] = static_cast<double>(i & 1023);
    });
  for (auto& th : pool) th.join();
  double best = 0;
  volatile double sink = 0;
  for (int r = 0; r < reps; ++r) {
    pool.clear();
    std::vector<double> sums(threads);
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sums[t] = read_sum(bufs[t], n); });
    for (auto& th : pool) th.join();
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (double s : sums) sink = sink + s;
    best = std::max(best, double(threads) * double(n * sizeof(double)) / sec / 1e9);
  }
  for (auto* b : bufs) std::free(b);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = argc > 1 ? std::atol(argv[1]) : 512;
  int max_threads = argc > 2 ? std::atoi(argv[2]) : 2;
  if (mib < 16 || mib > 16384 || max_threads < 1 || max_threads > 256) {
    std::fprintf(stderr, "usage: stream_probe [MiB per thread 16..16384] [max threads 1..256]\n");
    return 2;
  }
  std::printf("{\"mib_per_thread\": %ld, \"read_gbps\": {", mib);
  for (int t = 1; t <= max_threads; t *= 2) {
    double gbps = measure(t, size_t(mib) << 20, 5);
    std::printf("%s\"%d\": %.2f", t == 1 ? "" : ", ", t, gbps);
    if (t * 2 > max_threads && t != max_threads) {  // also the exact max if not a power of two
      std::printf(", \"%d\": %.2f", max_threads, measure(max_threads, size_t(mib) << 20, 5));
    }
  }
  std::printf("}}\n");
  return 0;
}
