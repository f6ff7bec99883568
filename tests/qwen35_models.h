// The tiny random-weight model sets of the tests (Qwen3.5 here, MoE in moe_tiny.h), generated on first use into
// $RAPID_MODEL_CACHE: qwen35-tiny (scripts/make_tiny_qwen35.py, mlx-lm's models and goldens) and
// qwen35-tiny-mtp (scripts/make_qwen35_mtp.py, the same targets with random MTP heads and a
// reference of the head). Empty string (and the reason) when a set cannot be generated.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <string>

#include "model/arch.h"
#include "model/weights.h"

namespace rapid::qwen35 {

inline std::string cache_root() {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return c ? c : std::string(home ? home : "") + "/.cache/rapid-mlx/models";
}

// `root` when `marker` (a file of the complete set) exists or `script` writes it there.
inline std::string ensure_set(const std::string& root, const std::string& marker, const std::string& script,
                              std::string& reason) {
  if (std::filesystem::exists(root + marker)) return root;
  const std::string src = RAPID_SOURCE_DIR;
  const std::string cmd = src + "/.venv/bin/python " + src + "/scripts/" + script + " '" + root + "' > /dev/null";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(root + marker)) {
    reason = "could not generate " + root + " (needs mlx-lm in .venv): " + cmd;
    return std::string();
  }
  return root;
}

// The set under cache_root()/`name`, generated once per process (and its failure remembered).
inline const std::string& model_set(const std::string& name, const std::string& marker, const std::string& script,
                                    std::string* why) {
  static std::map<std::string, std::pair<std::string, std::string>> sets;  // name → (root, reason)
  auto it = sets.find(name);
  if (it == sets.end()) {
    std::string reason;
    std::string root = ensure_set(cache_root() + "/" + name, marker, script, reason);
    it = sets.emplace(name, std::pair{root, reason}).first;
  }
  if (why) *why = it->second.second;
  return it->second.first;
}

inline const std::string& tiny_models(std::string* why) {
  return model_set("qwen35-tiny", "/vheads-untied/mlx-q4/greedy.json", "make_tiny_qwen35.py", why);
}

inline const std::string& mtp_models(std::string* why) {
  return model_set("qwen35-tiny-mtp", "/vheads-untied/gguf-f32/model.gguf", "make_qwen35_mtp.py", why);
}

// A tiny model on 2 threads (its matmul path, KV dtype and DeltaNet prefill form as asked).
inline std::unique_ptr<model::Model> make(const std::string& dir, compute::MatmulPath mp, tensor::DType kv, bool chunked = false) {
  model::ModelOptions o;
  o.num_threads = 2;
  o.matmul = mp;
  o.kv_dtype = kv;
  o.chunked_deltanet = chunked;
  return model::create_model(std::shared_ptr<model::Checkpoint>(model::load_checkpoint(dir)), o);
}

}  // namespace rapid::qwen35
