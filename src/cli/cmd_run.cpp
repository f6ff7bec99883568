// `rapid-mlx run`: one prompt through the chat template, the answer streamed to stdout and the
// prefill / decode speeds to stderr.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
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

const char* kUsage =
    "usage: rapid-mlx run --model PATH [options] [PROMPT]\n"
    "  PROMPT read from stdin when absent.\n"
    "  --temperature T   (default: generation_config, else 0 = greedy)\n"
    "  --top-p P  --top-k K  --min-p P  --repetition-penalty R  --seed S\n"
    "  --max-tokens N    (default 256)\n"
    "  --threads N       (default: all cores)\n"
    "  --system TEXT     system message\n"
    "  --raw             no chat template: the prompt is tokenized as is\n"
    "  --kv-dtype f16|bf16|f32   (default f16)\n"
    "  --exact           dequantize weights to f32 (reference path, slower)\n";

struct Args {
  std::string model, prompt, system;
  bool raw = false, exact = false, have_prompt = false;
  int threads = 0;
  int64_t max_tokens = 256;
  std::optional<double> temperature, top_p, min_p, rep;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  DType kv = DType::F16;
};

Args parse(const std::vector<std::string>& a) {
  Args r;
  auto need = [&](size_t& i) -> const std::string& {
    if (i + 1 >= a.size()) throw Error("option " + a[i] + " needs a value");
    return a[++i];
  };
  auto num = [&](size_t& i) {
    const std::string& opt = a[i];
    const std::string& v = need(i);
    try {
      size_t pos = 0;
      double d = std::stod(v, &pos);
      if (pos != v.size()) throw std::invalid_argument(v);
      return d;
    } catch (const std::exception&) {
      throw Error("option " + opt + ": '" + v + "' is not a number");
    }
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& o = a[i];
    if (o == "--model" || o == "-m") r.model = need(i);
    else if (o == "--temperature") r.temperature = num(i);
    else if (o == "--top-p") r.top_p = num(i);
    else if (o == "--top-k") r.top_k = static_cast<int>(num(i));
    else if (o == "--min-p") r.min_p = num(i);
    else if (o == "--repetition-penalty") r.rep = num(i);
    else if (o == "--seed") r.seed = static_cast<uint64_t>(num(i));
    else if (o == "--max-tokens") r.max_tokens = static_cast<int64_t>(num(i));
    else if (o == "--threads") r.threads = static_cast<int>(num(i));
    else if (o == "--system") r.system = need(i);
    else if (o == "--raw") r.raw = true;
    else if (o == "--exact") r.exact = true;
    else if (o == "--kv-dtype") {
      std::string v = need(i);
      if (v == "f16") r.kv = DType::F16;
      else if (v == "bf16") r.kv = DType::BF16;
      else if (v == "f32") r.kv = DType::F32;
      else throw Error("--kv-dtype must be f16, bf16 or f32");
    } else if (o == "--help" || o == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!o.empty() && o[0] == '-' && o != "-") {
      throw Error("unknown option " + o + "\n" + kUsage);
    } else if (!r.have_prompt) {
      r.prompt = o;
      r.have_prompt = true;
    } else {
      throw Error("more than one prompt given (quote it)");
    }
  }
  if (r.model.empty()) throw Error(std::string("--model is required\n") + kUsage);
  if (r.max_tokens < 0) throw Error("--max-tokens must be >= 0");
  return r;
}

std::vector<int32_t> build_prompt(const Args& a, const Tokenizer& tok) {
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

int run(const std::vector<std::string>& argv) {
  Args a = parse(argv);
  if (!a.have_prompt) {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    a.prompt = ss.str();
  }
  LocalModel m = load_local_model(resolve_model_arg(a.model).path, LoadOptions{a.threads, a.kv, a.exact});
  const Tokenizer* tok = m.tok.get();
  Model* model = m.model.get();
  const double load_s = m.load_seconds;

  GenerationRequest req;
  req.prompt = build_prompt(a, *tok);
  req.max_tokens = a.max_tokens;
  req.sampling = sampling_for(SamplingOverrides{a.temperature, a.top_p, a.min_p, a.rep, a.top_k, a.seed},
                              model->config());

  Generator gen(*model, *tok, req);
  FinishReason why = FinishReason::None;
  std::string err;
  for (;;) {
    GenerationEvent ev = gen.step();
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
  if (why == FinishReason::Error) throw Error(err);
  const double pf = gen.prefill_seconds(), dc = gen.decode_seconds();
  const int64_t np = static_cast<int64_t>(req.prompt.size()), nd = gen.decode_steps();
  std::fprintf(stderr,
               "\n[load %.2f s] prompt %ld tokens: prefill %.1f tok/s | %zu tokens generated: "
               "decode %.1f tok/s | finish: %s | peak RSS %.1f MB\n",
               load_s, static_cast<long>(np), pf > 0 ? np / pf : 0.0, gen.generated().size(),
               dc > 0 ? nd / dc : 0.0, why == FinishReason::Stop ? "stop" : "length", peak_rss_kib() * 1024 / 1e6);
  return 0;
}

Registrar reg("run", "generate a reply to one prompt (streams text, prints tok/s)", run);

}  // namespace
}  // namespace rapid::cli
