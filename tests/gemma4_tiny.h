// The tiny random-weight Gemma 4 models of scripts/make_tiny_gemma4.py (e2b, kv), generated into
// $RAPID_MODEL_CACHE/gemma4-tiny on first use.
#pragma once
#include <string>

#include "qwen35_models.h"

namespace rapid::gemma4_tiny {

// The model set, generated once if absent. Empty string (and the reason) when it cannot be.
inline const std::string& tiny_models(std::string* why) {
  return qwen35::model_set("gemma4-tiny", "/moe/mlx-q4/greedy.json", "make_tiny_gemma4.py", why);
}

}  // namespace rapid::gemma4_tiny
