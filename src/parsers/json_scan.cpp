#include "parsers/json_scan.h"

namespace rapid::parsers {

template <bool Delimited>
size_t BracketScanner::scan(std::string_view s, size_t& i) {
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (quote_) {
      if (esc_) esc_ = false;
      else if (c == '\\') esc_ = true;
      else if (c == quote_) {
        quote_ = 0;
        if (!Delimited && depth_ == 0) return ++i;
      }
      continue;
    }
    if (c == '"' || (python_ && c == '\'')) {
      quote_ = c;
    } else if (c == '{' || c == '[' || (python_ && c == '(')) {
      ++depth_;
    } else if (c == '}' || c == ']' || (python_ && c == ')')) {
      if (Delimited && depth_ == 0) return i;
      if (--depth_ <= 0 && !Delimited) return ++i;
    } else if (Delimited && c == ',' && depth_ == 0) {
      return i;
    }
  }
  return std::string::npos;
}

size_t BracketScanner::to_value_end(std::string_view s, size_t& i) { return scan<false>(s, i); }
size_t BracketScanner::to_delimiter(std::string_view s, size_t& i) { return scan<true>(s, i); }

size_t json_extent(std::string_view s, size_t pos) {
  if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[' && s[pos] != '"')) return std::string::npos;
  BracketScanner scanner;
  return scanner.to_value_end(s, pos);
}

}  // namespace rapid::parsers
