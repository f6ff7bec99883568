// The tiny random-weight MoE models of scripts/make_tiny_moe.py (see tests/model_moe_test.cpp),
// generated into $RAPID_MODEL_CACHE/moe-tiny on first use.
#pragma once
#include <string>

#include "qwen35_models.h"

namespace rapid::moe_tiny {

inline const char* kConfigs[] = {"qwen3-moe", "qwen35-moe", "gpt-oss", "qwen3-next"};

// The model set, generated once if absent. Empty string (and the reason) when it cannot be.
inline const std::string& tiny_models(std::string* why) {
  return qwen35::model_set("moe-tiny", "/qwen3-next/mlx-q4/greedy.json", "make_tiny_moe.py", why);
}

#define REQUIRE_TINY()                         \
  std::string why_;                            \
  const std::string root = tiny_models(&why_); \
  if (root.empty()) SET_MISSING(why_)

using qwen35::make;

}  // namespace rapid::moe_tiny
