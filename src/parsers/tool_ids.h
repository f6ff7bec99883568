// Tool-call ids in each format's convention, unique within a response and (being random) across
// responses; a fixed seed makes them reproducible for tests.
#pragma once
#include <cstdint>
#include <random>
#include <set>
#include <string>

#include "parsers/tool_format.h"

namespace rapid::parsers {

class ToolIdMaker {
 public:
  explicit ToolIdMaker(uint64_t seed);
  // `from_text` is an id the model wrote itself (Kimi), used when well-formed and not yet taken.
  std::string next(IdStyle style, const std::string& name, int index, const std::string& from_text);

 private:
  std::string random_alnum(size_t n);
  std::mt19937_64 rng_;
  std::set<std::string> used_;
};

}  // namespace rapid::parsers
