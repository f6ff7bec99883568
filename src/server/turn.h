// One generation as the APIs see it: submits to the engine, turns raw text into content,
// reasoning and tool-call deltas (output parser, or forced tool_choice), records latency metrics,
// and cancels the engine request when dropped unfinished (client gone).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/metrics.h"

namespace rapid::server {

enum class ToolMode { Auto, None, Required, Named };

struct TurnResult;

struct TurnSpec {
  engine::GenerationRequest gen;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // OpenAI function tools the model may call
  ToolMode tool_mode = ToolMode::Auto;
  std::string forced_name;          // ToolMode::Named
  bool starts_in_reasoning = false;
  std::string id_prefix = "call_";  // tool-call ids the server makes up
  ConstraintSpec constraint;        // applied per generation (each of n choices gets its own state)
  bool parallel_tool_calls = true;  // false: only the first call is returned
  // Called once with the whole result after a turn that ended normally (not cancelled or failed),
  // from the Turn's destructor, i.e. after the client has its last byte (turn warming).
  std::function<void(const TurnResult&)> after;
};

struct TurnDelta {
  std::string content;
  std::string reasoning;
  std::vector<parsers::ToolCallDelta> tool_calls;
  std::vector<int32_t> tokens;
  std::vector<engine::SampleResult> samples;
  bool finished = false;
  engine::FinishReason reason = engine::FinishReason::None;
  bool has_tool_calls = false;  // on the final delta: the turn produced at least one tool call
  std::string stop_sequence;    // on the final delta: the stop string that ended the turn
  std::string error;
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty() && tokens.empty(); }
};

struct TurnResult {
  std::string content, reasoning;
  std::vector<parsers::ParsedToolCall> tool_calls;
  std::vector<int32_t> tokens;
  std::vector<engine::SampleResult> samples;
  engine::FinishReason reason = engine::FinishReason::None;
  std::string stop_sequence;
  std::string error;
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  uint64_t cache_generation = 0;  // the engine's when the turn began: stamps its warm-up requests
};

std::string random_id(const std::string& prefix, size_t n = 24);

class Turn {
 public:
  Turn(Backend& backend, Metrics* metrics, TurnSpec spec);
  ~Turn();
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  // The next delta, or nullopt when nothing arrived within `wait`. After the final delta
  // (finished = true) it returns nullopt forever.
  std::optional<TurnDelta> next(std::chrono::milliseconds wait);
  bool finished() const { return done_; }
  void cancel();
  // Blocks until the end and merges every delta. Throws ClientGone (cancelling the generation)
  // when the request's client closes its connection meanwhile.
  TurnResult collect();

 private:
  struct Channel {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<engine::GenerationEvent> events;
  };
  TurnDelta translate(const engine::GenerationEvent& ev);
  void merge(const TurnDelta& d);
  void add_call_text(TurnDelta& d, const std::string& text);
  void finish_required(TurnDelta& d);

  Backend& backend_;
  Metrics* metrics_;
  TurnSpec spec_;
  std::shared_ptr<Channel> ch_;
  std::unique_ptr<parsers::OutputParser> parser_;
  uint64_t engine_id_ = 0;
  bool done_ = false;
  bool saw_call_ = false;
  std::string held_;  // ToolMode::Required: raw text kept until the end
  std::string named_id_;
  std::chrono::steady_clock::time_point start_, last_token_;
  bool first_token_seen_ = false;
  TurnResult result_;  // every delta merged
};

}  // namespace rapid::server
