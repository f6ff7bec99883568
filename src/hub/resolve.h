// `--model` as users write it: a path, or a hub id already in the Hugging Face cache.
#pragma once
#include <optional>
#include <string>

#include "hub/model_ref.h"

namespace rapid::hub {

struct ResolvedModel {
  std::string path;      // what the loader opens: a folder or a .gguf file
  std::string repo, commit, format;  // empty for a local path
};

// The cached snapshot of `ref` when every file the model needs is there (a half-finished pull
// is not a model); nullopt otherwise.
std::optional<ResolvedModel> resolve_cached(const ModelRef& ref, const std::string& cache);

// True when the user asked never to touch the network (HF_HUB_OFFLINE=1 / true / yes).
bool hub_offline();

}  // namespace rapid::hub
