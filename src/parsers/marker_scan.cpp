#include "parsers/marker_scan.h"

#include <algorithm>

namespace rapid::parsers {

size_t partial_suffix(std::string_view buf, std::string_view marker) {
  size_t max = std::min(buf.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n)
    if (buf.substr(buf.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

MarkerHit scan_markers(std::string_view buf, const std::vector<std::string>& markers, bool final) {
  MarkerHit hit;
  // First bytes of all markers: most positions are rejected by one table lookup.
  bool first[256] = {};
  for (auto& m : markers)
    if (!m.empty()) first[static_cast<unsigned char>(m[0])] = true;
  for (size_t p = 0; p < buf.size(); ++p) {
    if (!first[static_cast<unsigned char>(buf[p])]) continue;
    std::string_view rest = buf.substr(p);
    int best = -1;
    bool partial = false;  // a marker starting here could still complete
    for (size_t i = 0; i < markers.size(); ++i) {
      const std::string& m = markers[i];
      if (m.empty()) continue;
      if (rest.size() >= m.size()) {
        if (rest.compare(0, m.size(), m) == 0 &&
            (best < 0 || m.size() > markers[best].size()))
          best = static_cast<int>(i);
      } else if (!final && m.compare(0, rest.size(), rest) == 0) {
        partial = true;
      }
    }
    if (partial) {
      // Something here may still grow into a (longer) marker: release only what precedes it.
      hit.which = -1;
      hit.safe_len = p;
      return hit;
    }
    if (best >= 0) {
      hit.which = best;
      hit.pos = p;
      return hit;
    }
  }
  hit.safe_len = buf.size();
  return hit;
}

}  // namespace rapid::parsers
