#include "parsers/stream_parser.h"

#include <algorithm>
#include <cctype>

#include "parsers/marker_scan.h"

namespace rapid::parsers {

namespace {
bool is_ws(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
constexpr size_t npos = std::string::npos;

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Length of the longest suffix of s[from..] that is a proper prefix of m (may still become m).
size_t tail_prefix(std::string_view s, size_t from, std::string_view m) {
  if (m.empty() || s.size() <= from) return 0;
  size_t k = std::min(m.size() - 1, s.size() - from);
  for (; k > 0; --k)
    if (s.substr(s.size() - k) == m.substr(0, k)) return k;
  return 0;
}

// End of s[begin..r) moved back so that it does not split a UTF-8 sequence.
size_t utf8_cut(std::string_view s, size_t begin, size_t r) {
  size_t i = r, back = 0;
  while (i > begin && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == begin) return r;
  unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (need > 1 && back + 1 < need) return i - 1;
  return r;
}

bool streams_args(const ToolFormat* f) {
  if (!f || f->end_is_lookahead || !f->implicit_prefix.empty()) return false;
  return f->body == Body::NameSepJson || f->body == Body::DeepseekV3 || f->body == Body::MistralAny;
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
        std::string raw = body.substr(std::min(as_.stop_at, body.size()));
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
  as_.depth = 0;
  as_.in_str = as_.esc = false;
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
    // json_extent, resumable.
    size_t end = npos, i = as_.scan;
    for (; i < body.size(); ++i) {
      char ch = body[i];
      if (as_.esc) {
        as_.esc = false;
        continue;
      }
      if (as_.in_str) {
        if (ch == '\\') as_.esc = true;
        else if (ch == '"') as_.in_str = false;
        continue;
      }
      if (ch == '"') as_.in_str = true;
      else if (ch == '{' || ch == '[') ++as_.depth;
      else if ((ch == '}' || ch == ']') && --as_.depth == 0) {
        end = i + 1;
        break;
      }
    }
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

}  // namespace rapid::parsers
