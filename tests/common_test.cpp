#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/error.h"
#include "common/mapped_file.h"

using namespace rapid;

TEST(MappedFile, MapsWholeFileBytes) {
  std::string path = ::testing::TempDir() + "/mapped_file_test.bin";
  std::string payload("abc\0def", 7);
  { std::ofstream(path, std::ios::binary) << payload; }
  MappedFile f(path);
  ASSERT_EQ(f.size(), payload.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), f.size()), payload);
  EXPECT_EQ(read_file(path), payload);
  std::remove(path.c_str());
}

TEST(MappedFile, MissingFileIsRefusedWithPath) {
  try {
    MappedFile f("/nonexistent/dir/weights.gguf");
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), "/nonexistent/dir/weights.gguf");
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(MappedFile, DirectoryIsRefused) {
  EXPECT_THROW(MappedFile f(::testing::TempDir()), FileError);
}
