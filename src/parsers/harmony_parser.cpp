#include "parsers/harmony_parser.h"

#include <cctype>

#include "parsers/marker_scan.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

namespace {
const std::vector<std::string> kMarkers = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
                                           "<|end|>",   "<|call|>",    "<|return|>"};
enum { kStart, kChannel, kMessage, kConstrain, kEnd, kCall, kReturn };

// Value of `key` in a header: the token after it, up to whitespace or the next marker.
std::string header_token(const std::string& h, const std::string& key) {
  size_t p = h.find(key);
  if (p == std::string::npos) return "";
  p += key.size();
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  while (e < h.size() && !std::isspace(static_cast<unsigned char>(h[e])) && h.compare(e, 2, "<|") != 0) ++e;
  return h.substr(p, e - p);
}

// Texts a reply may begin with when the prompt already wrote "<|start|>assistant".
const std::vector<std::string> kHeaderOpeners = {" to=", "to=", "assistant"};
}  // namespace

HarmonyParser::HarmonyParser(const ParserOptions& opts) : ids_(opts.id_seed) {}

ParseDelta HarmonyParser::feed(std::string_view text) {
  ParseDelta out;
  buf_.append(text);
  run(false, out);
  return out;
}

ParseDelta HarmonyParser::finish() {
  ParseDelta out;
  run(true, out);
  if (state_ == State::Header) {
    out.content += header_;  // never lose text, even a header that never got its body
    header_.clear();
  } else if (state_ == State::Message) {
    close_message(out);
  }
  state_ = State::Text;
  return out;
}

void HarmonyParser::run(bool final, ParseDelta& out) {
  while (step(final, out)) {
  }
}

void HarmonyParser::open_message() {
  std::string channel = header_token(header_, "<|channel|>");
  recipient_ = header_token(header_, "to=");
  if (!recipient_.empty()) sink_ = Sink::Call;
  else if (channel == "analysis") sink_ = Sink::Reasoning;
  else sink_ = Sink::Content;
  call_body_.clear();
  header_.clear();
  state_ = State::Message;
}

void HarmonyParser::close_message(ParseDelta& out) {
  if (sink_ == Sink::Call) {
    std::string name = recipient_;
    if (name.rfind("functions.", 0) == 0) name = name.substr(10);
    std::string args = call_body_;
    size_t b = args.find_first_not_of(" \t\r\n");
    args = b == std::string::npos ? "" : args.substr(b, args.find_last_not_of(" \t\r\n") - b + 1);
    nlohmann::json v = nesting_ok(args) ? nlohmann::json::parse(args, nullptr, false) : nlohmann::json(nlohmann::json::value_t::discarded);
    ToolCallDelta d;
    d.index = calls_;
    d.id = ids_.next(IdStyle::OpenAI, name, calls_, "");
    d.name = name;
    d.arguments = v.is_discarded() ? (args.empty() ? "{}" : args) : arguments_text(v);
    out.tool_calls.push_back(std::move(d));
    ++calls_;
  }
  call_body_.clear();
  sink_ = Sink::Content;
  state_ = State::Text;
}

bool HarmonyParser::step(bool final, ParseDelta& out) {
  if (buf_.empty()) return false;
  if (state_ == State::Start) {
    // A reply that starts with a header fragment (" to=functions.x<|channel|>...") is a header.
    for (auto& o : kHeaderOpeners) {
      if (buf_.compare(0, o.size(), o) == 0) {
        state_ = State::Header;
        return true;
      }
      if (!final && buf_.size() < o.size() && o.compare(0, buf_.size(), buf_) == 0) return false;
    }
    state_ = State::Text;
    return true;
  }
  MarkerHit hit = scan_markers(buf_, kMarkers, final);
  size_t n = hit.which < 0 ? hit.safe_len : hit.pos;
  std::string_view text(buf_.data(), n);
  switch (state_) {
    case State::Header: header_.append(text); break;
    case State::Message:
      if (sink_ == Sink::Reasoning) out.reasoning.append(text);
      else if (sink_ == Sink::Content) out.content.append(text);
      else call_body_.append(text);
      break;
    default: out.content.append(text); break;
  }
  if (hit.which < 0) {
    buf_.erase(0, n);
    return false;
  }
  const std::string& m = kMarkers[hit.which];
  buf_.erase(0, n + m.size());
  switch (hit.which) {
    case kStart:
    case kChannel:
    case kConstrain:
      if (state_ == State::Message) close_message(out);  // a new header without <|end|>
      if (state_ != State::Header) header_.clear();
      state_ = State::Header;
      header_ += m;
      break;
    case kMessage:
      if (state_ == State::Header) open_message();
      else {
        if (state_ == State::Message) close_message(out);
        header_.clear();
        open_message();
      }
      break;
    default:  // <|end|> <|call|> <|return|>
      if (state_ == State::Message) close_message(out);
      else if (state_ == State::Header) {
        out.content += header_;
        header_.clear();
      }
      state_ = State::Text;
      break;
  }
  return true;
}

}  // namespace rapid::parsers
