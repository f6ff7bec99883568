// What the HTTP layer needs from a loaded model: its name and context, its tokenizer, prompt
// rendering, output parsing and an engine. The real one wraps the checkpoint + chat template +
// parsers (model_backend.cpp); unit tests plug in a fake, so the server is tested without a model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "parsers/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace rapid::server {

struct RenderedPrompt {
  std::vector<int32_t> tokens;
  bool starts_in_reasoning = false;  // the rendered prompt already opened a thinking block
  // Tokens before the generation prompt (where the last message ends: the next turn's prompt
  // re-renders everything up to here the same way); 0 when not asked for or not found.
  int64_t history_end = 0;
};

// Structured-output request passed to the constrained-decoding hook.
struct ConstraintSpec {
  enum class Kind { None, JsonObject, JsonSchema } kind = Kind::None;
  nlohmann::ordered_json schema;  // for JsonSchema
};

struct EngineStats {
  int64_t queued = 0;
  int64_t running = 0;
  double kv_usage = 0.0;          // fraction of KV blocks held (by sequences or the prefix cache)
  double prefix_cache_hit_rate = 0.0;
  double spec_acceptance = 0.0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0, prefix_cache_blocks = 0;
  uint64_t preemptions = 0, spec_drafted = 0, spec_accepted = 0, steps = 0;
  uint64_t disk_entries = 0, disk_bytes = 0, disk_hits = 0, disk_writes = 0;
  uint64_t warm_requests = 0, warm_tokens = 0;
  int32_t kv_block_size = 0;
  bool prefix_cache_enabled = false;
  uint64_t prefix_cache_queried_tokens = 0, prefix_cache_hit_tokens = 0;
  // Hybrid (recurrent-state) models; 0 otherwise.
  uint64_t state_bytes_per_seq = 0, checkpoints = 0, checkpoint_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string model_id() const = 0;
  virtual int64_t context_length() const = 0;
  virtual const tok::Tokenizer& tokenizer() const = 0;
  // messages: OpenAI-shaped (role, content string, tool_calls with object arguments, ...);
  // tools: OpenAI function tools; extra: template variables (enable_thinking, ...), and
  // "continue_final_message": true to render without a generation prompt and end the prompt
  // right after the final (assistant) message's text, which the model then continues.
  // Throws ApiError(400) when the template refuses the conversation.
  virtual RenderedPrompt render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     const nlohmann::ordered_json& extra) const = 0;
  // Text completion prompt (BOS per the tokenizer's own rules).
  virtual std::vector<int32_t> encode_prompt(const std::string& text) const = 0;
  // nullptr when neither a tool nor a reasoning parser is configured.
  virtual std::unique_ptr<parsers::OutputParser> make_parser(const nlohmann::ordered_json& tools,
                                                    bool starts_in_reasoning) const = 0;
  // Attaches a token-mask provider to the request for response_format / forced tool calls.
  // Returns false when constrained decoding is unavailable (the request then runs unconstrained).
  virtual bool apply_constraint(engine::GenerationRequest& req, const ConstraintSpec& spec) const = 0;
  virtual engine::Engine& engine() = 0;
  // Whether finished chat turns should have their follow-up prompt prefilled in idle time
  // (turn_warmer.h): only worth it with a prefix cache.
  virtual bool warms_turns() const { return false; }
  virtual EngineStats engine_stats() const = 0;
  // GET /v1/cache (KV pool, prefix cache and disk snapshot state) and DELETE /v1/cache (purge,
  // disk included). Null when the backend has no KV cache (→ 404).
  virtual nlohmann::ordered_json cache_info() const { return nullptr; }
  // {"sequences": every token sequence the prefix cache holds, "checkpoints": the tokens before
  // each recurrent checkpoint}, as arrays of token ids.
  virtual nlohmann::ordered_json cached_contents() const {
    return {{"sequences", nlohmann::ordered_json::array()}, {"checkpoints", nlohmann::ordered_json::array()}};
  }
  virtual nlohmann::ordered_json purge_cache() { return nullptr; }
};

}  // namespace rapid::server
