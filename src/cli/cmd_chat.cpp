// `rapid-mlx chat NAME`: a conversation in the terminal, the first thing a new user tries. Each
// turn goes through the model's chat template with the whole history; answers stream; Ctrl-C
// stops an answer (what was said so far stays in the history) and at the prompt ends the chat.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/local_model.h"
#include "cli/model_arg.h"
#include "common/error.h"
#include "engine/generator.h"

namespace rapid::cli {
namespace {

const char* kUsage =
    "usage: rapid-mlx chat NAME|PATH [--system TEXT] [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                      [--top-k K] [--seed S] [--threads N]\n"
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

ChatArgs parse(const std::vector<std::string>& a) {
  ChatArgs r;
  auto value = [&](size_t& i) -> const std::string& {
    if (i + 1 >= a.size()) throw Error("option " + a[i] + " needs a value");
    return a[++i];
  };
  auto number = [&](size_t& i) {
    const std::string& opt = a[i];
    const std::string& v = value(i);
    size_t pos = 0;
    double d = 0;
    try {
      d = std::stod(v, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != v.size()) throw Error("option " + opt + ": '" + v + "' is not a number");
    return d;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--model" || o == "-m") r.model = value(i);
    else if (o == "--system") r.system = value(i);
    else if (o == "--max-tokens") r.max_tokens = int64_t(number(i));
    else if (o == "--threads") r.threads = int(number(i));
    else if (o == "--temperature") r.sampling.temperature = number(i);
    else if (o == "--top-p") r.sampling.top_p = number(i);
    else if (o == "--top-k") r.sampling.top_k = int(number(i));
    else if (o == "--seed") r.sampling.seed = uint64_t(number(i));
    else if (o == "-h" || o == "--help") std::fputs(kUsage, stdout), std::exit(0);
    else if (!o.empty() && o[0] == '-') throw Error("unknown option " + o + "\n" + kUsage);
    else if (r.model.empty()) r.model = o;
    else throw Error("one model at a time ('" + o + "' is extra)\n" + kUsage);
  }
  if (r.model.empty()) throw Error(std::string("which model? ") + kUsage);
  if (r.max_tokens <= 0) throw Error("--max-tokens must be > 0");
  return r;
}

// Streams one answer; returns its text (cut short by Ctrl-C, then marked on the terminal).
std::string answer(LocalModel& m, const nlohmann::ordered_json& messages, const ChatArgs& a) {
  GenerationRequest req;
  auto ids = render_chat(*m.tok, messages);
  if (!ids) throw Error("the model has no chat template; use `rapid-mlx run --raw` for plain completion");
  req.prompt = *ids;
  req.max_tokens = a.max_tokens;
  req.sampling = sampling_for(a.sampling, m.model->config());
  Generator gen(*m.model, *m.tok, req);
  std::string text;
  g_interrupted = false;
  for (;;) {
    GenerationEvent ev = g_interrupted ? gen.cancel() : gen.step();
    text += ev.text;
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    if (!ev.finished) continue;
    if (ev.finish_reason == FinishReason::Error) throw Error(ev.error);
    if (ev.finish_reason == FinishReason::Cancelled) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    return text;
  }
}

int run_chat(const std::vector<std::string>& argv) {
  ChatArgs a = parse(argv);
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
      std::fputs(kUsage, stdout);
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

Registrar reg("chat", "talk to a model in the terminal (history, streaming, /reset, Ctrl-C)", run_chat);

}  // namespace
}  // namespace rapid::cli
