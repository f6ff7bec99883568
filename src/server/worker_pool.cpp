#include "server/worker_pool.h"

namespace rapid::server {

void WorkerPool::post(std::function<void()> task) {
  std::lock_guard lk(mu_);
  tasks_.push_back(std::move(task));
  if (idle_ < tasks_.size() && threads_.size() < max_) threads_.emplace_back([this] { loop(); });
  cv_.notify_one();
}

void WorkerPool::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [&] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> t = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    t();
    t = nullptr;  // release captures (the request, its response) outside the lock
    lk.lock();
  }
}

void WorkerPool::join() {
  std::vector<std::thread> ts;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    ts.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : ts) t.join();
}

size_t WorkerPool::queued() const {
  std::lock_guard lk(mu_);
  return tasks_.size();
}

size_t WorkerPool::busy() const {
  std::lock_guard lk(mu_);
  return threads_.size() - idle_;
}

}  // namespace rapid::server
