// A pool of threads that grows on demand up to a bound and runs posted tasks in order.
// Threads start lazily (an idle server holds few); tasks beyond the bound wait in the queue,
// whose length the caller bounds (admission control lives in the HTTP layer).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rapid::server {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads) : max_(max_threads < 1 ? 1 : max_threads) {}
  ~WorkerPool() { join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> task);
  // Runs what is queued, then stops every thread.
  void join();
  size_t queued() const;
  size_t busy() const;

 private:
  void loop();
  size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace rapid::server
