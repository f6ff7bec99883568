#include "parsers/stream_parser.h"

#include <algorithm>

#include "parsers/marker_scan.h"
#include "parsers/text_util.h"

namespace rapid::parsers {

StreamParser::StreamParser(const ToolFormat* tool, const ReasoningFormat* reasoning, const ParserOptions& opts)
    : tool_(tool), reasoning_(reasoning), tools_(opts.tools), ids_(opts.id_seed), sink_(tool, ids_, calls_) {
  rebuild_markers();
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

void StreamParser::open_block(const std::string& start) {
  state_ = State::Call;
  block_start_ = start;
  scanned_ = 0;
  body_ = make_body_stream(*tool_, tools_);
  sink_.reset();
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
          open_block("");
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
      open_block(implicit ? "" : m);
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
    if (body_ && !sink_.done()) {
      // Bytes that may still be the block's end marker are not body yet.
      sink_.set_output(out);
      body_->advance(std::string_view(buf_).substr(0, buf_.size() - tail_prefix(buf_, 0, end)), false, sink_);
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
  const bool closed_by_end = terminated && !tool_->end.empty() && !tool_->end_is_lookahead;
  if (body_ && !sink_.off()) {
    sink_.set_output(out);
    body_->advance(body, true, sink_);
    if (sink_.committed() > 0) {
      // Calls went out while the block was open: they stand, whatever follows them.
      pending_ws_.clear();
      after_call_ = true;
      if (sink_.stopped()) {
        std::string_view src = body_->read_text(body);
        std::string raw(src.substr(std::min(sink_.stop_at(), src.size())));
        if (closed_by_end) raw += tool_->end;
        emit_content(raw, out);
      }
      body_.reset();
      return;
    }
  }
  body_.reset();
  std::optional<std::vector<Call>> calls;
  std::string trailing;
  if (terminated || !tool_->require_end) calls = parse_body(*tool_, body, tools_, &trailing);
  if (!calls) {
    // Not a call after all: the model's text comes back verbatim.
    std::string raw = block_start_ + body;
    if (closed_by_end) raw += tool_->end;
    emit_content(raw, out);
    return;
  }
  pending_ws_.clear();
  sink_.set_output(out);
  for (auto& c : *calls) sink_.whole(c);
  after_call_ = true;
  if (!trailing.empty()) emit_content(trailing, out);
}

}  // namespace rapid::parsers
