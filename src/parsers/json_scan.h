// Where does a JSON value end? Bracket / string / escape tracking, resumable across chunks: the
// one scanner behind json_extent (whole blocks), the streamed JSON calls and Mistral arguments,
// and (in Python mode) the extent of a streamed Python keyword value.
#pragma once
#include <string>
#include <string_view>

namespace rapid::parsers {

class BracketScanner {
 public:
  // `python`: '...' strings and ( ) brackets too. `depth`: brackets already open (e.g. 1 to
  // scan the rest of an object from inside it).
  BracketScanner() = default;
  explicit BracketScanner(bool python, int depth = 0) : python_(python), depth_(depth) {}

  // Scans on from `i` (left where the scan stopped). Returns one past the byte that ends the
  // value: the bracket that closes the outermost one, or, for a string at depth 0, its closing
  // quote; npos when s ends first (i = s.size(): resume there with more text).
  size_t to_value_end(std::string_view s, size_t& i);
  // Same scan, stopping at the first ',' or unmatched closing bracket outside strings and
  // brackets (returns its position): the end of one item of a list or call.
  size_t to_delimiter(std::string_view s, size_t& i);

 private:
  template <bool Delimited>
  size_t scan(std::string_view s, size_t& i);
  bool python_ = false;
  int depth_ = 0;
  char quote_ = 0;  // the open string's quote; 0 = outside strings
  bool esc_ = false;
};

// End (exclusive) of the JSON object/array/string starting at `pos`, or npos when unbalanced.
size_t json_extent(std::string_view s, size_t pos);

}  // namespace rapid::parsers
