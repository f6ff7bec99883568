// Minimal, bounds-checked GGUF reader: header + key/value metadata only (no tensors), enough to
// build a tokenizer from tokenizer.ggml.* keys. Corrupt files raise FileError, never crash.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rapid::tok {

struct GgufValue {
  enum Kind { Int, Float, Bool, String, Array } kind = Int;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  // Arrays: strings go to `strs`, numbers to `nums`.
  std::vector<std::string> strs;
  std::vector<double> nums;
};

class GgufMetadata {
 public:
  static GgufMetadata read(const std::string& path);
  static GgufMetadata parse(const uint8_t* data, size_t size, const std::string& path);

  const GgufValue* get(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  const std::vector<std::string>* get_strings(const std::string& key) const;
  const std::vector<double>* get_numbers(const std::string& key) const;

  uint32_t version = 0;
  uint64_t tensor_count = 0;
  std::map<std::string, GgufValue> kv;
};

}  // namespace rapid::tok
