// Errors that cross module boundaries. Every refusal names what was refused and why, so a user
// can act on it (e.g. "model.gguf: tensor 'blk.0.attn_q.weight' extends past end of file").
#pragma once
#include <stdexcept>
#include <string>

namespace rapid {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file (weights, cache, tokenizer) that is unreadable, truncated or inconsistent.
class FileError : public Error {
 public:
  FileError(const std::string& path, const std::string& reason)
      : Error(path + ": " + reason), path_(path), reason_(reason) {}
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_, reason_;
};

}  // namespace rapid
