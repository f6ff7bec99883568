#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/mapped_file.h"
#include "resident_bytes.h"

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

// read() copies bytes with pread: the same bytes as the mapping, none of its pages mapped (a fault
// there would map the page-cache folio around it), a moved-from file's descriptor goes with it, and
// a read past the end is refused with the path.
TEST(MappedFile, ReadCopiesWithoutMappingAndRefusesPastTheEnd) {
  const std::string path = ::testing::TempDir() + "/mapped_file_read.bin";
  std::string payload(3 << 20, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + (i >> 12));
  { std::ofstream(path, std::ios::binary) << payload; }
  MappedFile g(path);
  MappedFile f(std::move(g));
  std::string got(1 << 20, '\0');
  f.read(1000003, got.size(), got.data());
  EXPECT_EQ(got, payload.substr(1000003, got.size()));
  EXPECT_EQ(test_mem::resident_bytes_of(path), 0u);
  EXPECT_EQ(std::memcmp(f.data() + 7, payload.data() + 7, 100), 0);  // the mapping agrees
  try {
    f.read(payload.size() - 10, 11, got.data());
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path);
  }
  EXPECT_THROW(f.read(payload.size() + 1, 0, got.data()), FileError);
  std::remove(path.c_str());
}
