// Minimal, bounds-checked GGUF reader: header + key/value metadata only (no tensors), enough to
// build a tokenizer from tokenizer.ggml.* keys. Corrupt files raise FileError, never crash.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::tok {

struct GgufValue {
  enum Kind { Int, Float, Bool, String, Array } kind = Int;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  // Arrays: strings go to `strs`, numbers to `nums`. The strings are views into the file
  // bytes (copying 262k token strings cost more than the tokenizer built from them).
  std::vector<std::string_view> strs;
  std::vector<double> nums;
};

class GgufMetadata {
 public:
  // read() keeps the file mapped for as long as the metadata lives; with parse() the caller's
  // buffer must outlive the result (string arrays point into it).
  static GgufMetadata read(const std::string& path);
  static GgufMetadata parse(const uint8_t* data, size_t size, const std::string& path);

  const GgufValue* get(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  const std::vector<std::string_view>* get_strings(const std::string& key) const;
  const std::vector<double>* get_numbers(const std::string& key) const;

  uint32_t version = 0;
  uint64_t tensor_count = 0;
  std::map<std::string, GgufValue> kv;
  std::shared_ptr<const void> backing;  // the mapping `strs` point into (read() only)
};

}  // namespace rapid::tok
