#include "parsers/harmony_parser.h"

#include <cctype>

#include "parsers/marker_scan.h"
#include "parsers/stream_body.h"
#include "parsers/text_util.h"
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

// The recipient header is complete: the call goes out (index, id, name, arguments "").
void HarmonyParser::open_call(ParseDelta& out) {
  std::string name = recipient_;
  if (name.rfind("functions.", 0) == 0) name = name.substr(10);
  ToolCallDelta d;
  d.index = calls_;
  d.id = ids_.next(IdStyle::OpenAI, name, calls_, "");
  d.name = name;
  out.tool_calls.push_back(std::move(d));
  args_begin_ = std::string::npos;
  args_stream_ = false;
  args_sent_ = 0;
}

// Argument text that starts with '{' or '[' is the model's text as written: release it up to
// its trailing whitespace and any incomplete UTF-8 sequence (marker prefixes never reach
// call_body_). Other text is released whole when the message closes.
void HarmonyParser::call_release(ParseDelta& out) {
  if (args_begin_ == std::string::npos) {
    size_t q = call_body_.find_first_not_of(" \t\r\n");
    if (q == std::string::npos) return;
    args_begin_ = q;
    args_stream_ = call_body_[q] == '{' || call_body_[q] == '[';
  }
  if (!args_stream_) return;
  size_t r = call_body_.size();
  while (r > args_begin_ && std::isspace(static_cast<unsigned char>(call_body_[r - 1]))) --r;
  r = utf8_cut(call_body_, args_begin_, r);  // never split a UTF-8 sequence
  size_t done = args_begin_ + args_sent_;
  if (r <= done) return;
  append_call_args(out, calls_, std::string_view(call_body_).substr(done, r - done));
  args_sent_ = r - args_begin_;
}

void HarmonyParser::close_message(ParseDelta& out) {
  if (sink_ == Sink::Call) {
    // Arguments: the text as written when it starts with '{' or '[' (streamed, valid JSON or
    // not); other text is normalised as before (valid JSON re-serialised, "" -> {}, else raw).
    std::string args = call_body_;
    size_t b = args.find_first_not_of(" \t\r\n");
    args = b == std::string::npos ? "" : args.substr(b, args.find_last_not_of(" \t\r\n") - b + 1);
    if (args_stream_) {
      append_call_args(out, calls_, std::string_view(args).substr(std::min(args_sent_, args.size())));
    } else {
      nlohmann::json v = nesting_ok(args) ? nlohmann::json::parse(args, nullptr, false)
                                          : nlohmann::json(nlohmann::json::value_t::discarded);
      append_call_args(out, calls_, v.is_discarded() ? (args.empty() ? "{}" : args) : arguments_text(v));
    }
    ++calls_;
  }
  call_body_.clear();
  args_begin_ = std::string::npos;
  args_stream_ = false;
  args_sent_ = 0;
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
      else {
        call_body_.append(text);
        call_release(out);
      }
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
      if (state_ != State::Header) {
        if (state_ == State::Message) close_message(out);
        header_.clear();
      }
      open_message();
      if (sink_ == Sink::Call) open_call(out);
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
