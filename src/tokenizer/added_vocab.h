// Added tokens (special or not): found in text before normalization (normalized=false) or
// after it (normalized=true) by leftmost-longest matching, with lstrip/rstrip/single_word.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// One segment of text: either plain text or an added token id.
struct Segment {
  size_t begin = 0, end = 0;
  int32_t id = -1;
};

class AddedMatcher {
 public:
  // patterns[i] is matched as-is; tokens[i] gives its flags.
  void add(const std::string& pattern, const AddedToken& tok);
  bool empty() const { return toks_.empty(); }
  // Splits s into text/token segments (text segments may be empty-free; never overlapping).
  std::vector<Segment> split(std::string_view s, bool parse_special) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> kids;
    int32_t tok = -1;  // index into toks_ when a pattern ends here
  };
  int32_t child(int32_t n, unsigned char c) const;
  std::vector<Node> nodes_{Node{}};
  std::vector<AddedToken> toks_;
  bool first_[256] = {};
};

}  // namespace rapid::tok
