// Shared by the tests that read the chat-template goldens (tests/golden/template, written by
// scripts/gen_template_*.py) and the shared template fixtures.
#pragma once
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rapid::fixtures {

inline const std::filesystem::path kTemplateGolden = std::filesystem::path(RAPID_SOURCE_DIR) / "tests/golden/template";
inline const std::filesystem::path kFixtures = RAPID_FIXTURES_DIR;

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// What strftime_now sees: FIXED_NOW of the golden scripts, 2026-01-15 10:30:00 (a Thursday).
inline std::tm golden_now() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_hour = 10;
  t.tm_min = 30;
  t.tm_wday = 4;
  t.tm_yday = 14;
  return t;
}

}  // namespace rapid::fixtures
