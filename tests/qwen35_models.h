// The tiny random-weight model sets of the tests (Qwen3.5 here, MoE in moe_tiny.h), generated on first use into
// $RAPID_MODEL_CACHE: qwen35-tiny (scripts/make_tiny_qwen35.py, mlx-lm's models and goldens) and
// qwen35-tiny-mtp (scripts/make_qwen35_mtp.py, the same targets with random MTP heads and a
// reference of the head). Empty string (and the reason) when a set cannot be generated.
// ctest runs every case in its own process, two at a time: a set is generated under a lock file
// beside it, so two cases that find it missing do not write it at once.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

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

// Whether the test venv holds the generators' oracle (mlx-lm). Without it a missing set is a skip;
// with it a set that fails to generate is a failure, so a broken generator cannot pass as skips.
inline bool oracle_present() {
  static const bool present = [] {
    const std::string cmd = std::string(RAPID_SOURCE_DIR) + "/.venv/bin/python -c 'import mlx_lm' 2>/dev/null";
    return std::system(cmd.c_str()) == 0;
  }();
  return present;
}

// `root` when `marker` (a file of the complete set) exists or `cmd` writes it there; the check and
// the run hold an exclusive lock on `root`.lock (sets written by two scripts share one root).
inline std::string ensure_set_by(const std::string& root, const std::string& marker, const std::string& cmd,
                                 std::string& reason) {
  if (std::filesystem::exists(root + marker)) return root;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(root).parent_path(), ec);
  const int fd = ::open((root + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd >= 0) ::flock(fd, LOCK_EX);  // released by close, also if the script fails
  const bool ok = std::filesystem::exists(root + marker) ||
                  (std::system(cmd.c_str()) == 0 && std::filesystem::exists(root + marker));
  if (fd >= 0) ::close(fd);
  if (ok) return root;
  reason = (oracle_present() ? "generation failed although .venv has mlx-lm: " : "needs mlx-lm in .venv: ") + cmd;
  return std::string();
}

inline std::string ensure_set(const std::string& root, const std::string& marker, const std::string& script,
                              std::string& reason) {
  const std::string src = RAPID_SOURCE_DIR;
  return ensure_set_by(root, marker,
                       src + "/.venv/bin/python " + src + "/scripts/" + script + " '" + root + "' > /dev/null", reason);
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

// In a test whose model set is missing (`why` from the functions above): skip, or fail where the
// oracle was there to generate it.
#define SET_MISSING(why)                                                      \
  do {                                                                        \
    if (::rapid::qwen35::oracle_present()) GTEST_FAIL() << (why);             \
    GTEST_SKIP() << (why);                                                    \
  } while (0)
