#include "parsers/stream_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "common/utf8.h"
#include "parsers/json_scan.h"
#include "parsers/marker_scan.h"
#include "parsers/text_util.h"
#include "parsers/value_parsers.h"

namespace rapid::parsers {

namespace {
bool streams_args(const ToolFormat* f) {
  if (!f) return false;
  return f->body == Body::NameSepJson || f->body == Body::DeepseekV3 || f->body == Body::MistralAny ||
         f->body == Body::JsonCalls || f->body == Body::XmlFunction || f->body == Body::GlmArgs ||
         f->body == Body::XmlInvoke || f->body == Body::Pythonic || f->body == Body::PythonicLines;
}

// Matches the head of a JSON call object at s[p] == '{' up to its arguments object:
// {"name": "NAME", "arguments"|"parameters"|"args": {
// 1 = matched (name, args_at = the arguments' '{'), 0 = the text so far fits but is incomplete,
// -1 = another shape (key order, "function" wrapper, escaped name...): not streamed.
int json_call_head(std::string_view s, size_t p, std::string& name, size_t& args_at) {
  size_t i = p + 1;
  auto ws = [&] {
    while (i < s.size() && is_ws(s[i])) ++i;
    return i < s.size();
  };
  auto lit = [&](std::string_view l) {
    size_t n = std::min(l.size(), s.size() - i);
    if (s.substr(i, n) != l.substr(0, n)) return -1;
    if (n < l.size()) return 0;
    i += n;
    return 1;
  };
  int r;
  if (!ws()) return 0;
  if ((r = lit("\"name\"")) <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit(":")) <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit("\"")) <= 0) return r;
  size_t ns = i;
  for (; i < s.size() && s[i] != '"'; ++i)
    if (s[i] == '\\' || static_cast<unsigned char>(s[i]) < 0x20 || i - ns > 256) return -1;
  if (i >= s.size()) return 0;
  if (i == ns) return -1;
  name.assign(s.substr(ns, i - ns));
  ++i;
  if (!ws()) return 0;
  if ((r = lit(",")) <= 0) return r;
  if (!ws()) return 0;
  size_t k = i;
  for (std::string_view key : {"\"arguments\"", "\"parameters\"", "\"args\""}) {
    i = k;
    if ((r = lit(key)) >= 0) break;
  }
  if (r <= 0) return r;
  if (!ws()) return 0;
  if ((r = lit(":")) <= 0) return r;
  if (!ws()) return 0;
  if (s[i] != '{') return -1;
  args_at = i;
  return 1;
}

const std::string kToolCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";
}  // namespace

StreamParser::StreamParser(const ToolFormat* tool, const ReasoningFormat* reasoning, const ParserOptions& opts)
    : tool_(tool), reasoning_(reasoning), tools_(opts.tools), ids_(opts.id_seed) {
  rebuild_markers();
  stream_args_ = streams_args(tool_);
  if (reasoning_ && (opts.starts_in_reasoning || reasoning_->starts_inside)) state_ = State::Reasoning;
  if (tool_ && !tool_->implicit_prefix.empty()) {
    buf_ = tool_->implicit_prefix;
    implicit_start_ = true;
  }
}

void StreamParser::rebuild_markers() {
  auto add = [](std::vector<std::string>& m, std::vector<Act>& a, const std::vector<std::string>& src, Act act) {
    for (auto& s : src) {
      m.push_back(s);
      a.push_back(act);
    }
  };
  if (reasoning_) {
    add(content_markers_, content_acts_, reasoning_->starts, Act::Reason);
    add(content_markers_, content_acts_, reasoning_->strip, Act::Strip);
    add(reasoning_markers_, reasoning_acts_, reasoning_->ends, Act::EndReason);
    add(reasoning_markers_, reasoning_acts_, reasoning_->starts, Act::Strip);  // a repeated opener is markup
  }
  if (tool_) {
    add(content_markers_, content_acts_, tool_->starts, Act::Call);
    add(content_markers_, content_acts_, tool_->strip, Act::Strip);
  }
}

ParseDelta StreamParser::feed(std::string_view text) {
  ParseDelta out;
  buf_.append(text);
  run(false, out);
  return out;
}

ParseDelta StreamParser::finish() {
  ParseDelta out;
  run(true, out);
  // Whitespace after the last call is layout; anywhere else it is content.
  if (calls_ == 0) flush_ws(out);
  pending_ws_.clear();
  return out;
}

void StreamParser::run(bool final, ParseDelta& out) {
  for (;;) {
    bool progressed = state_ == State::Call ? step_call(final, out) : step_text(final, out);
    if (!progressed) return;
  }
}

void StreamParser::flush_ws(ParseDelta& out) {
  if (after_call_ && !content_emitted_) {
    pending_ws_.clear();  // layout between a call and the first text after it
    return;
  }
  if (pending_ws_.empty()) return;
  out.content += pending_ws_;
  pending_ws_.clear();
  content_emitted_ = true;
}

// Trailing whitespace waits: after a call it is layout (dropped when another call or the end
// follows), elsewhere it is released with the next text.
void StreamParser::emit_content(std::string_view s, ParseDelta& out) {
  size_t e = s.size();
  while (e > 0 && is_ws(s[e - 1])) --e;
  if (e > 0) {
    if (after_call_ && !content_emitted_) {
      // Leading whitespace right after a call is layout too (unless it separates words).
      size_t b = 0;
      while (b < e && is_ws(s[b])) ++b;
      s.remove_prefix(b);
      e -= b;
    }
    flush_ws(out);
    after_call_ = false;
    out.content.append(s.substr(0, e));
    content_emitted_ = true;
  }
  pending_ws_.append(s.substr(e));
}

bool StreamParser::step_text(bool final, ParseDelta& out) {
  if (buf_.empty()) return false;
  const bool reasoning = state_ == State::Reasoning;
  const auto& markers = reasoning ? reasoning_markers_ : content_markers_;
  const auto& acts = reasoning ? reasoning_acts_ : content_acts_;

  // Formats whose call is the whole reply ("{...}", "[f()]") are recognised only before any content.
  if (!reasoning && tool_ && !tool_->leading.empty() && !content_emitted_ && calls_ == 0) {
    size_t p = 0;
    while (p < buf_.size() && is_ws(buf_[p])) ++p;
    if (p > 0) {
      pending_ws_.append(buf_, 0, p);
      buf_.erase(0, p);
    }
    if (buf_.empty()) return false;
    MarkerHit at0 = scan_markers(buf_, markers, final);
    bool marker_here = (at0.which >= 0 && at0.pos == 0) || (at0.which < 0 && at0.safe_len == 0);
    if (!marker_here) {
      for (auto& l : tool_->leading) {
        if (buf_.compare(0, l.size(), l) == 0) {
          state_ = State::Call;
          block_start_.clear();
          scanned_ = 0;
          return true;
        }
        if (!final && buf_.size() < l.size() && l.compare(0, buf_.size(), buf_) == 0) return false;
      }
    }
  }

  MarkerHit hit = scan_markers(buf_, markers, final);
  if (hit.which < 0) {
    size_t n = hit.safe_len;
    if (n == 0) return false;
    if (reasoning) out.reasoning.append(buf_, 0, n);
    else emit_content(std::string_view(buf_).substr(0, n), out);
    buf_.erase(0, n);
    return false;
  }
  if (hit.pos > 0) {
    if (reasoning) out.reasoning.append(buf_, 0, hit.pos);
    else emit_content(std::string_view(buf_).substr(0, hit.pos), out);
  }
  const std::string& m = markers[hit.which];
  bool implicit = implicit_start_ && hit.pos == 0;
  implicit_start_ = false;
  switch (acts[hit.which]) {
    case Act::Reason:
      flush_ws(out);
      after_call_ = false;
      state_ = State::Reasoning;
      break;
    case Act::EndReason: state_ = State::Content; break;
    case Act::Strip: break;
    case Act::Call:
      // Text before the first call is content verbatim; whitespace between calls is layout.
      // Whitespace alone before a call is layout too.
      if (calls_ == 0 && content_emitted_) flush_ws(out);
      else pending_ws_.clear();
      state_ = State::Call;
      block_start_ = implicit ? "" : m;
      scanned_ = 0;
      break;
  }
  buf_.erase(0, hit.pos + m.size());
  return true;
}

bool StreamParser::step_call(bool final, ParseDelta& out) {
  const std::string& end = tool_->end;
  if (!end.empty()) {
    size_t from = scanned_ >= end.size() ? scanned_ - end.size() + 1 : 0;
    size_t p = buf_.find(end, from);
    if (p != std::string::npos) {
      std::string body = buf_.substr(0, p);
      buf_.erase(0, tool_->end_is_lookahead ? p : p + end.size());
      state_ = State::Content;
      if (tool_->end_is_lookahead) implicit_start_ = false;
      finish_call(body, true, out);
      return true;
    }
    scanned_ = buf_.size();
  }
  if (!final) {
    if (stream_args_ && !as_.off && !as_.stop) {
      // Bytes that may still be the block's end marker are not body yet.
      size_t hold = tail_prefix(buf_, 0, end);
      args_advance(std::string_view(buf_).substr(0, buf_.size() - hold), false, out);
    }
    return false;
  }
  std::string body = std::move(buf_);
  buf_.clear();
  state_ = State::Content;
  finish_call(body, end.empty() || tool_->end_is_lookahead, out);
  return !buf_.empty();
}

void StreamParser::finish_call(const std::string& body, bool terminated, ParseDelta& out) {
  if (stream_args_ && !as_.off) {
    args_advance(body, true, out);
    if (as_.committed > 0) {
      // Calls went out while the block was open: they stand, whatever follows them.
      pending_ws_.clear();
      after_call_ = true;
      if (as_.stop) {
        // End-less JSON formats read the blanked body (as parse_body does).
        const std::string& src = tool_->body == Body::JsonCalls && tool_->end.empty() ? as_.jb : body;
        std::string raw = src.substr(std::min(as_.stop_at, src.size()));
        if (terminated && !tool_->end.empty() && !tool_->end_is_lookahead) raw += tool_->end;
        emit_content(raw, out);
      }
      as_ = ArgState{};
      return;
    }
  }
  as_ = ArgState{};
  std::optional<std::vector<Call>> calls;
  std::string trailing;
  if (terminated || !tool_->require_end) calls = parse_body(*tool_, body, tools_, &trailing);
  if (!calls) {
    // Not a call after all: the model's text comes back verbatim.
    std::string raw = block_start_ + body;
    if (terminated && !tool_->end.empty() && !tool_->end_is_lookahead) raw += tool_->end;
    emit_content(raw, out);
    return;
  }
  pending_ws_.clear();
  for (auto& c : *calls) {
    ToolCallDelta d;
    d.index = calls_;
    d.id = ids_.next(tool_->ids, c.name, calls_, c.id);
    d.name = c.name;
    d.arguments = c.arguments;
    out.tool_calls.push_back(std::move(d));
    ++calls_;
  }
  after_call_ = true;
  if (!trailing.empty()) emit_content(trailing, out);
}

// ---- Incremental arguments ----
// A call goes out (index, id, name) as soon as its name is certain; its argument text follows in
// fragments when it starts with '{' or '[' (then the final arguments are that text as written, so
// every released byte is final). Held back: bytes that may still be a marker, trailing whitespace
// and backticks (a closing fence), an incomplete UTF-8 sequence.

// A call whose arguments are built as a JSON object from named parameters (XML/invoke formats):
// the name goes out with "{", parameters follow from `pos`.
void StreamParser::open_object_call(const std::string& name, size_t pos, ParseDelta& out) {
  args_commit(name, "", pos, out);
  as_.name = name;
  as_.pos = pos;
  as_.x_first = true;
  as_.x_value = false;
  args_append("{", out);
}

void StreamParser::args_commit(const std::string& name, const std::string& id, size_t args_from, ParseDelta& out) {
  int index = calls_++;
  ToolCallDelta d;
  d.index = index;
  d.id = ids_.next(tool_->ids, name, index, id);
  d.name = name;
  out.tool_calls.push_back(std::move(d));
  as_.in_call = true;
  as_.index = index;
  as_.args_from = args_from;
  as_.begin = npos;
  as_.streamable = false;
  as_.sent = 0;
  as_.scan = args_from;
  as_.tc_scan = 0;
  as_.brackets = BracketScanner();
  ++as_.committed;
}

void StreamParser::args_invalid(size_t at) {
  if (as_.committed == 0) {
    as_.off = true;
  } else {
    as_.stop = true;
    as_.stop_at = at;
  }
}

// The call's arguments are complete: release what was not released yet.
void StreamParser::args_close(const std::string& text, ParseDelta& out) {
  if (as_.sent < text.size()) {
    std::string rest = text.substr(as_.sent);
    if (!out.tool_calls.empty() && out.tool_calls.back().index == as_.index) {
      out.tool_calls.back().arguments += rest;
    } else {
      ToolCallDelta d;
      d.index = as_.index;
      d.arguments = std::move(rest);
      out.tool_calls.push_back(std::move(d));
    }
  }
  as_.in_call = false;
}

// Releases argument text of the open call up to `lim` (exclusive), minus what may still change.
void StreamParser::args_release(std::string_view body, size_t lim, ParseDelta& out) {
  if (as_.begin == npos) {
    size_t q = as_.args_from;
    while (q < lim && is_ws(body[q])) ++q;
    if (q >= lim) return;
    if (body[q] == '`') {
      // A ```json fence line is dropped (args_after_name): wait for its end.
      if (lim - q < 3) return;
      if (body.compare(q, 3, "```") == 0) {
        size_t nl = body.find('\n', q);
        if (nl == npos || nl >= lim) return;
        q = nl + 1;
        while (q < lim && is_ws(body[q])) ++q;
        if (q >= lim) return;
      }
    }
    as_.begin = q;
    as_.streamable = body[q] == '{' || body[q] == '[';
    as_.scan = std::max(as_.scan, q);
  }
  if (!as_.streamable) return;
  size_t r = lim;
  while (r > as_.begin && (is_ws(body[r - 1]) || body[r - 1] == '`')) --r;
  r = utf8_cut(body, as_.begin, r);
  size_t done = as_.begin + as_.sent;
  if (r <= done) return;
  if (!out.tool_calls.empty() && out.tool_calls.back().index == as_.index) {
    out.tool_calls.back().arguments.append(body.substr(done, r - done));
  } else {
    ToolCallDelta d;
    d.index = as_.index;
    d.arguments = std::string(body.substr(done, r - done));
    out.tool_calls.push_back(std::move(d));
  }
  as_.sent = r - as_.begin;
}

// Section formats (DeepSeek, Kimi K2) and single-call blocks (Functionary v3.1): finds the next
// call's name. False = wait for more text (or nothing left).
bool StreamParser::args_header(std::string_view body, bool final, ParseDelta& out) {
  const ToolFormat& f = *tool_;
  const bool sections = !f.inner_start.empty();
  size_t open = as_.pos, ps = as_.pos;
  if (sections) {
    open = body.find(f.inner_start, as_.pos);
    if (open == npos) return false;  // text between calls is ignored, as parse_body does
    ps = open + f.inner_start.size();
  } else if (as_.committed > 0) {
    return false;  // one call per block
  }
  size_t pend = npos;
  if (sections) pend = std::min(body.find(f.inner_end, ps), body.find(f.inner_start, ps));
  const bool piece_done = pend != npos || final;
  const size_t lim = pend == npos ? body.size() : pend;
  std::string_view piece = body.substr(0, lim);
  size_t sep = piece.find(f.sep, ps);
  if (sep == npos) {
    if (!piece_done) return false;
    args_invalid(open);
    return false;
  }
  std::string name, id;
  size_t args_from;
  if (f.body == Body::DeepseekV3) {
    size_t rs = sep + f.sep.size();
    size_t nl = piece.find('\n', rs);
    if (nl == npos && !piece_done) return false;
    name = trim(piece.substr(rs, (nl == npos ? lim : nl) - rs));
    if (name.empty()) {
      args_invalid(open);
      return false;
    }
    args_from = nl == npos ? lim : nl + 1;
  } else {
    std::string raw = trim(piece.substr(ps, sep - ps));
    if (raw.empty() || raw.find_first_of("{}\n\"") != std::string::npos) {
      args_invalid(open);
      return false;
    }
    name = raw;
    if (f.ids == IdStyle::Kimi) {
      id = raw;
      if (name.rfind("functions.", 0) == 0) name = name.substr(10);
      size_t colon = name.rfind(':');
      if (colon != std::string::npos) name = name.substr(0, colon);
    }
    args_from = sep + f.sep.size();
  }
  args_commit(name, id, args_from, out);
  return true;
}

// Mistral v11: [TOOL_CALLS]* name [CALL_ID]id? [ARGS] ...
bool StreamParser::mistral_header(std::string_view body, bool final, ParseDelta& out) {
  if (!as_.started) {
    size_t q = 0;
    while (q < body.size() && is_ws(body[q])) ++q;
    if (q >= body.size()) return false;
    as_.started = true;
    if (body[q] == '[' || body[q] == '{') {
      as_.off = true;  // pre-v11 JSON list (or markup): whole-block parse
      return false;
    }
    as_.pos = q;
    as_.scan = q;
  }
  size_t p = as_.pos;
  for (;;) {
    while (p < body.size() && is_ws(body[p])) ++p;
    if (body.compare(p, kToolCalls.size(), kToolCalls) != 0 || p + kToolCalls.size() > body.size()) break;
    p += kToolCalls.size();
  }
  if (p >= body.size()) return false;
  size_t from = std::max(p, as_.scan >= kArgs.size() ? as_.scan - kArgs.size() + 1 : size_t(0));
  size_t a = body.find(kArgs, from);
  if (a == npos) {
    as_.scan = std::max(as_.scan, body.size());
    if (final) args_invalid(as_.pos);
    return false;
  }
  std::string_view head = body.substr(p, a - p);
  size_t c = head.find(kCallId);
  std::string name = trim(c == npos ? head : head.substr(0, c));
  if (name.empty() || name.find_first_of("{}[]\" \n") != std::string::npos) {
    args_invalid(as_.pos);
    return false;
  }
  args_commit(name, "", a + kArgs.size(), out);
  return true;
}

bool StreamParser::mistral_args(std::string_view body, bool final, ParseDelta& out) {
  if (as_.begin == npos) {
    size_t q = as_.args_from;
    while (q < body.size() && is_ws(body[q])) ++q;
    if (q >= body.size()) {
      if (!final) return false;
      args_close("", out);
      as_.pos = as_.scan = body.size();
      return true;
    }
    as_.begin = q;
    as_.streamable = body[q] == '{' || body[q] == '[';
    as_.scan = q;
  }
  const size_t b = as_.begin;
  if (as_.streamable) {
    size_t i = as_.scan;
    size_t end = as_.brackets.to_value_end(body, i);
    as_.scan = end == npos ? body.size() : end;
    if (end != npos) {
      args_close(args_after_name(body.substr(b, end - b)), out);
      as_.pos = as_.scan = end;
      return true;
    }
  }
  // Not (yet) balanced JSON: the raw text up to the next [TOOL_CALLS] is the arguments.
  size_t tc_from = std::max(b, as_.tc_scan >= kToolCalls.size() ? as_.tc_scan - kToolCalls.size() + 1 : size_t(0));
  size_t next = body.find(kToolCalls, tc_from);
  if (next == npos) as_.tc_scan = body.size();
  if (final || (!as_.streamable && next != npos)) {
    args_close(trim(body.substr(b, next == npos ? npos : next - b)), out);
    as_.pos = as_.scan = next == npos ? body.size() : next;
    return true;
  }
  if (!as_.streamable) return false;
  args_release(body, next != npos ? next : body.size() - tail_prefix(body, b, kToolCalls), out);
  return false;
}

void StreamParser::args_advance(std::string_view body, bool final, ParseDelta& out) {
  const ToolFormat& f = *tool_;
  if (f.body == Body::JsonCalls) {
    json_advance(json_view(body, final), final, out);
    return;
  }
  if (f.body == Body::XmlFunction) {
    xml_advance(body, final, out);
    return;
  }
  if (f.body == Body::GlmArgs || f.body == Body::XmlInvoke) {
    tag_advance(body, final, out);
    return;
  }
  if (f.body == Body::Pythonic || f.body == Body::PythonicLines) {
    py_advance(body, final, out);
    return;
  }
  const bool mistral = f.body == Body::MistralAny;
  const bool sections = !f.inner_start.empty();
  while (!as_.off && !as_.stop) {
    if (!as_.in_call) {
      if (!(mistral ? mistral_header(body, final, out) : args_header(body, final, out))) return;
      continue;
    }
    if (mistral) {
      if (!mistral_args(body, final, out)) return;
      continue;
    }
    size_t pend = npos;
    bool at_end_marker = false;
    if (sections) {
      size_t l = std::max(f.inner_end.size(), f.inner_start.size());
      size_t from = std::max(as_.args_from, as_.scan >= l ? as_.scan - l + 1 : size_t(0));
      size_t e = body.find(f.inner_end, from), n = body.find(f.inner_start, from);
      pend = std::min(e, n);
      at_end_marker = pend != npos && pend == e;
      as_.scan = std::max(as_.scan, body.size());
    }
    if (pend != npos || final) {
      size_t re = pend == npos ? body.size() : pend;
      args_close(args_after_name(body.substr(as_.args_from, re - as_.args_from)), out);
      as_.pos = pend == npos ? body.size() : (at_end_marker ? pend + f.inner_end.size() : pend);
      continue;
    }
    size_t lim = body.size();
    if (sections)
      lim -= std::max(tail_prefix(body, as_.args_from, f.inner_end), tail_prefix(body, as_.args_from, f.inner_start));
    args_release(body, lim, out);
    return;
  }
}

// ---- JSON-call bodies (hermes and the other Body::JsonCalls formats) ----
// The name sits inside the JSON, so a call goes out once the text has shown
// {"name": "NAME", "arguments": {  (or "parameters"/"args"); its arguments are then the model's
// object as written, up to the brace that balances it, and stream like the formats above. The
// outer object's closing brace is never part of them. Other shapes (key order, "function"
// wrapper) keep whole delivery: the first one in a block sends the block down the whole-block
// parse; after a streamed call, each such object is parsed whole on its own.

// Formats without an end marker blank their wrapper markers inside the block (blank_markers in
// body_parsers.cpp); the same is done here incrementally, waiting on a possible marker prefix.
std::string_view StreamParser::json_view(std::string_view body, bool final) {
  if (!tool_->end.empty()) return body;
  size_t i = as_.jb_in;
  while (i < body.size()) {
    size_t len = 0;
    bool wait = false;
    for (auto* list : {&tool_->starts, &tool_->strip})
      for (auto& m : *list) {
        if (m.empty() || body[i] != m[0]) continue;
        size_t n = std::min(m.size(), body.size() - i);
        if (body.compare(i, n, m, 0, n) != 0) continue;
        if (n == m.size()) len = std::max(len, n);
        else if (!final) wait = true;
      }
    if (wait) break;
    if (len) {
      as_.jb += ' ';
      i += len;
    } else {
      as_.jb += body[i++];
    }
  }
  as_.jb_in = i;
  return as_.jb;
}

// Resumable bracket scan from as_.scan (depth / string state in as_): end of the value, or npos.
size_t StreamParser::json_scan(std::string_view body) {
  size_t end = as_.brackets.to_value_end(body, as_.scan);
  return end;
}

void StreamParser::json_advance(std::string_view body, bool final, ParseDelta& out) {
  while (!as_.off && !as_.stop) {
    bool progressed = as_.in_call ? json_args(body, final, out)
                      : as_.tail  ? json_tail(body, final, out)
                                  : json_next(body, final, out);
    if (!progressed) return;
  }
}

// Looks for the next call object (separators, a ```json fence line and one level of [...] are
// layout, as json_calls reads them).
bool StreamParser::json_next(std::string_view body, bool final, ParseDelta& out) {
  size_t p = as_.pos;
  if (!as_.whole) {
    for (;;) {
      while (p < body.size() && (is_ws(body[p]) || body[p] == ',' || body[p] == ';')) ++p;
      as_.pos = p;
      if (p >= body.size()) return false;
      if (body[p] == '`') {
        if (body.size() - p < 3 && !final) return false;
        if (body.compare(p, 3, "```") != 0) break;
        size_t nl = body.find('\n', p);
        if (nl == npos && !final) return false;
        p = nl == npos ? body.size() : nl + 1;
        continue;
      }
      if (body[p] == '[' && !as_.list) {
        as_.list = true;
        ++p;
        continue;
      }
      if (body[p] == ']' && as_.list) {
        as_.list = false;
        as_.gap = ++p;  // the list's bracket is markup
        continue;
      }
      break;
    }
    if (body[p] == '{') {
      std::string name;
      size_t args_at = 0;
      int m = json_call_head(body, p, name, args_at);
      if (m == 0 && !final) return false;
      if (m == 1) {
        args_commit(name, "", args_at, out);
        as_.begin = as_.scan = args_at;
        as_.streamable = true;
        return true;
      }
    }
    // Not the streamable shape: before any call went out the whole-block parse decides. After
    // one, text that is no call comes back as content from the end of that call on (separators
    // included, as json_calls hands back its trailing text).
    if (as_.committed == 0 || (body[p] != '{' && body[p] != '[')) {
      args_invalid(as_.committed ? as_.gap : p);
      return false;
    }
    as_.whole = true;
    as_.scan = p;
    as_.brackets = BracketScanner();
  }
  size_t end = json_scan(body);
  if (end == npos) {
    if (final) args_invalid(p);
    return false;
  }
  as_.whole = false;
  auto calls = parse_body(*tool_, std::string(body.substr(p, end - p)), tools_);
  if (!calls) {
    args_invalid(p);
    return false;
  }
  for (auto& c : *calls) {
    ToolCallDelta d;
    d.index = calls_;
    d.id = ids_.next(tool_->ids, c.name, calls_, c.id);
    d.name = c.name;
    d.arguments = c.arguments;
    out.tool_calls.push_back(std::move(d));
    ++calls_;
    ++as_.committed;
  }
  as_.pos = as_.gap = end;
  return true;
}

bool StreamParser::json_args(std::string_view body, bool final, ParseDelta& out) {
  size_t end = json_scan(body);
  if (end != npos) {
    args_close(std::string(body.substr(as_.begin, end - as_.begin)), out);
    as_.tail = true;
    as_.pos = end;
    return true;
  }
  if (final) {  // never balanced: the raw text stands (the call already went out)
    args_close(args_after_name(body.substr(as_.begin)), out);
    as_.pos = as_.gap = body.size();
    return true;
  }
  args_release(body, body.size(), out);
  return false;
}

// After the arguments: the call object's closing brace, or more keys up to it.
bool StreamParser::json_tail(std::string_view body, bool final, ParseDelta& out) {
  (void)out;
  if (!as_.tail_more) {
    size_t p = as_.pos;
    while (p < body.size() && is_ws(body[p])) ++p;
    as_.pos = p;
    if (p >= body.size()) {
      if (final) {
        as_.tail = false;
        as_.gap = p;
      }
      return final;
    }
    if (body[p] == '}') {
      as_.tail = false;
      as_.pos = as_.gap = p + 1;
      return true;
    }
    if (body[p] != ',') {
      as_.tail = false;
      args_invalid(p);
      return false;
    }
    as_.tail_more = true;
    as_.tail_at = p;
    as_.scan = p;
    as_.brackets = BracketScanner(false, 1);
  }
  size_t end = json_scan(body);
  if (end == npos) {
    if (final) {
      as_.tail = as_.tail_more = false;
      args_invalid(as_.tail_at);
    }
    return false;
  }
  as_.tail = as_.tail_more = false;
  as_.pos = as_.gap = end;
  return true;
}

// ---- XML function bodies (qwen3_coder, seed_oss) ----
// The call goes out at <function=NAME>; its arguments are a compact JSON object built in the
// model's parameter order: `{` at once, `"key":` when a parameter opens, then the value. A value
// the schema types as text (type "string", or untyped under AlwaysString) streams JSON-escaped as
// it arrives; any other value is typed from the whole value and sent when it ends. Value text:
// one newline after the tag and one before </parameter> (or the next <parameter=) are layout; a
// value cut short by </function> or the block end also loses its trailing whitespace. Held
// back: a possible </parameter>, <parameter= or </function> prefix, trailing whitespace, an
// incomplete UTF-8 sequence. A repeated key is sent again (JSON readers keep the last).

namespace {
const std::string kFnOpen = "<function=", kFnClose = "</function>", kParOpen = "<parameter=",
                  kParClose = "</parameter>";

// A non-text value typed from its whole text (value_parsers.cpp), as compact JSON. Text nested
// deeper than nesting_ok allows stays a string (no recursive reader sees it).
std::string typed_value(const std::string& v, const nlohmann::json* schema, ArgTyping mode) {
  nlohmann::json j = nesting_ok(v) ? coerce_value(v, schema, mode) : nlohmann::json(v);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

void StreamParser::args_append(std::string_view s, ParseDelta& out) {
  if (s.empty()) return;
  if (!out.tool_calls.empty() && out.tool_calls.back().index == as_.index) {
    out.tool_calls.back().arguments.append(s);
  } else {
    ToolCallDelta d;
    d.index = as_.index;
    d.arguments = std::string(s);
    out.tool_calls.push_back(std::move(d));
  }
}

void StreamParser::xml_advance(std::string_view body, bool final, ParseDelta& out) {
  while (!as_.off && !as_.stop) {
    bool progressed = !as_.in_call ? xml_next(body, final, out)
                      : as_.x_value ? xml_value(body, final, out)
                                    : xml_params(body, final, out);
    if (!progressed) return;
  }
}

// The next <function=NAME>; text between functions is ignored (as xml_function does).
bool StreamParser::xml_next(std::string_view body, bool final, ParseDelta& out) {
  size_t from = std::max(as_.pos, as_.scan >= kFnOpen.size() ? as_.scan - kFnOpen.size() + 1 : size_t(0));
  size_t q = body.find(kFnOpen, from);
  if (q == npos) {
    as_.scan = body.size();
    return false;
  }
  as_.scan = q;
  size_t gt = body.find('>', q + kFnOpen.size());
  if (gt == npos) {
    if (final) args_invalid(q);
    return false;
  }
  std::string name = trim(body.substr(q + kFnOpen.size(), gt - q - kFnOpen.size()));
  if (name.empty() || name.find('<') != std::string::npos) {
    args_invalid(q);
    return false;
  }
  open_object_call(name, gt + 1, out);
  return true;
}

// Inside a function: the next parameter, or the function's end.
bool StreamParser::xml_params(std::string_view body, bool final, ParseDelta& out) {
  size_t pp = body.find(kParOpen, as_.pos), fe = body.find(kFnClose, as_.pos);
  if (fe != npos && (pp == npos || fe < pp)) {
    args_append("}", out);
    as_.in_call = false;
    as_.pos = as_.scan = fe + kFnClose.size();
    return true;
  }
  if (pp == npos) {
    if (!final) return false;
    args_append("}", out);  // unterminated function: the call ends with the block
    as_.in_call = false;
    as_.pos = as_.scan = body.size();
    return true;
  }
  size_t pg = body.find('>', pp + kParOpen.size());
  if (pg == npos || (fe != npos && pg > fe)) {
    if (!final && fe == npos) return false;
    // A parameter tag that never closes: the call ends here, the rest is content.
    args_append("}", out);
    as_.in_call = false;
    args_invalid(pp);
    return false;
  }
  std::string key = trim(body.substr(pp + kParOpen.size(), pg - pp - kParOpen.size()));
  as_.x_key = key;
  as_.x_text = value_is_text(param_schema(tools_, as_.name, key), tool_->typing);
  std::string head = as_.x_first ? "" : ",";
  head += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  head += as_.x_text ? ":\"" : ":";
  args_append(head, out);
  as_.x_first = false;
  as_.x_value = true;
  as_.x_lead = false;
  as_.x_vbeg = as_.x_sent = pg + 1;
  as_.scan = pg + 1;
  return true;
}

bool StreamParser::xml_value(std::string_view body, bool final, ParseDelta& out) {
  const size_t l = kParClose.size();
  size_t from = std::max(as_.x_vbeg, as_.scan >= l ? as_.scan - l + 1 : size_t(0));
  size_t ve = body.find(kParClose, from), np = body.find(kParOpen, from), fe = body.find(kFnClose, from);
  size_t stop = std::min({ve, np, fe});
  if (!as_.x_lead) {
    size_t lim = stop == npos ? body.size() : stop;
    if (lim > as_.x_vbeg) {
      if (body[as_.x_vbeg] == '\n') ++as_.x_vbeg;
      as_.x_sent = as_.x_vbeg;
      as_.x_lead = true;
    } else if (stop == npos && !final) {
      return false;
    }
  }
  if (stop != npos || final) {
    const bool closed = stop != npos && stop != fe;  // by </parameter> or the next <parameter=
    size_t e = stop == npos ? body.size() : stop;
    e = std::max(e, as_.x_vbeg);
    if (closed) {
      if (e > as_.x_vbeg && body[e - 1] == '\n') --e;
    } else {
      while (e > as_.x_vbeg && is_ws(body[e - 1])) --e;
    }
    if (as_.x_text) {
      args_append(json_escape(body.substr(as_.x_sent, e - std::min(e, as_.x_sent))) + "\"", out);
    } else {
      std::string v(body.substr(as_.x_vbeg, e - as_.x_vbeg));
      args_append(typed_value(v, param_schema(tools_, as_.name, as_.x_key), tool_->typing), out);
    }
    as_.x_value = false;
    as_.pos = stop == npos ? body.size() : (stop == ve ? ve + l : stop);
    return true;
  }
  as_.scan = body.size();
  if (!as_.x_text) return false;
  size_t lim = body.size();
  lim -= std::max({tail_prefix(body, as_.x_sent, kParClose), tail_prefix(body, as_.x_sent, kParOpen),
                   tail_prefix(body, as_.x_sent, kFnClose)});
  size_t r = lim;
  while (r > as_.x_sent && is_ws(body[r - 1])) --r;
  r = utf8_cut(body, as_.x_sent, r);
  if (r > as_.x_sent) {
    args_append(json_escape(body.substr(as_.x_sent, r - as_.x_sent)), out);
    as_.x_sent = r;
  }
  return false;
}

// ---- Argument-tag bodies: GLM (NAME<arg_key>K</arg_key><arg_value>V</arg_value>...) and
// invoke/parameter XML (minimax_m2, deepseek_v32, step3) ----
// Same output as the XML functions above: the call goes out once its name is certain (GLM: the
// name line ended with a newline or <arg_key>; invoke: the <invoke ...> tag closed), then `{`,
// `"K":` when a value opens, the value (text values stream JSON-escaped, others typed whole at
// their end), `}` when the call ends. Values are verbatim (these templates write them inline):
// no layout trimming, so only a possible closing-tag prefix and an incomplete UTF-8 sequence
// are held back.

namespace {
const std::string kKeyOpen = "<arg_key>", kKeyClose = "</arg_key>", kValOpen = "<arg_value>",
                  kValClose = "</arg_value>";

// First occurrence at or after `from` of any non-empty marker: (position, index) or (npos, -1).
std::pair<size_t, int> first_hit(std::string_view s, size_t from, std::initializer_list<const std::string*> ms) {
  std::pair<size_t, int> best{npos, -1};
  int i = 0;
  for (auto* m : ms) {
    if (!m->empty()) {
      size_t p = s.find(*m, from);
      if (p < best.first) best = {p, i};
    }
    ++i;
  }
  return best;
}
}  // namespace

void StreamParser::tag_advance(std::string_view body, bool final, ParseDelta& out) {
  const bool glm = tool_->body == Body::GlmArgs;
  while (!as_.off && !as_.stop) {
    bool progressed = !as_.in_call ? (glm ? glm_next(body, final, out) : inv_next(body, final, out))
                      : as_.x_value ? tag_value(body, final, out)
                      : glm         ? glm_params(body, final, out)
                                    : inv_params(body, final, out);
    if (!progressed) return;
  }
}

// `"key":` (and the opening quote of a text value) for the value starting at vbeg.
void StreamParser::tag_key(const std::string& key, int str_attr, size_t vbeg, ParseDelta& out) {
  const nlohmann::json* schema = param_schema(tools_, as_.name, key);
  as_.x_key = key;
  as_.x_attr = str_attr;
  as_.x_text = str_attr == 1 || (str_attr == 0 && value_is_text(schema, tool_->typing));
  std::string head = as_.x_first ? "" : ",";
  head += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  head += as_.x_text ? ":\"" : ":";
  args_append(head, out);
  as_.x_first = false;
  as_.x_value = true;
  as_.x_vbeg = as_.x_sent = as_.scan = vbeg;
}

// GLM: one call per block; its name is the first line (up to a newline or <arg_key>).
bool StreamParser::glm_next(std::string_view body, bool final, ParseDelta& out) {
  if (as_.committed > 0) return false;
  size_t b = 0;
  while (b < body.size() && is_ws(body[b])) ++b;
  if (b >= body.size()) {
    if (final) args_invalid(0);
    return false;
  }
  size_t e = body.find_first_of("\n<", std::max(b, as_.scan));
  if (e != npos && body[e] == '<') {
    size_t n = std::min(kKeyOpen.size(), body.size() - e);
    if (body.compare(e, n, kKeyOpen, 0, n) != 0) {
      args_invalid(0);  // markup in the name: the whole-block rule decides
      return false;
    }
    as_.scan = e;
    if (n < kKeyOpen.size() && !final) return false;
    if (n < kKeyOpen.size()) e = body.size();
  }
  if (e == npos) {
    as_.scan = body.size();
    if (!final) return false;
    e = body.size();
  }
  std::string name = trim(body.substr(b, e - b));
  if (name.empty() || name.find_first_of("<>{}\"") != std::string::npos) {
    args_invalid(0);
    return false;
  }
  open_object_call(name, e, out);
  as_.scan = e;
  return true;
}

// GLM: the next <arg_key>K</arg_key> <arg_value>; text between pairs is ignored (as glm_args
// does). A pair that never completes ends the call; the rest of the block is content.
bool StreamParser::glm_params(std::string_view body, bool final, ParseDelta& out) {
  size_t from = std::max(as_.pos, as_.scan >= kKeyOpen.size() ? as_.scan - kKeyOpen.size() + 1 : size_t(0));
  size_t p = body.find(kKeyOpen, from);
  if (p == npos) {
    as_.scan = body.size();
    if (!final) return false;
    args_append("}", out);
    as_.in_call = false;
    as_.pos = as_.scan = body.size();
    return true;
  }
  as_.scan = p;
  auto broken = [&] {
    args_append("}", out);
    as_.in_call = false;
    args_invalid(p);
    return false;
  };
  size_t ks = p + kKeyOpen.size();
  size_t ke = body.find(kKeyClose, ks);
  if (ke == npos) return final ? broken() : false;
  std::string key = trim(body.substr(ks, ke - ks));
  if (key.find('<') != std::string::npos) return broken();
  size_t vs = ke + kKeyClose.size();
  while (vs < body.size() && is_ws(body[vs])) ++vs;
  size_t n = std::min(kValOpen.size(), body.size() - vs);
  if (body.compare(vs, n, kValOpen, 0, n) != 0) return broken();
  if (n < kValOpen.size()) return final ? broken() : false;
  tag_key(key, 0, vs + kValOpen.size(), out);
  return true;
}

// Invoke formats: the next <invoke name="NAME">; text between invokes is ignored.
bool StreamParser::inv_next(std::string_view body, bool final, ParseDelta& out) {
  const std::string& io = tool_->invoke_open;
  size_t from = std::max(as_.pos, as_.scan >= io.size() ? as_.scan - io.size() + 1 : size_t(0));
  size_t q = body.find(io, from);
  if (q == npos) {
    as_.scan = body.size();
    return false;
  }
  as_.scan = q;
  size_t gt = body.find('>', q + io.size());
  if (gt == npos) {
    if (final) args_invalid(q);
    return false;
  }
  std::string name = attr_of(body.substr(q, gt - q), "name");
  if (name.empty()) {
    args_invalid(q);
    return false;
  }
  open_object_call(name, gt + 1, out);
  return true;
}

// Inside an invoke: the next parameter, or the invoke's end (</invoke>, or a section marker).
bool StreamParser::inv_params(std::string_view body, bool final, ParseDelta& out) {
  const ToolFormat& f = *tool_;
  size_t l = std::max({f.param_open.size(), f.invoke_close.size(), f.inner_end.size(), f.inner_start.size()});
  size_t from = std::max(as_.pos, as_.scan >= l ? as_.scan - l + 1 : size_t(0));
  size_t pp = body.find(f.param_open, from);
  auto [ie, which] = first_hit(body, from, {&f.invoke_close, &f.inner_end, &f.inner_start});
  as_.scan = std::min({pp, ie, body.size()});
  auto end_call = [&](size_t at) {
    args_append("}", out);
    as_.in_call = false;
    as_.pos = as_.scan = at;
    return true;
  };
  if (ie != npos && (pp == npos || ie < pp)) return end_call(which == 0 ? ie + f.invoke_close.size() : ie);
  if (pp == npos) return final ? end_call(body.size()) : false;
  size_t pg = body.find('>', pp + f.param_open.size());
  if (pg == npos || (ie != npos && pg > ie)) {
    if (!final && ie == npos) return false;
    // A parameter tag that never closes: the call ends here, the rest is content.
    args_append("}", out);
    as_.in_call = false;
    args_invalid(pp);
    return false;
  }
  std::string_view tag = body.substr(pp, pg - pp);
  std::string s = attr_of(tag, "string");
  tag_key(attr_of(tag, "name"), s == "true" ? 1 : s == "false" ? 2 : 0, pg + 1, out);
  return true;
}

// A value: up to its closing tag (GLM </arg_value>; invoke </parameter>, or the invoke's end).
bool StreamParser::tag_value(std::string_view body, bool final, ParseDelta& out) {
  const ToolFormat& f = *tool_;
  const bool glm = f.body == Body::GlmArgs;
  static const std::string none;
  const std::string& vc = glm ? kValClose : f.param_close;
  const std::string& ic = glm ? none : f.invoke_close;
  const std::string& se = glm ? none : f.inner_end;
  const std::string& ss = glm ? none : f.inner_start;
  size_t l = std::max({vc.size(), ic.size(), se.size(), ss.size()});
  size_t from = std::max(as_.x_vbeg, as_.scan >= l ? as_.scan - l + 1 : size_t(0));
  auto [stop, which] = first_hit(body, from, {&vc, &ic, &se, &ss});
  if (stop != npos || final) {
    size_t e = stop == npos ? body.size() : stop;
    if (as_.x_text) {
      args_append(json_escape(body.substr(as_.x_sent, e - std::min(e, as_.x_sent))) + "\"", out);
    } else {
      std::string v(body.substr(as_.x_vbeg, e - as_.x_vbeg));
      const nlohmann::json* schema = as_.x_attr == 2 ? nullptr : param_schema(tools_, as_.name, as_.x_key);
      args_append(typed_value(v, schema, as_.x_attr == 2 ? ArgTyping::Infer : f.typing), out);
    }
    as_.x_value = false;
    as_.pos = as_.scan = stop == npos ? body.size() : (which == 0 ? stop + vc.size() : stop);
    return true;
  }
  as_.scan = body.size();
  if (!as_.x_text) return false;
  size_t hold = std::max({tail_prefix(body, as_.x_sent, vc), tail_prefix(body, as_.x_sent, ic),
                          tail_prefix(body, as_.x_sent, se), tail_prefix(body, as_.x_sent, ss)});
  size_t r = utf8_cut(body, as_.x_sent, body.size() - hold);
  if (r > as_.x_sent) {
    args_append(json_escape(body.substr(as_.x_sent, r - as_.x_sent)), out);
    as_.x_sent = r;
  }
  return false;
}

// ---- Pythonic bodies ([f(a=1), g(b="x")]: pythonic, llama4_pythonic, lfm2, olmo3 lines) ----
// The call goes out at `NAME(`; its arguments are a compact JSON object in the model's keyword
// order: `{` at once, then per keyword `"K":` and the value converted to JSON. A string value
// streams JSON-escaped as it is decoded (its `"K":"` goes out at the opening quote); any other
// value (number, True/False/None, list, dict, tuple) is converted from its whole text when the
// `,` or `)` after it arrives; `}` at `)`. A repeated keyword is sent again. Held back: an
// incomplete escape, a possible closing triple quote, an incomplete UTF-8 sequence. Before any
// call, text that is not NAME( (after an optional `[`) means the whole-block rule; after one, a
// piece that does not parse ends the open call (`}`) and the block from there on is content.
namespace {
enum PyPhase { kPyStart, kPyCall, kPyKey, kPyValue, kPyAfterCall, kPyAfterList, kPyString, kPyScalar, kPyAfterValue, kPyDone };
bool py_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }
bool py_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
}  // namespace

void StreamParser::py_advance(std::string_view body, bool final, ParseDelta& out) {
  while (!as_.off && !as_.stop && as_.py != kPyDone) {
    if (!py_step(body, final, out)) return;
  }
}

// A piece that does not parse: the open call ends; the block from `at` on is content (or, before
// any call, the whole-block parse decides).
void StreamParser::py_break(size_t at, ParseDelta& out) {
  if (as_.in_call) {
    args_append("}", out);
    as_.in_call = false;
  }
  as_.py = kPyDone;
  args_invalid(at);
}

bool StreamParser::py_step(std::string_view body, bool final, ParseDelta& out) {
  if (as_.py == kPyString) return py_string(body, final, out);
  size_t q = as_.pos;
  if (as_.py != kPyScalar) {
    while (q < body.size() && is_ws(body[q])) ++q;
    if (q >= body.size()) {
      if (!final) return false;
      // The block ended here: an open call closes with it (its value cut short is dropped).
      if (as_.in_call) {
        if (as_.py == kPyValue) {
          py_break(as_.tail_at, out);
          return false;
        }
        args_append("}", out);
        as_.in_call = false;
      }
      as_.py = kPyDone;
      return false;
    }
  }
  switch (as_.py) {
    case kPyStart:
      as_.py_bracket = body[q] == '[';
      as_.pos = as_.py_bracket ? q + 1 : q;
      as_.py = kPyCall;
      return true;
    case kPyCall: {
      if (as_.py_bracket && body[q] == ']') {
        if (as_.committed == 0) {
          py_break(q, out);
          return false;
        }
        as_.pos = q + 1;
        as_.py = kPyAfterList;
        return true;
      }
      size_t i = q;
      while (i < body.size() && py_ident(body[i])) ++i;
      if (i >= body.size() && !final) return false;
      if (i == q || i >= body.size() || body[i] != '(') {
        py_break(q, out);
        return false;
      }
      std::string name(body.substr(q, i - q));
      args_commit(name, "", i + 1, out);
      as_.name = name;
      as_.x_first = true;
      args_append("{", out);
      as_.pos = i + 1;
      as_.py = kPyKey;
      return true;
    }
    case kPyKey: {
      if (body[q] == ')') {
        args_append("}", out);
        as_.in_call = false;
        as_.pos = q + 1;
        as_.py = kPyAfterCall;
        return true;
      }
      size_t i = q;
      while (i < body.size() && py_key_char(body[i])) ++i;
      size_t e = i;
      while (e < body.size() && is_ws(body[e])) ++e;
      if (e >= body.size() && !final) return false;
      if (i == q || e >= body.size() || body[e] != '=') {
        py_break(q, out);
        return false;
      }
      as_.x_key.assign(body.substr(q, i - q));
      as_.tail_at = q;  // the keyword's start: where a value that does not parse sends content
      as_.pos = e + 1;
      as_.py = kPyValue;
      return true;
    }
    case kPyValue: {
      std::string head = as_.x_first ? "" : ",";
      head += nlohmann::json(as_.x_key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      head += ':';
      char c = body[q];
      if (c == '"' || c == '\'') {
        size_t k = 1;
        while (k < 3 && q + k < body.size() && body[q + k] == c) ++k;
        if (k < 3 && q + k >= body.size() && !final) return false;  // "" may still become """
        as_.py_q = c;
        as_.py_triple = k == 3;
        as_.py_dec.clear();
        as_.x_sent = q + (as_.py_triple ? 3 : 1);
        args_append(head + "\"", out);
        as_.x_first = false;
        as_.py = kPyString;
        return true;
      }
      as_.x_vbeg = as_.scan = q;
      as_.brackets = BracketScanner(true);
      as_.py = kPyScalar;
      as_.pos = q;
      return true;
    }
    case kPyScalar: {
      // The value ends at a ',' or ')' outside brackets and strings (resumable scan).
      size_t end = as_.brackets.to_delimiter(body, as_.scan);
      if (end == npos) {
        if (!final) return false;
        end = body.size();
      }
      std::string_view v = body.substr(as_.x_vbeg, end - as_.x_vbeg);
      while (!v.empty() && is_ws(v.back())) v.remove_suffix(1);
      // Nested deeper than any recursive reader may go: does not parse.
      size_t p = 0;
      auto lit = nesting_ok(v) ? parse_python_literal(v, p) : std::nullopt;
      if (!lit || p != v.size()) {
        py_break(as_.tail_at, out);
        return false;
      }
      nlohmann::json j = std::move(*lit);
      std::string head = as_.x_first ? "" : ",";
      head += nlohmann::json(as_.x_key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      head += ':';
      head += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      args_append(head, out);
      as_.x_first = false;
      as_.pos = end;
      as_.py = kPyAfterValue;
      return true;
    }
    case kPyAfterValue:
      if (body[q] == ',') {
        as_.pos = q + 1;
        as_.py = kPyKey;
        return true;
      }
      if (body[q] == ')') {
        args_append("}", out);
        as_.in_call = false;
        as_.pos = q + 1;
        as_.py = kPyAfterCall;
        return true;
      }
      py_break(q, out);
      return false;
    case kPyAfterCall:
      as_.pos = body[q] == ',' ? q + 1 : q;
      as_.py = kPyCall;
      return true;
    case kPyAfterList:
      py_break(q, out);  // text after the list is content
      return false;
    default: return false;
  }
}

// A string value: decoded as Python reads it, released JSON-escaped up to an incomplete escape,
// a possible closing triple quote or an incomplete UTF-8 sequence.
bool StreamParser::py_string(std::string_view body, bool final, ParseDelta& out) {
  const char qc = as_.py_q;
  std::string& dec = as_.py_dec;
  size_t p = as_.x_sent;
  bool closed = false;
  while (p < body.size()) {
    char c = body[p];
    if (c == qc) {
      if (!as_.py_triple) {
        closed = true;
        ++p;
        break;
      }
      size_t k = 1;
      while (k < 3 && p + k < body.size() && body[p + k] == qc) ++k;
      if (k == 3) {
        closed = true;
        p += 3;
        break;
      }
      if (p + k >= body.size() && !final) break;
      dec += c;
      ++p;
      continue;
    }
    if (c == '\\') {
      if (p + 1 >= body.size()) {
        if (!final) break;
        dec += c;
        ++p;
        continue;
      }
      char e = body[p + 1];
      if (e == 'u' || e == 'x') {
        size_t n = e == 'u' ? 4 : 2;
        if (p + 2 + n > body.size()) {
          if (!final) break;
          p = body.size();  // cut short by the block end
          break;
        }
        uint32_t cp = std::strtoul(std::string(body.substr(p + 2, n)).c_str(), nullptr, 16);
        append_utf8(dec, cp);
        p += 2 + n;
        continue;
      }
      switch (e) {
        case 'n': dec += '\n'; break;
        case 't': dec += '\t'; break;
        case 'r': dec += '\r'; break;
        case '0': dec += '\0'; break;
        default: dec += e;  // \\ \' \" and unknown escapes keep the character
      }
      p += 2;
      continue;
    }
    dec += c;
    ++p;
  }
  as_.x_sent = p;
  const bool done = closed || final;
  size_t r = done ? dec.size() : utf8_cut(dec, 0, dec.size());
  if (r > 0) {
    args_append(json_escape(std::string_view(dec).substr(0, r)), out);
    dec.erase(0, r);
  }
  if (!done) return false;
  args_append("\"", out);
  as_.pos = p;
  as_.py = kPyAfterValue;
  return true;  // cut short by the block end: kPyAfterValue closes the call
}

}  // namespace rapid::parsers
