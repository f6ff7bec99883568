// `rapid-mlx pull NAME`: a model from the Hugging Face hub into its cache (src/download).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/human_size.h"
#include "common/error.h"
#include "download/puller.h"
#include "hub/hf_cache.h"

namespace rapid::cli {
namespace {

// One status line redrawn on a terminal; on a pipe or file, a line per finished file and per 10 %.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string name) : name_(std::move(name)), tty_(::isatty(2)), start_(clock::now()) {}
  void operator()(const download::PullProgress& p) {
    auto& f = files_[p.file];
    f = {p.done, p.total};
    uint64_t done = 0, total = 0;
    for (auto& [_, s] : files_) done += s.first, total += s.second;
    if (tty_) {
      auto now = clock::now();
      if (!p.finished && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      double secs = std::chrono::duration<double>(now - start_).count();
      int pct = total ? int(100.0 * double(done) / double(total)) : 0, bar = pct / 4;
      std::fprintf(stderr, "\r\033[Kpulling %s [%s%s] %3d%% %s / %s %s/s", name_.c_str(), std::string(bar, '#').c_str(),
                   std::string(25 - bar, '.').c_str(), pct, human_size(double(done)).c_str(), human_size(double(total)).c_str(),
                   human_size(secs > 0 ? double(done) / secs : 0).c_str());
    } else if (p.finished) {
      std::fprintf(stderr, "%s %s (%s)\n", p.cached ? "cached " : "fetched", p.file.c_str(), human_size(double(p.total)).c_str());
    } else if (total && int(10.0 * double(done) / double(total)) > decile_) {
      decile_ = int(10.0 * double(done) / double(total));
      std::fprintf(stderr, "pulling %s: %d%% (%s of %s so far)\n", name_.c_str(), decile_ * 10, human_size(double(done)).c_str(),
                   human_size(double(total)).c_str());
    }
  }
  void end() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string name_;
  bool tty_;
  clock::time_point start_, last_;
  int decile_ = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> files_;
};

struct PullArgs {
  std::string name;
  bool quiet = false;
};

FlagTable pull_table(PullArgs& a) {
  return FlagTable(
      "pull",
      {text("NAME", "", "a Hugging Face model id: org/name[@revision][:QUANT] (QUANT picks a GGUF file, e.g. :Q4_K_M)",
            &a.name).as_positional().required(),
       flag("--quiet", "no progress lines", &a.quiet).alias("-q")},
      "download a model from the Hugging Face hub into its cache", {},
      "Writes into the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub), where\n"
      "huggingface_hub and transformers find it too. HF_ENDPOINT and HF_TOKEN are honoured; an\n"
      "interrupted pull resumes where it stopped. Prints the model's path.");
}

int run_pull(PullArgs& a) {
  const std::string& name = a.name;
  const bool quiet = a.quiet;
  std::optional<hub::ModelRef> ref = hub::parse_model_ref(name);
  if (!ref) throw UsageError("'" + name + "' is not a Hugging Face model id (org/name[@revision][:QUANT])");
  if (hub::hub_offline()) throw Error("HF_HUB_OFFLINE is set: pulling needs the network");
  ProgressPrinter printer(name);
  download::PullOptions opts;
  opts.cache = hub::default_cache_dir();
  if (!quiet) opts.progress = [&](const download::PullProgress& p) { printer(p); };
  download::PullResult r = download::pull_model(download::HubApi(download::HubConfig::from_env()), *ref, opts);
  if (!quiet) printer.end();
  std::fprintf(stderr, "%s: %d files fetched (%s), %d already cached\n", name.c_str(), r.fetched_files,
               human_size(double(r.fetched_bytes)).c_str(), r.cached_files);
  std::printf("%s\n", r.model.path.c_str());
  return 0;
}

Registrar reg("pull", pull_table, run_pull);

}  // namespace
}  // namespace rapid::cli
