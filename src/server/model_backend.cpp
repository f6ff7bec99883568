#include "server/model_backend.h"

#include "common/log.h"
#include "constrain/json_schema.h"
#include "server/api_error.h"
#include "template/template_error.h"

namespace rapid::server {

using ojson = nlohmann::ordered_json;

// Used when a model ships no chat template (as llama.cpp does): ChatML.
static const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

bool prompt_opens_reasoning(const std::string& prompt) {
  for (const char* open : {"<think>", "<|begin_of_thought|>", "<seed:think>"}) {
    size_t at = prompt.rfind(open);
    if (at == std::string::npos) continue;
    std::string close = std::string(open).insert(1, "/");
    if (std::string(open) == "<|begin_of_thought|>") close = "<|end_of_thought|>";
    if (prompt.find(close, at) == std::string::npos) {
      // Only when the opening tag ends the prompt (bar whitespace): a tag quoted earlier does not count.
      size_t end = prompt.find_last_not_of(" \n\r\t");
      if (end != std::string::npos && end + 1 == at + std::string(open).size()) return true;
    }
  }
  return false;
}

ModelBackend::ModelBackend(std::shared_ptr<const tok::Tokenizer> tok, std::unique_ptr<engine::BatchEngine> engine,
                           ModelBackendOptions opts)
    : tok_(std::move(tok)), engine_(std::move(engine)), opts_(std::move(opts)) {
  std::string src = tok_->chat_template();
  if (src.empty()) {
    log::warn("the model has no chat template; using ChatML");
    src = kChatMlTemplate;
  }
  template_ = std::make_unique<jinja::ChatTemplate>(src);
  tool_support_ = probe_tool_support([this](const ojson& ctx) { return render_context(ctx); });
  if (!tool_support_.tools)
    log::info("the chat template does not render tools: they are offered in the generic JSON format");
  // The generic format's calls are JSON objects: the `json` parser reads them, whatever the model type.
  if (opts_.tool_parser.empty())
    opts_.tool_parser = tool_support_.tools ? parsers::detect_tool_parser(src, opts_.model_type) : "json";
  if (opts_.reasoning_parser.empty()) opts_.reasoning_parser = parsers::detect_reasoning_parser(src, opts_.model_type);
  if (opts_.tool_parser == "none") opts_.tool_parser.clear();
  if (opts_.reasoning_parser == "none") opts_.reasoning_parser.clear();
  // Validate names now, so a typo fails at startup rather than on the first request.
  parsers::make_output_parser(parsers::ParserOptions{opts_.tool_parser, opts_.reasoning_parser});
}

// continue_final_message: the rendered chat is cut right after the final message's text, so the
// model carries on from it (the turn's closing tokens dropped), as transformers' apply_chat_template
// does: the last occurrence of the text, or of its trimmed form when the template trims.
std::string cut_after_final_message(const std::string& rendered, const ojson& messages) {
  const ojson* content = nullptr;
  if (!messages.empty() && messages.back().contains("content")) content = &messages.back()["content"];
  std::string text = content && content->is_string() ? content->get<std::string>() : "";
  auto trim = [](const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  for (const std::string& t : {text, trim(text)}) {
    size_t at = t.empty() ? std::string::npos : rendered.rfind(t);
    if (at != std::string::npos) return rendered.substr(0, at + t.size());
  }
  throw bad_request("the final message cannot be continued: the chat template does not render its text verbatim",
                    "messages");
}

std::string ModelBackend::render_context(ojson ctx) const {
  ctx["bos_token"] = tok_->bos_token();
  ctx["eos_token"] = tok_->eos_token();
  return template_->render(ctx);
}

std::string ModelBackend::render_text(const ojson& messages, const ojson& tools, const ojson& extra) const {
  ojson ctx = ojson::object();
  ctx["messages"] = apply_generic_tools(messages, tools, tool_support_);
  // A template that cannot show tools gets them in the messages instead (some raise on `tools`).
  if (!tools.empty() && tool_support_.tools) ctx["tools"] = tools;
  bool continue_final = extra.is_object() && extra.value("continue_final_message", false);
  ctx["add_generation_prompt"] = !continue_final;
  for (auto& [k, v] : extra.items())
    if (k != "messages" && k != "tools" && k != "continue_final_message") ctx[k] = v;
  std::string text;
  try {
    text = render_context(std::move(ctx));
  } catch (const jinja::TemplateError& e) {
    throw bad_request(std::string("the chat template rejected this conversation: ") + e.what(), "messages");
  }
  return continue_final ? cut_after_final_message(text, messages) : text;
}

RenderedPrompt ModelBackend::render_chat(const ojson& messages, const ojson& tools, const ojson& extra) const {
  std::string text = render_text(messages, tools, extra);
  RenderedPrompt p;
  // transformers' apply_chat_template and vLLM encode a rendered chat with
  // add_special_tokens=False: a template that wants BOS writes it itself.
  p.tokens = tok_->encode(text, /*add_special=*/false, /*parse_special=*/true);
  p.starts_in_reasoning = prompt_opens_reasoning(text);
  if (opts_.message_checkpoints) p.history_end = history_end(p.tokens, text, messages, tools, extra);
  return p;
}

// The conversation rendered without the generation prompt is a prefix of the text; its tokens
// shared with the prompt's end where the last message does.
int64_t ModelBackend::history_end(const std::vector<int32_t>& tokens, const std::string& text, const ojson& messages,
                                  const ojson& tools, const ojson& extra) const {
  if (extra.is_object() && extra.value("continue_final_message", false)) return 0;
  ojson without = extra.is_object() ? extra : ojson::object();
  without["add_generation_prompt"] = false;
  std::string head;
  try {
    head = render_text(messages, tools, without);
  } catch (const std::exception&) {
    return 0;
  }
  if (head.size() >= text.size() || text.compare(0, head.size(), head) != 0) return 0;
  const std::vector<int32_t> h = tok_->encode(head, /*add_special=*/false, /*parse_special=*/true);
  size_t k = 0;
  while (k < h.size() && k < tokens.size() && h[k] == tokens[k]) ++k;
  return int64_t(k);
}

std::vector<int32_t> ModelBackend::encode_prompt(const std::string& text) const { return tok_->encode(text, true, true); }

std::unique_ptr<parsers::OutputParser> ModelBackend::make_parser(const ojson& tools, bool starts_in_reasoning) const {
  // Like vLLM, tool calls are only looked for when tools were offered: otherwise a JSON answer
  // (response_format) could be mistaken for a call.
  std::string tool_parser = tools.empty() ? "" : opts_.tool_parser;
  if (tool_parser.empty() && opts_.reasoning_parser.empty()) return nullptr;
  parsers::ParserOptions o;
  o.tool_parser = tool_parser;
  o.reasoning_parser = opts_.reasoning_parser;
  o.tools = nlohmann::json::parse(tools.dump());
  o.starts_in_reasoning = starts_in_reasoning;
  return parsers::make_output_parser(o);
}

namespace {

// The constrain module's per-step mask, padded to the model's logit count.
class ConstraintMask : public engine::TokenMaskProvider {
 public:
  ConstraintMask(constrain::TokenConstraint c, size_t vocab) : c_(std::move(c)), vocab_(vocab) {}
  const std::vector<bool>& mask() override {
    const std::vector<bool>& m = c_.mask();
    if (m.size() >= vocab_) return m;
    padded_ = m;
    padded_.resize(vocab_, false);
    return padded_;
  }
  void accept(int32_t token) override { c_.accept(token); }

 private:
  constrain::TokenConstraint c_;
  size_t vocab_;
  std::vector<bool> padded_;
};

}  // namespace

bool ModelBackend::apply_constraint(engine::GenerationRequest& req, const ConstraintSpec& spec) const {
  if (spec.kind == ConstraintSpec::Kind::None) return true;
  std::call_once(vocab_once_, [&] { vocab_index_ = constrain::VocabIndex::from_tokenizer(*tok_); });
  std::shared_ptr<const constrain::Grammar> g;
  try {
    g = spec.kind == ConstraintSpec::Kind::JsonObject ? constrain::grammar_for_json_object() : constrain::grammar_from_json_schema(spec.schema);
  } catch (const Error& e) {
    throw bad_request(std::string("the JSON schema cannot be enforced: ") + e.what(), "response_format");
  }
  size_t vocab = size_t(std::max<int64_t>(opts_.model_vocab, tok_->vocab_size()));
  req.constraint = std::make_shared<ConstraintMask>(constrain::TokenConstraint(std::move(g), vocab_index_), vocab);
  return true;
}

EngineStats ModelBackend::engine_stats() const {
  engine::BatchEngineStats b = engine_->stats();
  EngineStats s;
  s.queued = b.queued;
  s.running = b.running;
  s.kv_blocks_total = int64_t(b.kv.pool.total_blocks);
  s.kv_blocks_free = int64_t(b.kv.pool.free_blocks);
  s.prefix_cache_blocks = int64_t(b.kv.radix.cached_blocks);
  s.kv_usage = s.kv_blocks_total ? double(s.kv_blocks_total - s.kv_blocks_free) / double(s.kv_blocks_total) : 0.0;
  s.prefix_cache_hit_rate = b.kv.radix.hit_rate();
  s.spec_acceptance = b.spec_drafted ? double(b.spec_accepted) / double(b.spec_drafted) : 0.0;
  s.preemptions = b.preemptions;
  s.spec_drafted = b.spec_drafted;
  s.spec_accepted = b.spec_accepted;
  s.steps = b.steps;
  s.disk_entries = b.kv.disk.entries;
  s.disk_bytes = b.kv.disk.disk_bytes;
  s.disk_hits = b.kv.disk.hits;
  s.disk_writes = b.kv.disk.writes;
  s.warm_requests = b.warm_requests;
  s.warm_tokens = b.warm_tokens;
  s.kv_block_size = b.kv.block_size;
  s.prefix_cache_enabled = b.kv.prefix_cache;
  s.prefix_cache_queried_tokens = b.kv.radix.queried_tokens;
  s.prefix_cache_hit_tokens = b.kv.radix.hit_tokens;
  s.state_bytes_per_seq = b.kv.state_bytes_per_seq;
  s.checkpoints = b.kv.radix.checkpoints;
  s.checkpoint_bytes = b.kv.radix.checkpoint_bytes;
  return s;
}

ojson ModelBackend::cache_info() const {
  engine::BatchEngineStats b = engine_->stats();
  const engine::KvCacheStats& k = b.kv;
  ojson pool = {{"block_size", k.block_size},
                {"block_bytes", k.pool.block_bytes},
                {"total_blocks", k.pool.total_blocks},
                {"free_blocks", k.pool.free_blocks},
                {"used_blocks", k.pool.used_blocks},
                {"shared_blocks", k.pool.shared_blocks},
                {"capacity_tokens", uint64_t(k.pool.total_blocks) * uint64_t(k.block_size)},
                {"arena_bytes", k.pool.arena_bytes}};
  ojson prefix = {{"enabled", k.prefix_cache},
                  {"nodes", k.radix.nodes},
                  {"cached_blocks", k.radix.cached_blocks},
                  {"cached_tokens_max", uint64_t(k.radix.cached_blocks) * uint64_t(k.block_size)},
                  {"queried_tokens", k.radix.queried_tokens},
                  {"hit_tokens", k.radix.hit_tokens},
                  {"hit_rate", k.radix.hit_rate()},
                  {"evicted_blocks", k.radix.evicted_blocks}};
  if (k.state_bytes_per_seq) {  // a hybrid: recurrent state per sequence, checkpoints in the tree
    prefix["state_bytes_per_seq"] = k.state_bytes_per_seq;
    prefix["running_state_bytes"] = k.state_bytes_per_seq * uint64_t(b.running);
    prefix["checkpoints"] = k.radix.checkpoints;
    prefix["checkpoint_bytes"] = k.radix.checkpoint_bytes;
    prefix["checkpoint_budget_bytes"] = k.checkpoint_budget;
    prefix["evicted_checkpoints"] = k.radix.evicted_checkpoints;
  }
  ojson disk = {{"enabled", k.persistent}};
  if (!k.persist_disabled.empty()) disk["disabled_reason"] = k.persist_disabled;
  if (k.persistent) {
    disk["dir"] = k.snapshot_dir;
    disk["entries"] = k.disk.entries;
    disk["pending_writes"] = k.disk.pending;
    disk["disk_bytes"] = k.disk.disk_bytes;
    disk["writes"] = k.disk.writes;
    disk["bytes_written"] = k.disk.bytes_written;
    disk["hits"] = k.disk.hits;
    disk["misses"] = k.disk.misses;
    disk["bytes_read"] = k.disk.bytes_read;
    disk["corrupt_skipped"] = k.disk.corrupt_skipped;
    disk["old_format_purged"] = k.disk.old_format_purged;
    disk["evictions"] = k.disk.evictions;
    disk["dropped"] = k.disk.dropped;
    disk["restored_entries"] = k.restored_entries;
    disk["restored_tokens"] = k.restored_tokens;
  }
  ojson spec = {{"mode", engine::spec_mode_name(engine_->options().spec.mode)},
                {"max_draft", engine_->options().spec.max_draft},
                {"steps", b.spec_steps},
                {"drafted_tokens", b.spec_drafted},
                {"accepted_tokens", b.spec_accepted},
                {"acceptance_rate", b.spec_drafted ? double(b.spec_accepted) / double(b.spec_drafted) : 0.0}};
  ojson warm = {{"enabled", opts_.warm_turns}, {"requests", b.warm_requests}, {"tokens", b.warm_tokens}};
  return {{"object", "cache"},     {"kv_pool", pool}, {"prefix_cache", prefix}, {"disk", disk},
          {"speculative", spec},   {"warm_turns", warm}, {"running", b.running}, {"queued", b.queued},
          {"preemptions", b.preemptions}, {"steps", b.steps}};
}

ojson ModelBackend::cached_contents() const {
  auto c = engine_->cached_contents();
  return {{"sequences", c.sequences}, {"checkpoints", c.checkpoints}};
}

ojson ModelBackend::purge_cache() {
  engine_->purge_cache();
  ojson info = cache_info();
  info["object"] = "cache.purged";
  return info;
}

}  // namespace rapid::server
