// Sets of tiny random-weight models that a script in scripts/ writes (with their reference
// goldens) under $RAPID_MODEL_CACHE/<name>, generated on first use.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rapid::tiny {

// $RAPID_MODEL_CACHE/<name> once `marker` (a file the script writes last) exists, running
// `.venv/bin/python scripts/<script> DIR` first if needed. Empty string, with `reason`, when the
// set cannot be generated (no mlx-lm in the test venv).
inline std::string model_set(const std::string& name, const std::string& script, const std::string& marker,
                             std::string& reason) {
  const char* c = std::getenv("RAPID_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string root = (c ? c : std::string(home ? home : "") + "/.cache/rapid-mlx/models") + "/" + name;
  if (std::filesystem::exists(root + "/" + marker)) return root;
  const std::string src = RAPID_SOURCE_DIR;
  const std::string cmd = src + "/.venv/bin/python " + src + "/scripts/" + script + " '" + root + "' > /dev/null";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(root + "/" + marker)) {
    reason = "could not generate the tiny models " + name + " (needs mlx-lm in .venv): " + cmd;
    return std::string();
  }
  return root;
}

}  // namespace rapid::tiny
