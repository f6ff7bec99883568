// `rapid-mlx ls` / `rapid-mlx rm NAME`: the models in the Hugging Face cache (src/hub), whoever
// downloaded them (rapid-mlx pull, huggingface_hub, transformers, mlx-lm).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/human_size.h"
#include "common/error.h"
#include "hub/hf_cache.h"
#include "hub/model_files.h"
#include "hub/model_ref.h"

namespace rapid::cli {
namespace {

// "mlx-4bit" (MLX affine, from config.json's quantization), the quant_method of other quantized
// checkpoints, else the stored dtype.
std::string safetensors_quant(const std::string& snapshot) {
  std::ifstream f(snapshot + "/config.json");
  nlohmann::json c = nlohmann::json::parse(f, nullptr, false);
  if (!c.is_object()) return "?";
  if (c.contains("quantization") && c["quantization"].is_object())
    return "mlx-" + std::to_string(c["quantization"].value("bits", 0)) + "bit";
  if (c.contains("quantization_config") && c["quantization_config"].is_object())
    return c["quantization_config"].value("quant_method", std::string("quantized"));
  for (const char* k : {"torch_dtype", "dtype"})
    if (c.contains(k) && c[k].is_string()) return c[k].get<std::string>();
  if (c.contains("text_config") && c["text_config"].is_object())
    for (const char* k : {"torch_dtype", "dtype"})
      if (c["text_config"].contains(k) && c["text_config"][k].is_string()) return c["text_config"][k].get<std::string>();
  return "-";
}

struct NoArgs {};

FlagTable ls_table(NoArgs&) {
  return FlagTable("ls", {}, "list the models in the Hugging Face cache", {},
                   "The cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub.");
}

int run_ls(NoArgs&) {
  std::string cache = hub::default_cache_dir();
  std::printf("%-44s %-12s %-12s %-10s %10s  %s\n", "NAME", "REVISION", "FORMAT", "QUANT", "SIZE", "PATH");
  for (const hub::CachedRepo& r : hub::scan_cache(cache)) {
    for (const hub::CachedRevision& rev : r.revisions) {
      std::string format = "-", quant = "-", where = rev.path;
      try {
        hub::ModelFiles m = hub::select_model_files(rev.files, "");
        format = m.format;
        quant = m.format == "gguf" ? hub::gguf_quant_of(m.entry) : safetensors_quant(rev.path);
        if (!m.entry.empty()) where += "/" + m.entry;
      } catch (const Error&) {
        // Not a servable model (a dataset-like repo, a half-finished download): listed as such.
      }
      std::string revision = rev.refs.empty() ? rev.commit.substr(0, 12) : rev.refs.front();
      std::printf("%-44s %-12s %-12s %-10s %10s  %s\n", r.repo.c_str(), revision.c_str(), format.c_str(),
                  quant.c_str(), human_size(double(r.size_on_disk)).c_str(), where.c_str());
    }
  }
  return 0;
}

struct RmArgs {
  std::vector<std::string> names;
};

FlagTable rm_table(RmArgs& a) {
  return FlagTable("rm", {text("NAME", "", "a model id (org/name); several may be given", &a.names).as_positional().required()},
                   "remove a model from the Hugging Face cache (every revision)");
}

int run_rm(RmArgs& a) {
  std::string cache = hub::default_cache_dir();
  int missing = 0;
  for (auto& name : a.names) {
    std::optional<hub::ModelRef> ref = hub::parse_model_ref(name);
    if (!ref) throw UsageError("'" + name + "' is not a model id (org/name)");
    uint64_t size = 0;
    for (auto& r : hub::scan_cache(cache))
      if (r.repo == ref->repo) size = r.size_on_disk;
    if (hub::remove_repo(cache, ref->repo)) {
      std::printf("removed %s (%s freed)\n", ref->repo.c_str(), human_size(double(size)).c_str());
    } else {
      std::fprintf(stderr, "rapid-mlx rm: %s is not in %s\n", ref->repo.c_str(), cache.c_str());
      ++missing;
    }
  }
  return missing ? 1 : 0;
}

Registrar ls("ls", ls_table, run_ls);
Registrar rm("rm", rm_table, run_rm);

}  // namespace
}  // namespace rapid::cli
