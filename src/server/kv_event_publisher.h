// Publishes the prefix cache's KV events over ZeroMQ in vLLM's wire format (vLLM 0.33's
// vllm/distributed/kv_events.py), so prefix-aware routers built for vLLM (llm-d's precise-prefix
// scorer, Dynamo's KV router) index this replica's cache unchanged:
//   PUB, multipart (topic, 8-byte big-endian sequence number, msgpack EventBatch), where EventBatch
//   is the array [ts, [event, ...], data_parallel_rank] and each event BlockStored / BlockRemoved /
//   AllBlocksCleared, either as a tagged array [tag, fields...] (vLLM's array_like events, what
//   llm-d's and Dynamo's decoders read) or as a map tagged by "type" (vLLM 0.33's events).
//   Optional ROUTER replay socket: a request (identity, "", 8-byte start sequence) is answered with
//   every buffered batch from that sequence on, as (identity, "", topic, seq, payload), then the
//   end marker (identity, "", "", seq -1, "").
// The engine only queues batches (bounded; a full queue drops the batch and counts it); encoding and
// sending happen on this object's own thread, and PUB drops for a slow subscriber at its HWM.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/kv_events.h"

namespace rapid::server {

struct KvEventOptions {
  std::string endpoint;         // e.g. tcp://*:5557 (bound when it has *, :: or is ipc/inproc, else connected)
  std::string replay_endpoint;  // empty: no replay socket
  std::string topic;
  int32_t block_size = 16;
  std::string medium = "GPU";     // vLLM's name for the engine's own KV pool (ours lives in RAM)
  bool map_events = false;        // events as maps (vLLM 0.33) instead of tagged arrays
  size_t buffer_batches = 10000;  // kept for replay
  size_t max_queue = 10000;       // batches waiting for the thread
  int hwm = 100000;
};

// Encodes one EventBatch exactly as msgspec encodes vLLM's KVEventBatch (exposed for tests).
std::string encode_event_batch(const std::vector<cache::KvEvent>& events, double ts, int32_t block_size,
                               const std::string& medium, bool map_events);

// llm-d's convention kv@<host>:<port>@<model>; a wildcard listen address names this host instead.
std::string default_kv_events_topic(const std::string& host, int port, const std::string& model);

class KvEventPublisher {
 public:
  // Binds / connects the sockets now, so a bad endpoint fails at startup with its reason.
  explicit KvEventPublisher(KvEventOptions opts);
  ~KvEventPublisher();  // sends what is queued, then closes
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Starts the sending thread with the final topic (the default names the bound HTTP port).
  void start(std::string topic);
  // Any thread; never blocks on the network.
  void publish(std::vector<cache::KvEvent> events);
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t sent() const { return next_seq_.load(); }

 private:
  void run();
  void send(const std::vector<cache::KvEvent>& events);
  void serve_replay();

  KvEventOptions opts_;
  void* ctx_ = nullptr;
  void* pub_ = nullptr;
  void* replay_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<cache::KvEvent>> queue_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<uint64_t> dropped_{0}, next_seq_{0};
  std::deque<std::pair<uint64_t, std::string>> buffer_;  // (sequence, payload), thread only
};

}  // namespace rapid::server
