#include "parsers/tool_ids.h"

#include <atomic>
#include <chrono>

namespace rapid::parsers {

static uint64_t fresh_seed() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ t ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
}

ToolIdMaker::ToolIdMaker(uint64_t seed) : rng_(seed ? seed : fresh_seed()) {}

std::string ToolIdMaker::random_alnum(size_t n) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += kChars[rng_() % 62];
  return s;
}

std::string ToolIdMaker::next(IdStyle style, const std::string& name, int index, const std::string& from_text) {
  std::string id;
  for (int attempt = 0;; ++attempt) {
    switch (style) {
      case IdStyle::Mistral9: id = random_alnum(9); break;  // Mistral requires [a-zA-Z0-9]{9}
      case IdStyle::Kimi:
        id = (attempt == 0 && !from_text.empty()) ? from_text
                                                  : "functions." + name + ":" + std::to_string(index + attempt);
        break;
      case IdStyle::OpenAI: id = "call_" + random_alnum(24); break;
    }
    if (used_.insert(id).second) return id;
  }
}

}  // namespace rapid::parsers
