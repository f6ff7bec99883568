// Byte counts for people: "98.4 MB" (decimal units, as download tools print them).
#pragma once
#include <cstdio>
#include <string>

namespace rapid::cli {

inline std::string human_size(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) bytes /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace rapid::cli
