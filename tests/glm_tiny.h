// The tiny random-weight GLM-4.7-Flash (glm4_moe_lite) of scripts/make_tiny_glm.py, generated into
// $RAPID_MODEL_CACHE/glm-tiny on first use.
#pragma once
#include <string>

#include "qwen35_models.h"

namespace rapid::glm_tiny {

// The model set, generated once if absent. Empty string (and the reason) when it cannot be.
inline const std::string& tiny_models(std::string* why) {
  return qwen35::model_set("glm-tiny", "/glm/mlx-q4/greedy.json", "make_tiny_glm.py", why);
}

}  // namespace rapid::glm_tiny
