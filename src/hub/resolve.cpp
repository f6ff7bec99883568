#include "hub/resolve.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "hub/hf_cache.h"
#include "hub/model_files.h"

namespace rapid::hub {
namespace {
// The shards model.safetensors.index.json names (none without an index).
std::vector<std::string> index_shards(const std::string& snap) {
  std::vector<std::string> out;
  std::ifstream f(snap + "/model.safetensors.index.json");
  if (!f) return out;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  // An unreadable index names a file no snapshot has: the model counts as incomplete.
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return {"?unreadable index"};
  for (auto& [name, file] : j["weight_map"].items())
    if (file.is_string()) out.push_back(file.get<std::string>());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
}  // namespace

std::optional<ResolvedModel> resolve_cached(const ModelRef& ref, const std::string& cache) {
  std::optional<std::string> commit = cached_commit(cache, ref);
  if (!commit) return std::nullopt;
  std::string snap = repo_dir(cache, ref.repo) + "/snapshots/" + *commit;
  std::vector<std::string> have = snapshot_files(snap);
  if (have.empty()) return std::nullopt;
  ModelFiles want;
  try {
    want = select_model_files(have, ref.quant);
  } catch (const Error&) {
    return std::nullopt;  // e.g. another quantization cached: the wanted one must be pulled
  }
  // A sharded checkpoint lists its shards in the index: all must be there.
  for (auto& f : index_shards(snap)) want.files.push_back(f);
  for (auto& f : want.files)
    if (!std::binary_search(have.begin(), have.end(), f)) return std::nullopt;
  ResolvedModel r;
  r.path = want.entry.empty() ? snap : snap + "/" + want.entry;
  r.repo = ref.repo;
  r.commit = *commit;
  r.format = want.format;
  return r;
}

bool hub_offline() {
  const char* v = std::getenv("HF_HUB_OFFLINE");
  if (!v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

}  // namespace rapid::hub
