#include "compute/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define RAPID_PAUSE() _mm_pause()
#else
#define RAPID_PAUSE() ((void)0)
#endif

namespace rapid::compute {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job) {
  int64_t b = job.next.load(std::memory_order_relaxed), e;
  for (;;) {
    // Guided: a share of what is left, in whole grains, so chunks shrink to one grain at the end
    // and a thread that finishes early waits at most one small chunk for the others.
    do {
      if (b >= job.n) return;
      const int64_t take = std::max(job.grain, (job.n - b) / job.split / job.grain * job.grain);
      e = std::min(job.n, b + take);
    } while (!job.next.compare_exchange_weak(b, e, std::memory_order_relaxed));
    (*job.fn)(b, e);
    job.done.fetch_add(e - b, std::memory_order_release);
    b = job.next.load(std::memory_order_relaxed);
  }
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (decode issues a region every few tens of microseconds), then sleep.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < 4000; ++spin) {
      RAPID_PAUSE();
      g = generation_.load(std::memory_order_acquire);
    }
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (g == seen)
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen || stop_; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      job = current_;
    }
    if (job) run_chunks(*job);
  }
}

void ThreadPool::run_region(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  const int threads = size();
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->grain = grain;
  job->split = 2 * threads;
  {
    std::lock_guard<std::mutex> lk(mu_);
    current_ = job;
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  run_chunks(*job);
  for (int spin = 0; job->done.load(std::memory_order_acquire) != job->n; ++spin) {
    if (spin < 20000) RAPID_PAUSE();
    else std::this_thread::yield();  // the chunk's owner was descheduled: give it the core
  }
  std::lock_guard<std::mutex> lk(mu_);
  current_.reset();
}

}  // namespace rapid::compute
