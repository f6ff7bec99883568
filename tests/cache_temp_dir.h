// A fresh directory under /tmp for one cache test, removed with everything in it afterwards.
#pragma once
#include <stdlib.h>

#include <filesystem>

struct CacheTempDir {
  std::filesystem::path path;
  CacheTempDir() {
    char tmpl[] = "/tmp/rapid_cache_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~CacheTempDir() { std::filesystem::remove_all(path); }
};
