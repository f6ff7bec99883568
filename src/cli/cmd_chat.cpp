// `rapid-mlx chat NAME`: a conversation in the terminal, the first thing a new user tries. Each
// turn goes through the model's chat template with the whole history; answers stream; Ctrl-C
// stops an answer (what was said so far stays in the history) and at the prompt ends the chat.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/local_model.h"
#include "cli/model_arg.h"
#include "common/error.h"
#include "engine/generator.h"

namespace rapid::cli {
namespace {

const char* kInChat =
    "At the >>> prompt: a message, or /reset (forget the conversation), /system TEXT, /help, /exit.\n"
    "Ctrl-C stops an answer; at the prompt, Ctrl-C or Ctrl-D ends the chat.\n";

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted = true; }

struct ChatArgs {
  std::string model, system;
  int64_t max_tokens = 1024;
  int threads = 0;
  SamplingOverrides sampling;
};

FlagTable chat_table(ChatArgs& a) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return FlagTable(
      "chat",
      {text("NAME", "", "a Hugging Face model id (org/name[@revision][:QUANT]) or a model path", &a.model).as_positional(),
       text("--model", "NAME", "the same, as a flag", &a.model).alias("-m"),
       text("--system", "TEXT", "system message", &a.system),
       integer("--max-tokens", "N", "tokens per answer at most", &a.max_tokens, 1),
       real("--temperature", "T", "sampling temperature, 0 = greedy", &a.sampling.temperature, 0, kInf)
           .default_is("generation_config.json's, else 0"),
       real("--top-p", "P", "nucleus sampling mass", &a.sampling.top_p, 0, 1),
       integer("--top-k", "K", "sample from the K most likely tokens, 0 = all", &a.sampling.top_k, 0),
       integer("--seed", "S", "sampling seed", &a.sampling.seed).default_is("random"),
       integer("--threads", "N", "compute threads", &a.threads, 0, 1024).default_is("all cores")},
      "talk to a model in the terminal (history, streaming, /reset, Ctrl-C)", {}, kInChat);
}

// Streams one answer; returns its text (cut short by Ctrl-C, then marked on the terminal).
std::string answer(LocalModel& m, const nlohmann::ordered_json& messages, const ChatArgs& a) {
  engine::GenerationRequest req;
  auto ids = render_chat(*m.tok, messages);
  if (!ids) throw Error("the model has no chat template; use `rapid-mlx run --raw` for plain completion");
  req.prompt = *ids;
  req.max_tokens = a.max_tokens;
  req.sampling = sampling_for(a.sampling, m.model->config());
  engine::Generator gen(*m.model, *m.tok, req);
  std::string text;
  g_interrupted = false;
  for (;;) {
    engine::GenerationEvent ev = g_interrupted ? gen.cancel() : gen.step();
    text += ev.text;
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    if (!ev.finished) continue;
    if (ev.finish_reason == engine::FinishReason::Error) throw Error(ev.error);
    if (ev.finish_reason == engine::FinishReason::Cancelled) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    return text;
  }
}

int run_chat(ChatArgs& a) {
  if (a.model.empty()) throw UsageError("which model? give NAME (a hub id or a path)");
  ModelArg target = resolve_model_arg(a.model);
  LocalModel m = load_local_model(target.path, LoadOptions{a.threads});
  const bool tty = ::isatty(0);
  if (tty) std::fprintf(stderr, "%s loaded in %.1f s. /help for commands.\n", target.name.c_str(), m.load_seconds);
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  sigaction(SIGINT, &sa, nullptr);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  };
  reset();
  for (std::string line;;) {
    std::fputs(">>> ", stdout);
    std::fflush(stdout);
    g_interrupted = false;
    if (!std::getline(std::cin, line)) break;  // Ctrl-D, end of input, or Ctrl-C
    if (line.empty()) continue;
    if (line == "/exit" || line == "/bye" || line == "/quit") break;
    if (line == "/help") {
      std::fputs(kInChat, stdout);
    } else if (line == "/reset" || line == "/clear") {
      reset();
      if (tty) std::fputs("(conversation cleared)\n", stdout);
    } else if (line.rfind("/system ", 0) == 0) {
      a.system = line.substr(8);
      reset();
    } else if (line[0] == '/' && line.find(' ') == std::string::npos) {
      std::printf("unknown command %s (/help lists them)\n", line.c_str());
    } else {
      messages.push_back({{"role", "user"}, {"content", line}});
      messages.push_back({{"role", "assistant"}, {"content", answer(m, messages, a)}});
    }
  }
  std::fputc('\n', stdout);
  return 0;
}

Registrar reg("chat", chat_table, run_chat);

}  // namespace
}  // namespace rapid::cli
