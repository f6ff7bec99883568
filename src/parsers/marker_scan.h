// Finding protocol markers in streamed text without ever releasing a byte that might still turn out
// to be the start of a marker: the one primitive every format's parser is built on.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace rapid::parsers {

struct MarkerHit {
  int which = -1;       // index into the marker list, -1 = no decisive match
  size_t pos = 0;       // where the match starts
  size_t safe_len = 0;  // when which < 0: bytes that can be released as plain text now
};

// Earliest complete marker in `buf` (longest one on a tie). The match is only decisive once no
// longer/earlier marker could still complete with more input; until then the caller waits.
// With `final` nothing more will come, so partial prefixes are plain text.
MarkerHit scan_markers(std::string_view buf, const std::vector<std::string>& markers, bool final);

// Length of the longest suffix of `buf` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view buf, std::string_view marker);

}  // namespace rapid::parsers
