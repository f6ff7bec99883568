// A fixed pool for data-parallel loops. The calling thread takes part; workers spin briefly
// before sleeping so that the many small parallel regions of a decode step stay cheap.
// Chunks are claimed dynamically and completion is counted per chunk (not per worker), so a
// worker that the OS has descheduled never stalls the caller: the others take its share.
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

  // Calls fn(begin, end) over [0, n) split into chunks of at least `grain`, spread over the
  // threads. Returns when all chunks are done. Not reentrant (do not nest).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0, chunk = 1, total = 0;
    std::atomic<int64_t> next{0}, done{0};
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
