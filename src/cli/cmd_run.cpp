// `rapid-mlx run`: one prompt through the chat template, the answer streamed to stdout and the
// prefill / decode speeds to stderr.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "engine/generator.h"
#include "cli/local_model.h"
#include "cli/model_arg.h"
#include "model/arch.h"
#include "model/weights.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rapid::cli {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Args {
  std::string model, prompt, system;
  bool raw = false, exact = false;
  std::optional<std::string> prompt_arg;
  int threads = 0;
  int64_t max_tokens = 256;
  std::optional<double> temperature, top_p, min_p, rep;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  tensor::DType kv = tensor::DType::F16;
};

FlagTable table(Args& a) {
  const char* from_config = "generation_config.json's, else ";
  return FlagTable(
      "run",
      {text("--model", "PATH", "a model directory or a .gguf file", &a.model).alias("-m").required(),
       text("PROMPT", "", "the user message; read from stdin when absent", &a.prompt_arg).as_positional(),
       real("--temperature", "T", "sampling temperature, 0 = greedy", &a.temperature, 0, kInf)
           .default_is(std::string(from_config) + "0"),
       real("--top-p", "P", "nucleus sampling mass", &a.top_p, 0, 1).default_is(std::string(from_config) + "1"),
       integer("--top-k", "K", "sample from the K most likely tokens, 0 = all", &a.top_k, 0)
           .default_is(std::string(from_config) + "0"),
       real("--min-p", "P", "drop tokens below P x the top probability", &a.min_p, 0, 1).default_is("0"),
       real("--repetition-penalty", "R", "HF repetition penalty, 1 = off", &a.rep, 0, kInf)
           .default_is(std::string(from_config) + "1"),
       integer("--seed", "S", "sampling seed", &a.seed).default_is("random"),
       integer("--max-tokens", "N", "tokens to generate at most", &a.max_tokens, 0),
       integer("--threads", "N", "compute threads", &a.threads, 0, 1024).default_is("all cores"),
       text("--system", "TEXT", "system message", &a.system),
       flag("--raw", "no chat template: the prompt is tokenized as is", &a.raw),
       choice("--kv-dtype", "KV cache element type", &a.kv, {{"f16", tensor::DType::F16}, {"bf16", tensor::DType::BF16}, {"f32", tensor::DType::F32}}),
       flag("--exact", "dequantize weights to f32 (reference path, slower)", &a.exact)},
      "generate a reply to one prompt (streams text, prints tok/s)");
}

std::vector<int32_t> build_prompt(const Args& a, const tok::Tokenizer& tok) {
  if (!a.raw) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
    messages.push_back({{"role", "user"}, {"content", a.prompt}});
    if (auto ids = render_chat(tok, messages)) return *ids;
    std::fprintf(stderr, "rapid-mlx run: model has no chat template, using the raw prompt\n");
  }
  return tok.encode(a.prompt, /*add_special=*/true, /*parse_special=*/true);
}

// This process's peak resident set (VmHWM, KiB). Unlike the parent's ru_maxrss of a child, it
// starts at exec: a child forked from a large process would otherwise inherit its footprint.
long peak_rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib;
}

int run(Args& a) {
  if (a.prompt_arg) {
    a.prompt = *a.prompt_arg;
  } else {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    a.prompt = ss.str();
  }
  LocalModel m = load_local_model(resolve_model_arg(a.model).path, LoadOptions{a.threads, a.kv, a.exact});
  const tok::Tokenizer* tok = m.tok.get();
  model::Model* model = m.model.get();
  const double load_s = m.load_seconds;

  engine::GenerationRequest req;
  req.prompt = build_prompt(a, *tok);
  req.max_tokens = a.max_tokens;
  req.sampling = sampling_for(SamplingOverrides{a.temperature, a.top_p, a.min_p, a.rep, a.top_k, a.seed},
                              model->config());

  engine::Generator gen(*model, *tok, req);
  engine::FinishReason why = engine::FinishReason::None;
  std::string err;
  for (;;) {
    engine::GenerationEvent ev = gen.step();
    if (!ev.text.empty()) {
      std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
      std::fflush(stdout);
    }
    if (ev.finished) {
      why = ev.finish_reason;
      err = ev.error;
      break;
    }
  }
  std::fputc('\n', stdout);
  if (why == engine::FinishReason::Error) throw Error(err);
  const double pf = gen.prefill_seconds(), dc = gen.decode_seconds();
  const int64_t np = static_cast<int64_t>(req.prompt.size()), nd = gen.decode_steps();
  std::fprintf(stderr,
               "\n[load %.2f s] prompt %ld tokens: prefill %.1f tok/s | %zu tokens generated: "
               "decode %.1f tok/s | finish: %s | peak RSS %.1f MB\n",
               load_s, static_cast<long>(np), pf > 0 ? np / pf : 0.0, gen.generated().size(),
               dc > 0 ? nd / dc : 0.0, why == engine::FinishReason::Stop ? "stop" : "length", peak_rss_kib() * 1024 / 1e6);
  return 0;
}

Registrar reg("run", table, run);

}  // namespace
}  // namespace rapid::cli
