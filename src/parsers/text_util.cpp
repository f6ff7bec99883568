#include "parsers/text_util.h"

#include <algorithm>
#include <cctype>

namespace rapid::parsers {

bool is_ws(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

size_t tail_prefix(std::string_view s, size_t from, std::string_view m) {
  if (m.empty() || s.size() <= from) return 0;
  size_t k = std::min(m.size() - 1, s.size() - from);
  for (; k > 0; --k)
    if (s.substr(s.size() - k) == m.substr(0, k)) return k;
  return 0;
}

size_t utf8_cut(std::string_view s, size_t begin, size_t r) {
  size_t i = r, back = 0;
  while (i > begin && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == begin) return r;
  unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (need > 1 && back + 1 < need) return i - 1;
  return r;
}

std::string attr_of(std::string_view tag, std::string_view key) {
  std::string pat = std::string(key) + "=\"";
  size_t p = tag.find(pat);
  if (p == npos) return "";
  p += pat.size();
  size_t e = tag.find('"', p);
  if (e == npos) return "";
  return std::string(tag.substr(p, e - p));
}

std::string kimi_name(const std::string& raw) {
  std::string n = raw;
  if (n.rfind("functions.", 0) == 0) n = n.substr(10);
  size_t colon = n.rfind(':');
  if (colon != npos) n = n.substr(0, colon);
  return n;
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_escape(std::string_view s) {
  std::string q = dump_json(nlohmann::json(std::string(s)));
  return q.substr(1, q.size() - 2);
}

std::string_view MarkerBlanker::feed(std::string_view body, bool final) {
  size_t i = in_;
  while (i < body.size()) {
    size_t len = 0;
    bool wait = false;
    for (auto* list : {a_, b_})
      for (auto& m : *list) {
        if (m.empty() || body[i] != m[0]) continue;
        size_t n = std::min(m.size(), body.size() - i);
        if (body.compare(i, n, m, 0, n) != 0) continue;
        if (n == m.size()) len = std::max(len, n);
        else if (!final) wait = true;
      }
    if (wait) break;
    if (len) {
      out_ += ' ';
      i += len;
    } else {
      out_ += body[i++];
    }
  }
  in_ = i;
  return out_;
}

}  // namespace rapid::parsers
