#include "hub/model_ref.h"

#include <algorithm>

namespace rapid::hub {
namespace {
// The hub's repo-name rule: letters, digits, '-', '_', '.'; no leading/trailing '-' or '.', no "..".
bool valid_part(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  if (s.find("..") != std::string_view::npos || s.find("--") != std::string_view::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
}

bool valid_revision(std::string_view s) {
  // Branch and tag names may hold '/', never ".." or a control character.
  if (s.empty() || s.size() > 255 || s.find("..") != std::string_view::npos || s.front() == '/') return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) > 0x20 && c != ':' && c != '\\'; });
}
}  // namespace

bool is_commit_hash(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string ModelRef::str() const {
  std::string s = repo;
  if (revision != "main") s += "@" + revision;
  if (!quant.empty()) s += ":" + quant;
  return s;
}

std::optional<ModelRef> parse_model_ref(std::string_view spec) {
  ModelRef r;
  if (size_t colon = spec.rfind(':'); colon != std::string_view::npos) {
    r.quant = std::string(spec.substr(colon + 1));
    spec = spec.substr(0, colon);
    if (r.quant.empty() || !valid_part(r.quant)) return std::nullopt;
  }
  if (size_t at = spec.find('@'); at != std::string_view::npos) {
    r.revision = std::string(spec.substr(at + 1));
    spec = spec.substr(0, at);
    if (!valid_revision(r.revision)) return std::nullopt;
  }
  size_t slash = spec.find('/');
  if (slash == std::string_view::npos || spec.find('/', slash + 1) != std::string_view::npos) return std::nullopt;
  if (!valid_part(spec.substr(0, slash)) || !valid_part(spec.substr(slash + 1))) return std::nullopt;
  r.repo = std::string(spec);
  return r;
}

}  // namespace rapid::hub
