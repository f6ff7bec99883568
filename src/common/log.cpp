#include "common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace rapid::log {
namespace {
std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::mutex g_mu;
const char* name(Level l) {
  switch (l) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    default: return "error";
  }
}
}  // namespace

void set_level(Level l) { g_level = static_cast<int>(l); }
Level level() { return static_cast<Level>(g_level.load()); }

void write(Level l, const std::string& msg) {
  if (static_cast<int>(l) < g_level.load()) return;
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(stderr, "[rapid-mlx %s] %s\n", name(l), msg.c_str());
}
}  // namespace rapid::log
