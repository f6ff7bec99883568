#include "server/json_limits.h"

#include <algorithm>
#include <vector>

#include "server/api_error.h"

namespace rapid::server {

namespace {

struct Frame {
  bool array = false;
  size_t index = 0;       // element index in an array
  std::string_view key;   // current key in an object (raw, escapes kept)
};

std::string path_of(const std::vector<Frame>& frames, const std::string& root) {
  constexpr size_t kShown = 8;  // the deep tail is the same bracket repeated: say where it starts
  std::string out = root;
  for (size_t k = 0; k < std::min(frames.size(), kShown); ++k) {
    const Frame& f = frames[k];
    if (f.array) out += "[" + std::to_string(f.index) + "]";
    else if (!f.key.empty() || k > 0 || !root.empty()) out += (out.empty() ? "" : ".") + std::string(f.key);
  }
  return frames.size() >= kShown ? out + "..." : out;
}

}  // namespace

std::optional<std::string> json_too_deep(std::string_view text, int max_depth, const std::string& root) {
  std::vector<Frame> frames;
  std::string_view last_string;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      last_string = text.substr(i + 1, std::min(j, text.size()) - i - 1);
      i = j;
    } else if (c == '{' || c == '[') {
      if (int(frames.size()) >= max_depth) return path_of(frames, root);
      frames.push_back(Frame{c == '[', 0, {}});
    } else if (c == '}' || c == ']') {
      if (!frames.empty()) frames.pop_back();
    } else if (c == ':') {
      if (!frames.empty() && !frames.back().array) frames.back().key = last_string;
    } else if (c == ',') {
      if (!frames.empty() && frames.back().array) ++frames.back().index;
    }
  }
  return std::nullopt;
}

static ApiError too_deep(const std::string& path) {
  return bad_request("'" + path + "' is nested more than " + std::to_string(kMaxJsonDepth) +
                         " levels deep (the limit for JSON in a request)",
                     path, "json_too_deep");
}

nlohmann::ordered_json parse_request_json(const std::string& body) {
  if (body.empty()) throw bad_request("the request body is empty; expected a JSON object");
  // Before parsing: the limit must hold for everything that later walks the value recursively.
  if (auto p = json_too_deep(body, kMaxJsonDepth)) throw too_deep(p->empty() ? "body" : *p);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

std::optional<nlohmann::ordered_json> parse_nested_json(const std::string& text, const std::string& field) {
  if (auto p = json_too_deep(text, kMaxJsonDepth, field)) throw too_deep(*p);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

nlohmann::ordered_json parse_output_json(const std::string& text) {
  if (json_too_deep(text, kMaxJsonDepth)) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(text, nullptr, false);
}

}  // namespace rapid::server
