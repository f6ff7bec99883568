#include "engine/verify.h"

namespace rapid::engine {

namespace {
void merge(GenerationEvent& into, const GenerationEvent& ev) {
  into.tokens.insert(into.tokens.end(), ev.tokens.begin(), ev.tokens.end());
  into.text += ev.text;
  into.samples.insert(into.samples.end(), ev.samples.begin(), ev.samples.end());
  into.finished = ev.finished;
  into.finish_reason = ev.finish_reason;
  into.stop_string = ev.stop_string;
  into.prompt_tokens = ev.prompt_tokens;
  into.cached_tokens = ev.cached_tokens;
  into.completion_tokens = ev.completion_tokens;
}
}  // namespace

Verified verify_step(TokenEmitter& out, float* logits, int64_t vocab, const std::vector<int32_t>& draft,
                     std::vector<int32_t>& tokens) {
  Verified v;
  const int d = int(draft.size());
  for (int i = 0; i <= d; ++i) {
    float* row = logits + size_t(i) * size_t(vocab);
    bool ok = false;
    GenerationEvent ev = i < d ? out.emit_with_draft(row, draft[size_t(i)], &ok) : out.emit(row);
    tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
    merge(v.event, ev);
    if (ev.finished) {
      v.finished = true;
      break;
    }
    if (!ok) break;
    ++v.accepted;
  }
  return v;
}

}  // namespace rapid::engine
