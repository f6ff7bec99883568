// An Engine that runs one request at a time on its own worker thread, token by token, checking
// for cancellation between steps. Continuous batching will replace it behind the same interface.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace rapid::engine {

// One request's generation, advanced one step at a time by the engine thread.
class SequenceRunner {
 public:
  virtual ~SequenceRunner() = default;
  // Runs one step (prefill or one decode step) and returns its event; the last has finished=true.
  virtual GenerationEvent step() = 0;
};

using RunnerFactory = std::function<std::unique_ptr<SequenceRunner>(const GenerationRequest&)>;

class SerialEngine : public Engine {
 public:
  explicit SerialEngine(RunnerFactory factory);
  ~SerialEngine() override;  // cancels everything still queued or running, joins the worker

  uint64_t submit(GenerationRequest req, EventCallback on_event) override;
  void cancel(uint64_t id) override;

  int64_t queued() const;
  int64_t running() const { return running_.load(); }

 private:
  struct Job {
    uint64_t id;
    GenerationRequest req;
    EventCallback cb;
  };
  void worker();
  void run(Job& job);
  bool take_cancel(uint64_t id);

  RunnerFactory factory_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<uint64_t> cancelled_;  // ids asked to stop (few at a time: a linear scan is fine)
  uint64_t next_id_ = 1;
  uint64_t current_id_ = 0;
  bool stopping_ = false;
  std::atomic<int64_t> running_{0};
  std::thread thread_;
};

}  // namespace rapid::engine
