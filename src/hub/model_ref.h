// A model named the way the Hugging Face hub names it: `org/name`, optionally `@revision` (a
// branch, tag or commit) and, for GGUF repos, `:QUANT` choosing the file (`:Q4_K_M`).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace rapid::hub {

struct ModelRef {
  std::string repo;              // "org/name"
  std::string revision = "main";
  std::string quant;             // "" = not given
  std::string str() const;       // back to the user's spelling (for messages)
};

// nullopt when `spec` is not shaped like a hub id (callers then treat it as a path).
std::optional<ModelRef> parse_model_ref(std::string_view spec);

// A 40-hex-digit commit id (refs are not needed to find its snapshot).
bool is_commit_hash(std::string_view s);

}  // namespace rapid::hub
