// A fixed pool for data-parallel loops. The calling thread takes part; workers spin briefly
// before sleeping so that the many small parallel regions of a decode step stay cheap.
// Chunks are claimed dynamically, shrinking as the range runs out (guided scheduling), and
// completion is counted per index (not per worker), so a worker that the OS has descheduled never
// stalls the caller: the others take its share.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rapid::compute {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads = 0);  // 0 → hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split into chunks of whole multiples of `grain` (the last
  // one may be shorter), spread over the threads. Where the chunks fall depends on timing.
  // Returns when all chunks are done. Not reentrant (do not nest). With one thread, or n ≤ grain
  // (a decode step's few rows), fn(0, n) runs on the calling thread: no region, no std::function.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (size() == 1 || n <= grain) return fn(int64_t{0}, n);
    run_region(n, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
  }

 private:
  void run_region(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0, grain = 1, split = 1;
    std::atomic<int64_t> next{0}, done{0};  // next index to claim; indices finished
  };
  void worker();
  static void run_chunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::shared_ptr<Job> current_;  // guarded by mu_
};

}  // namespace rapid::compute
