// The interface between the stream parser's driver (stream_parser.cpp: content / reasoning /
// call-block states) and the body parsers that read a call block's body while it streams, one
// per body kind (stream_json_calls.cpp, stream_name_args.cpp, stream_mistral.cpp,
// stream_xml_function.cpp, stream_arg_tags.cpp, stream_pythonic.cpp). A body parser is made when
// a block opens and sees the whole body so far on every feed (offsets into it stay valid); each
// keeps its own state. Calls and their argument text go out through the CallSink, which also
// records how the block turned out. Every decision depends only on the text seen, never on how
// it was chunked, so streamed and whole results stay identical.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "parsers/output_parser.h"
#include "parsers/text_util.h"
#include "parsers/tool_format.h"
#include "parsers/tool_ids.h"

namespace rapid::parsers {

// Appends argument text to call `index` in `out` (to its last fragment when that is the same call).
void append_call_args(ParseDelta& out, int index, std::string_view s);

class CallSink {
 public:
  CallSink(const ToolFormat* f, ToolIdMaker& ids, int& calls) : f_(f), ids_(ids), calls_(calls) {}
  void set_output(ParseDelta& out) { out_ = &out; }
  void reset();  // a new block

  // A call goes out (index, id, name; arguments follow with append). `id_text`: an id the model
  // wrote itself (Kimi).
  void open(const std::string& name, const std::string& id_text = "");
  void append(std::string_view args) { append_call_args(*out_, index_, args); }
  // A call delivered whole, name and arguments at once.
  void whole(const Call& c);
  // The body from `at` on is no call. Before any call went out the whole-block parse decides
  // (off); after one, the calls stand and the text from `at` on is content (stopped).
  void invalid(size_t at);

  bool off() const { return off_; }
  bool stopped() const { return stop_; }
  bool done() const { return off_ || stop_; }
  size_t stop_at() const { return stop_at_; }
  int committed() const { return committed_; }

 private:
  const ToolFormat* f_;
  ToolIdMaker& ids_;
  int& calls_;  // calls of the whole reply (the driver's count)
  ParseDelta* out_ = nullptr;
  int index_ = 0;      // the call argument text goes to
  int committed_ = 0;  // calls sent from this block
  bool off_ = false, stop_ = false;
  size_t stop_at_ = 0;
};

class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Reads the block body received so far; `final`: that is all of it.
  virtual void advance(std::string_view body, bool final, CallSink& sink) = 0;
  // The text sink.stop_at() indexes: the body, or the copy of it this parser reads.
  virtual std::string_view read_text(std::string_view body) const { return body; }
};

// nullptr when the format's calls are only delivered whole (Gemma).
std::unique_ptr<BodyStream> make_body_stream(const ToolFormat& f, const nlohmann::json& tools);

// One per body kind (see the files named above).
std::unique_ptr<BodyStream> json_calls_stream(const ToolFormat& f, const nlohmann::json& tools);
std::unique_ptr<BodyStream> name_args_stream(const ToolFormat& f);
std::unique_ptr<BodyStream> mistral_stream();
std::unique_ptr<BodyStream> xml_function_stream(const ToolFormat& f, const nlohmann::json& tools);
std::unique_ptr<BodyStream> arg_tags_stream(const ToolFormat& f, const nlohmann::json& tools);
std::unique_ptr<BodyStream> pythonic_stream();

// Argument text kept as the model wrote it (an object or array after a known name; a ```json
// fence line and surrounding whitespace are layout): released as it arrives, holding back
// trailing whitespace and backticks (a closing fence) and an incomplete UTF-8 sequence.
// Other values are released whole by close().
struct RawArgs {
  size_t from = 0;        // start of the call's argument region
  size_t begin = npos;    // first byte of the argument text; npos = not known yet
  bool streamable = false;  // the text starts with '{' or '['
  size_t sent = 0;        // bytes of the argument text released

  void start(size_t at) { *this = RawArgs{at}; }
  // Releases argument text up to `lim` (exclusive), minus what may still change.
  void release(std::string_view body, size_t lim, CallSink& sink);
  // The arguments are complete (`text`, as args_after_name gives them): what was not released.
  void close(const std::string& text, CallSink& sink);
};

// Arguments built as a compact JSON object, one key at a time in the model's order (XML
// functions, argument tags, pythonic): `{` when the call goes out, `"K":` per value, `}` at its
// end. A repeated key is sent again (JSON readers keep the last).
struct ObjectArgs {
  std::string name;   // the call's function (schema lookups)
  bool open = false;  // the call is open: "}" not sent yet
  bool first = true;  // no key sent yet

  void start(const std::string& fn, CallSink& sink);
  // `"K":`, or `"K":"` for a string value streamed as it arrives (text_value).
  void key(const std::string& k, bool text, CallSink& sink);
  void end(CallSink& sink);
};

// A string value streamed as it arrives: body[sent..lim) JSON-escaped, cut before an incomplete
// UTF-8 sequence; close_text_value ends it at `end` (the rest and the closing quote).
void stream_text_value(std::string_view body, size_t& sent, size_t lim, CallSink& sink);
void close_text_value(std::string_view body, size_t sent, size_t end, CallSink& sink);

// A non-text value typed from its whole text (value_parsers.cpp), as compact JSON. Text nested
// deeper than nesting_ok allows stays a string (no recursive reader sees it).
std::string typed_value(const std::string& v, const nlohmann::json* schema, ArgTyping mode);

}  // namespace rapid::parsers
