#include "server/kv_event_publisher.h"

#include <unistd.h>
#include <zmq.h>

#include <chrono>

#include "common/error.h"
#include "common/log.h"
#include "common/msgpack_writer.h"

namespace rapid::server {

namespace {
std::string be64(int64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((uint64_t(v) >> (8 * (7 - i))) & 0xff);
  return s;
}

// Sends the frames as one multipart message; false if ZeroMQ refused (e.g. PUB over its HWM).
bool send_parts(void* sock, const std::vector<std::string>& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    int flags = ZMQ_DONTWAIT | (i + 1 < parts.size() ? ZMQ_SNDMORE : 0);
    if (zmq_send(sock, parts[i].data(), parts[i].size(), flags) < 0) return false;
  }
  return true;
}

bool is_bind_endpoint(const std::string& e) {
  return e.find('*') != std::string::npos || e.find("::") != std::string::npos || e.rfind("ipc://", 0) == 0 ||
         e.rfind("inproc://", 0) == 0;
}

void hashes(msgpack::Writer& w, const std::vector<uint64_t>& h) {
  w.array(uint32_t(h.size()));
  for (uint64_t x : h) w.uint(x);
}
}  // namespace

// msgspec's encoding of vLLM's structs: EventBatch is array_like (fields in order; the trailing
// data_parallel_rank is present since it is not None). An event is either array_like too — the tag
// (class name) first, then the fields in declaration order — or a map whose first key is the tag
// field "type"; in both, required fields are always written (None as nil) and the optional ones
// after them, all at their defaults here, are omitted (omit_defaults).
std::string encode_event_batch(const std::vector<cache::KvEvent>& events, double ts, int32_t block_size,
                               const std::string& medium, bool map_events) {
  msgpack::Writer w;
  // BlockStored has 15 fields besides the tag in vLLM 0.33: its map header is map 16.
  auto begin = [&](uint32_t n, const char* tag, bool wide = false) {
    if (map_events) {
      if (wide) w.map16(uint16_t(n)); else w.map(n);
      w.str("type");
    } else {
      w.array(n);
    }
    w.str(tag);
  };
  auto field = [&](const char* name) {
    if (map_events) w.str(name);
  };
  w.array(3);
  w.float64(ts);
  w.array(uint32_t(events.size()));
  for (const cache::KvEvent& e : events) {
    switch (e.kind) {
      case cache::KvEventKind::Stored:
        begin(8, "BlockStored", true);
        field("block_hashes"), hashes(w, e.block_hashes);
        field("parent_block_hash");
        if (e.parent_hash) w.uint(*e.parent_hash); else w.nil();
        field("token_ids"), w.array(uint32_t(e.token_ids.size()));
        for (int32_t t : e.token_ids) w.sint(t);
        field("block_size"), w.sint(block_size);
        field("lora_id"), w.nil();
        field("medium"), w.str(medium);
        field("lora_name"), w.nil();
        break;
      case cache::KvEventKind::Removed:
        begin(3, "BlockRemoved");
        field("block_hashes"), hashes(w, e.block_hashes);
        field("medium"), w.str(medium);
        break;
      case cache::KvEventKind::AllCleared:
        begin(1, "AllBlocksCleared");
        break;
    }
  }
  w.sint(0);  // data_parallel_rank: one engine
  return w.take();
}

std::string default_kv_events_topic(const std::string& host, int port, const std::string& model) {
  std::string h = host;
  if (h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]") {
    char name[256] = {};
    h = gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  return "kv@" + h + ":" + std::to_string(port) + "@" + model;
}

KvEventPublisher::KvEventPublisher(KvEventOptions opts) : opts_(std::move(opts)) {
  ctx_ = zmq_ctx_new();
  std::string error;
  auto open = [&](int type, const std::string& ep, bool bind) -> void* {
    void* s = zmq_socket(ctx_, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    int hwm = type == ZMQ_PUB ? opts_.hwm : int(2 * (opts_.buffer_batches + 1));  // a whole replay fits
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    // Peers only send subscriptions and 8-byte replay requests: a larger frame drops the peer.
    int64_t max_in = 4096;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_in, sizeof max_in);
    if ((bind ? zmq_bind(s, ep.c_str()) : zmq_connect(s, ep.c_str())) == 0) return s;
    error = "kv events: cannot " + std::string(bind ? "bind " : "connect ") + ep + ": " + zmq_strerror(zmq_errno());
    zmq_close(s);
    return nullptr;
  };
  pub_ = open(ZMQ_PUB, opts_.endpoint, is_bind_endpoint(opts_.endpoint));
  if (pub_ && !opts_.replay_endpoint.empty()) replay_ = open(ZMQ_ROUTER, opts_.replay_endpoint, true);
  if (error.empty()) return;
  if (pub_) zmq_close(pub_);
  zmq_ctx_term(ctx_);
  throw Error(error);
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  zmq_close(pub_);
  if (replay_) zmq_close(replay_);
  zmq_ctx_term(ctx_);
}

void KvEventPublisher::start(std::string topic) {
  opts_.topic = std::move(topic);
  thread_ = std::thread([this] { run(); });
}

void KvEventPublisher::publish(std::vector<cache::KvEvent> events) {
  {
    std::lock_guard lk(mu_);
    if (queue_.size() < opts_.max_queue) {
      queue_.push_back(std::move(events));
      events.clear();
    }
  }
  if (!events.empty()) {
    if (dropped_++ == 0) log::warn("kv events: publisher queue full, dropping batches");
    return;
  }
  cv_.notify_one();
}

void KvEventPublisher::run() {
  // The replay socket is polled between batches: a short wait keeps replays prompt.
  const auto tick = std::chrono::milliseconds(replay_ ? 10 : 200);
  for (;;) {
    std::deque<std::vector<cache::KvEvent>> work;
    bool stopping;
    {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, tick, [&] { return stop_ || !queue_.empty(); });
      work.swap(queue_);
      stopping = stop_;
    }
    for (const auto& batch : work) send(batch);
    if (replay_) serve_replay();
    if (stopping) return;
  }
}

void KvEventPublisher::send(const std::vector<cache::KvEvent>& events) {
  const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string payload = encode_event_batch(events, ts, opts_.block_size, opts_.medium, opts_.map_events);
  const uint64_t seq = next_seq_.load();
  send_parts(pub_, {opts_.topic, be64(int64_t(seq)), payload});  // PUB drops at HWM: never blocks
  next_seq_ = seq + 1;
  buffer_.emplace_back(seq, std::move(payload));
  if (buffer_.size() > opts_.buffer_batches) buffer_.pop_front();
}

void KvEventPublisher::serve_replay() {
  for (;;) {
    zmq_pollitem_t item{replay_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 0) <= 0 || !(item.revents & ZMQ_POLLIN)) return;
    std::vector<std::string> frames;
    int more = 1;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, replay_, 0) < 0) {
        zmq_msg_close(&m);
        return;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    // (identity, "", start sequence): anything else is ignored, as vLLM does.
    if (frames.size() != 3 || frames[2].size() != 8) continue;
    uint64_t start = 0;
    for (unsigned char c : frames[2]) start = start << 8 | c;
    for (const auto& [seq, payload] : buffer_)
      if (seq >= start) send_parts(replay_, {frames[0], "", opts_.topic, be64(int64_t(seq)), payload});
    send_parts(replay_, {frames[0], "", "", be64(-1), ""});
  }
}

}  // namespace rapid::server
