#include "engine/generator.h"

#include <algorithm>

#include "common/error.h"

namespace rapid::engine {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int64_t sequence_capacity(const model::ModelConfig& c, const GenerationRequest& req, int64_t context_limit) {
  const int64_t P = static_cast<int64_t>(req.prompt.size());
  int64_t ctx = c.max_position_embeddings > 0 ? c.max_position_embeddings : P + std::max<int64_t>(req.max_tokens, 1);
  if (context_limit > 0) ctx = std::min(ctx, context_limit);
  if (P >= ctx)
    throw Error("generation: prompt of " + std::to_string(P) + " tokens does not fit the context of " +
                std::to_string(ctx) + " tokens");
  return std::min(ctx, P + std::max<int64_t>(req.max_tokens, 1));
}

Generator::Generator(model::Model& model, const tok::Tokenizer& tok, GenerationRequest req, GeneratorOptions opts)
    : model_(model), opts_(opts) {
  if (req.prompt.empty()) throw Error("generation: the prompt has no tokens");
  const int64_t cap = sequence_capacity(model_.config(), req);
  out_ = std::make_unique<TokenEmitter>(tok, model_.config(), std::move(req), cap);
  state_ = model_.new_state(cap);
  logits_.resize(static_cast<size_t>(model_.config().vocab_size));
  opts_.prefill_chunk = std::max<int64_t>(1, opts_.prefill_chunk);
}

GenerationEvent Generator::cancel() { return out_->finish_now(FinishReason::Cancelled); }

GenerationEvent Generator::step() {
  if (out_->finished()) return out_->finish_now(out_->reason());
  try {
    const auto& prompt = out_->request().prompt;
    const int64_t P = static_cast<int64_t>(prompt.size());
    if (prefilled_ < P) {
      auto t0 = std::chrono::steady_clock::now();
      int64_t n = std::min(opts_.prefill_chunk, P - prefilled_);
      model_.forward(prompt.data() + prefilled_, n, *state_, logits_.data());
      prefilled_ += n;
      prefill_s_ += since(t0);
      if (prefilled_ < P) return out_->base_event();
      if (out_->request().max_tokens == 0) return out_->finish_now(FinishReason::Length);
      return out_->emit(logits_.data());
    }
    auto t0 = std::chrono::steady_clock::now();
    int32_t last = out_->generated().back();
    model_.forward(&last, 1, *state_, logits_.data());
    decode_s_ += since(t0);
    ++decode_steps_;
    return out_->emit(logits_.data());
  } catch (const std::exception& e) {
    return out_->finish_now(FinishReason::Error, e.what());
  }
}

}  // namespace rapid::engine
