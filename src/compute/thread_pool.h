// A fixed pool for data-parallel loops. The calling thread takes part; workers spin briefly
// before sleeping so that the many small parallel regions of a decode step stay cheap.
// Chunks are claimed dynamically, shrinking as the range runs out (guided scheduling), and
// completion is counted per index (not per worker), so a worker that the OS has descheduled never
// stalls the caller: the others take its share.
#pragma once
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
  // Returns when all chunks are done. Not reentrant (do not nest).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
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
