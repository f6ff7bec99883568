#include "engine/embedding_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <string>

#include "common/error.h"

namespace rapid::engine {

struct EmbeddingEngine::Job {
  std::vector<std::vector<int32_t>> inputs;
  std::vector<std::vector<float>> out;
  size_t next = 0;   // first input not yet taken into a batch
  size_t done = 0;   // inputs computed
  std::exception_ptr error;
  bool dropped = false;  // its caller stopped waiting: take no more of its inputs
  bool takeable() const { return !error && !dropped && next < inputs.size(); }
  bool finished() const { return error || done == inputs.size() || (dropped && done == next); }
};

void pool_hidden(const float* rows, int64_t n, int64_t h, const model::EmbeddingPooling& p, float* out) {
  if (p.mode == model::PoolingMode::Mean) {
    for (int64_t j = 0; j < h; ++j) out[j] = 0.0f;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < h; ++j) out[j] += rows[t * h + j];
    for (int64_t j = 0; j < h; ++j) out[j] /= static_cast<float>(n);
  } else {
    const float* src = rows + (p.mode == model::PoolingMode::Cls ? 0 : (n - 1) * h);
    for (int64_t j = 0; j < h; ++j) out[j] = src[j];
  }
  if (p.normalize) l2_normalize(out, h);
}

void l2_normalize(float* v, int64_t n) {
  double ss = 0.0;
  for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(v[j]) * v[j];
  const float inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
  for (int64_t j = 0; j < n; ++j) v[j] *= inv;
}

EmbeddingEngine::EmbeddingEngine(std::shared_ptr<model::Model> model, EmbeddingEngineOptions opts)
    : EmbeddingEngine(model::decoder_embedding_model(std::move(model)), opts) {}

EmbeddingEngine::EmbeddingEngine(std::unique_ptr<model::EmbeddingModel> model, EmbeddingEngineOptions opts)
    : model_(std::move(model)), opts_(opts) {
  if (!model_) throw Error("EmbeddingEngine: no model");
  if (opts_.max_input_tokens <= 0 || opts_.max_step_tokens <= 0) throw Error("EmbeddingEngine: bad token limits");
  const int32_t probe = 0;
  std::vector<float> hidden(static_cast<size_t>(dimensions()));
  float* out = hidden.data();
  try {
    model_->hidden_states({std::span<const int32_t>(&probe, 1)}, &out);
  } catch (const std::exception& ex) {
    throw Error("architecture '" + model_->config().architecture + "' cannot serve embeddings: " + ex.what());
  }
  worker_ = std::thread([this] { run(); });
}

EmbeddingEngine::~EmbeddingEngine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::vector<std::vector<float>> EmbeddingEngine::embed(std::vector<std::vector<int32_t>> inputs) {
  return *embed_until(std::move(inputs), {});
}

std::optional<std::vector<std::vector<float>>> EmbeddingEngine::embed_until(std::vector<std::vector<int32_t>> inputs,
                                                                            const std::function<bool()>& stop) {
  const int64_t v = vocab_size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    if (in.empty() || static_cast<int64_t>(in.size()) > opts_.max_input_tokens)
      throw Error("input " + std::to_string(i) + " has " + std::to_string(in.size()) + " tokens (1.." +
                  std::to_string(opts_.max_input_tokens) + " allowed)");
    for (int32_t t : in)
      if (t < 0 || t >= v)
        throw Error("input " + std::to_string(i) + ": token id " + std::to_string(t) + " outside the vocabulary");
  }
  Job job;
  job.inputs = std::move(inputs);
  job.out.resize(job.inputs.size());
  if (job.inputs.empty()) return std::vector<std::vector<float>>{};
  std::unique_lock<std::mutex> lk(mu_);
  jobs_.push_back(&job);
  cv_.notify_all();
  const auto finished = [&] { return job.finished(); };
  while (stop && !job.finished()) {
    lk.unlock();
    const bool stopping = stop();  // a syscall, perhaps: not under the lock the worker needs
    lk.lock();
    if (stopping) {
      job.dropped = true;  // then only its inputs in the running step are waited for
      break;
    }
    cv_.wait_for(lk, std::chrono::milliseconds(100), finished);
  }
  cv_.wait(lk, finished);
  std::erase(jobs_, &job);  // a dropped job may still be queued with inputs never taken
  if (job.error) std::rethrow_exception(job.error);
  if (job.done < job.inputs.size()) return std::nullopt;
  return std::move(job.out);
}

bool EmbeddingEngine::has_work() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [](const Job* j) { return j->takeable(); });
}

// Under mu_: one input from each waiting job in turn (starting where the last step stopped)
// until the step's token budget is used; at least one input.
std::vector<EmbeddingEngine::Item> EmbeddingEngine::next_batch() {
  std::vector<Item> batch;
  int64_t tokens = 0;
  bool took = true;
  while (took) {
    took = false;
    for (size_t k = 0; k < jobs_.size(); ++k) {
      Job* j = jobs_[(rr_ + k) % jobs_.size()];
      if (!j->takeable()) continue;
      const int64_t n = static_cast<int64_t>(j->inputs[j->next].size());
      if (!batch.empty() && tokens + n > opts_.max_step_tokens) {
        rr_ = (rr_ + k) % jobs_.size();
        return batch;
      }
      batch.push_back(Item{j, j->next++});
      tokens += n;
      took = true;
    }
  }
  return batch;
}

void EmbeddingEngine::compute(const std::vector<Item>& batch) {
  const int64_t h = dimensions();
  std::vector<std::span<const int32_t>> inputs;
  std::vector<std::vector<float>> hidden;
  std::vector<float*> outs;
  for (const Item& it : batch) {
    inputs.emplace_back(it.job->inputs[it.index]);
    hidden.emplace_back(inputs.back().size() * static_cast<size_t>(h));
    outs.push_back(hidden.back().data());
  }
  model_->hidden_states(inputs, outs.data());
  for (size_t i = 0; i < batch.size(); ++i) {
    std::vector<float>& out = batch[i].job->out[batch[i].index];
    out.resize(static_cast<size_t>(h));
    pool_hidden(hidden[i].data(), static_cast<int64_t>(inputs[i].size()), h, opts_.pooling, out.data());
  }
}

void EmbeddingEngine::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || has_work(); });
    if (stop_) {
      for (Job* j : jobs_) j->error = std::make_exception_ptr(Error("the server is shutting down"));
      jobs_.clear();
      cv_.notify_all();
      return;
    }
    std::vector<Item> batch = next_batch();
    lk.unlock();
    std::exception_ptr err;
    try {
      compute(batch);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    for (const Item& it : batch) {
      if (err) it.job->error = err;
      ++it.job->done;
    }
    // Finished jobs leave the queue; their callers wake up.
    std::erase_if(jobs_, [](Job* j) { return j->finished(); });
    cv_.notify_all();
  }
}

}  // namespace rapid::engine
