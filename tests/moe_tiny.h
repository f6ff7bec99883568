// The tiny random-weight MoE models of scripts/make_tiny_moe.py (see tests/model_moe_test.cpp),
// generated into $RAPID_MODEL_CACHE/moe-tiny on first use.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "model/arch.h"
#include "model/weights.h"

namespace rapid::moe_tiny {

inline const char* kConfigs[] = {"qwen3-moe", "qwen35-moe"};

inline std::string tiny_root() {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  std::string cache = c ? c : std::string(home ? home : "") + "/.cache/rapid-mlx/models";
  return cache + "/moe-tiny";
}

// The model set, generated once if absent. Empty string (and the reason) when it cannot be.
inline const std::string& tiny_models(std::string* why) {
  static std::string reason;
  static const std::string dir = [] {
    const std::string root = tiny_root();
    if (std::filesystem::exists(root + "/qwen35-moe/mlx-q4/greedy.json")) return root;
    const std::string src = RAPID_SOURCE_DIR;
    const std::string cmd = src + "/.venv/bin/python " + src + "/scripts/make_tiny_moe.py '" + root + "' > /dev/null";
    if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(root + "/qwen35-moe/mlx-q4/greedy.json")) {
      reason = "could not generate the tiny MoE models (needs mlx-lm in .venv): " + cmd;
      return std::string();
    }
    return root;
  }();
  if (why) *why = reason;
  return dir;
}

#define REQUIRE_TINY()                         \
  std::string why_;                            \
  const std::string root = tiny_models(&why_); \
  if (root.empty()) GTEST_SKIP() << why_

inline std::unique_ptr<Model> make(const std::string& dir, MatmulPath mp, DType kv) {
  ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  return create_model(std::shared_ptr<Checkpoint>(load_checkpoint(dir)), o);
}

}  // namespace rapid::moe_tiny
