// GGUF files in the model tests: a file's bytes, a copy with one 4-byte metadata value replaced,
// and the check that a bad file is refused with its own path and the reason.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>

#include "common/error.h"
#include "qwen35_models.h"

namespace rapid::gguf_test {

inline std::string bytes_of(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A copy of `src` at `dst` with the metadata value of `key` replaced by v: an integer v for a
// UINT32 / INT32 key, a float for a FLOAT32 one.
template <class T>
void patch4(const std::string& src, const std::filesystem::path& dst, const std::string& key, T v) {
  static_assert(sizeof(T) == 4);
  std::string b = bytes_of(src);
  size_t at = b.find(key);
  ASSERT_NE(at, std::string::npos) << key;
  at += key.size();
  uint32_t type = 0;
  std::memcpy(&type, b.data() + at, 4);
  if constexpr (std::is_floating_point_v<T>)
    ASSERT_EQ(type, 6u) << key << " has GGUF type " << type;  // FLOAT32
  else
    ASSERT_TRUE(type == 4 || type == 5) << key << " has GGUF type " << type;  // UINT32 / INT32
  std::memcpy(b.data() + at + 4, &v, 4);
  std::ofstream(dst, std::ios::binary | std::ios::trunc) << b;
}

// Loading `file` (a patched GGUF) must fail with a FileError naming the file and `why`.
inline void expect_refused(const std::filesystem::path& file, const std::string& why) {
  try {
    qwen35::make(file.string(), compute::MatmulPath::Fast, tensor::DType::F16);
    ADD_FAILURE() << file << " was accepted; expected: " << why;
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), file.string());
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace rapid::gguf_test
