#include "cli/local_model.h"

#include <malloc.h>

#include <chrono>

#include "template/chat_template.h"

namespace rapid::cli {

LocalModel load_local_model(const std::string& path, const LoadOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  LocalModel m;
  m.ckpt = model::load_checkpoint(path);
  // The tokenizer first, then give its (and the metadata parser's) transient heap back to the
  // kernel before the model touches its weights: peak RSS = weights + KV + what stays live, not
  // weights + every load-time peak left behind in malloc's free lists.
  m.tok = tok::load_tokenizer(m.ckpt->tokenizer_path.empty() ? path : m.ckpt->tokenizer_path);
  ::malloc_trim(0);
  model::ModelOptions mo;
  mo.num_threads = opts.threads;
  mo.kv_dtype = opts.kv;
  mo.matmul = opts.exact ? compute::MatmulPath::Exact : compute::MatmulPath::Fast;
  m.model = model::create_model(m.ckpt, mo);
  m.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

engine::SamplingParams sampling_for(const SamplingOverrides& o, const model::ModelConfig& c) {
  engine::SamplingParams s;
  s.temperature = o.temperature.value_or(c.temperature.value_or(0.0));
  s.top_p = o.top_p.value_or(c.top_p.value_or(1.0));
  s.top_k = o.top_k.value_or(static_cast<int>(c.top_k.value_or(0)));
  s.min_p = o.min_p.value_or(0.0);
  s.repetition_penalty = o.repetition_penalty.value_or(c.repetition_penalty.value_or(1.0));
  s.seed = o.seed;
  return s;
}

std::optional<std::vector<int32_t>> render_chat(const tok::Tokenizer& tok, const nlohmann::ordered_json& messages) {
  std::string src = tok.chat_template();
  if (src.empty()) return std::nullopt;
  nlohmann::ordered_json ctx;
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = true;
  ctx["bos_token"] = tok.bos_token();
  ctx["eos_token"] = tok.eos_token();
  std::string text = jinja::ChatTemplate(src).render(ctx);
  // As transformers' apply_chat_template: the template places special tokens itself.
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace rapid::cli
