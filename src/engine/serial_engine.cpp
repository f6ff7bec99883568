#include "engine/serial_engine.h"

#include <algorithm>
#include <exception>

#include "common/log.h"

namespace rapid::engine {

SerialEngine::SerialEngine(RunnerFactory factory) : factory_(std::move(factory)) {
  thread_ = std::thread([this] { worker(); });
}

SerialEngine::~SerialEngine() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    if (current_id_) cancelled_.push_back(current_id_);  // do not wait for a long generation
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t SerialEngine::submit(GenerationRequest req, EventCallback on_event) {
  std::lock_guard lk(mu_);
  uint64_t id = next_id_++;
  queue_.push_back(Job{id, std::move(req), std::move(on_event)});
  cv_.notify_one();
  return id;
}

void SerialEngine::cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  bool known = id == current_id_ ||
               std::any_of(queue_.begin(), queue_.end(), [&](const Job& j) { return j.id == id; });
  if (known && std::find(cancelled_.begin(), cancelled_.end(), id) == cancelled_.end())
    cancelled_.push_back(id);
}

int64_t SerialEngine::queued() const {
  std::lock_guard lk(mu_);
  return int64_t(queue_.size());
}

bool SerialEngine::take_cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  auto it = std::find(cancelled_.begin(), cancelled_.end(), id);
  if (it == cancelled_.end()) return false;
  cancelled_.erase(it);
  return true;
}

void SerialEngine::worker() {
  for (;;) {
    Job job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      current_id_ = job.id;
      // On shutdown every remaining job ends as cancelled so no caller waits forever.
      if (stopping_) cancelled_.push_back(job.id);
    }
    running_ = 1;
    run(job);
    running_ = 0;
    std::lock_guard lk(mu_);
    current_id_ = 0;
    std::erase(cancelled_, job.id);  // a cancel that raced with the end of the job
  }
}

void SerialEngine::run(Job& job) {
  GenerationEvent last;
  last.prompt_tokens = int64_t(job.req.prompt.size());
  auto finish = [&](FinishReason why, const std::string& err) {
    GenerationEvent ev;
    ev.finished = true;
    ev.finish_reason = why;
    ev.error = err;
    ev.prompt_tokens = last.prompt_tokens;
    ev.cached_tokens = last.cached_tokens;
    ev.completion_tokens = last.completion_tokens;
    job.cb(ev);
  };
  try {
    if (take_cancel(job.id)) return finish(FinishReason::Cancelled, "");
    if (job.req.warm_only) return finish(FinishReason::Stop, "");  // no prefix cache to warm
    std::unique_ptr<SequenceRunner> runner = factory_(job.req);
    for (;;) {
      if (take_cancel(job.id)) return finish(FinishReason::Cancelled, "");
      GenerationEvent ev = runner->step();
      last.prompt_tokens = ev.prompt_tokens ? ev.prompt_tokens : last.prompt_tokens;
      last.cached_tokens = ev.cached_tokens;
      last.completion_tokens = ev.completion_tokens;
      job.cb(ev);
      if (ev.finished) return;
    }
  } catch (const std::exception& e) {
    log::error(std::string("generation failed: ") + e.what());
    finish(FinishReason::Error, e.what());
  }
}

}  // namespace rapid::engine
