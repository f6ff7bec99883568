// Resident bytes of this process's mappings of a file, from /proc/self/smaps: whether weights that
// were copied out of a file mapping also stay resident in it.
#pragma once
#include <cstddef>
#include <fstream>
#include <string>

namespace rapid::test_mem {

inline size_t resident_bytes_of(const std::string& path) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool ours = false;
  size_t kb = 0;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp != std::string::npos && line.find('-') < sp)  // a mapping's header line
      ours = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    else if (ours && line.rfind("Rss:", 0) == 0)
      kb += std::stoul(line.substr(4));
  }
  return kb * 1024;
}

}  // namespace rapid::test_mem
