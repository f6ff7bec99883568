#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "common/error.h"
#include "common/huge_buffer.h"
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

// AnonHugePages (kB) of this process's mapping holding p, from /proc/self/smaps.
static size_t anon_huge_kb(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    const size_t dash = line.find('-'), sp = line.find(' ');
    if (dash < sp) {
      ours = std::stoull(line.substr(0, dash), nullptr, 16) <= a && a < std::stoull(line.substr(dash + 1, sp - dash - 1), nullptr, 16);
    } else if (ours && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stoul(line.substr(14));
    }
  }
  return 0;
}

static size_t vmstat(const std::string& key) {
  std::ifstream in("/proc/vmstat");
  std::string k;
  size_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

// Slices are 64-byte aligned, disjoint and within the buffer; the buffer starts on a 2 MiB
// boundary, and only the whole huge pages its size fills are advised huge (a huge page is
// allocated whole at its first touch: a 3 MiB buffer would otherwise hold 4 MiB).
TEST(HugeBuffer, SlicesShareOneBufferAndOnlyWholeHugePagesAreAdvised) {
  const size_t mib = 1u << 20;
  BufferSlicer s(BufferSlicer::padded(100) + BufferSlicer::padded(3 * mib - 200));
  uint8_t* a = s.take(100);
  uint8_t* b = s.take(3 * mib - 200);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s.buffer().get()) % (2 * mib), 0u);
  EXPECT_EQ(a, s.buffer().get());
  EXPECT_EQ(b, a + 128);
  EXPECT_THROW(s.take(1), Error);
  const size_t fallback = vmstat("thp_fault_fallback");
  std::memset(a, 1, 100);
  std::memset(b, 2, 3 * mib - 200);
  EXPECT_EQ(a[99] + b[3 * mib - 201], 3);
  const size_t huge = anon_huge_kb(a);
  EXPECT_LE(huge, 2048u);  // the last, partial huge page stays in small pages
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (mode.find("[never]") == std::string::npos && vmstat("thp_fault_fallback") == fallback)
    EXPECT_EQ(huge, 2048u) << "THP: " << mode;
  EXPECT_EQ(BufferSlicer(0).buffer(), nullptr);
}
