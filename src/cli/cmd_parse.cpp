// `rapid-mlx parse`: runs a tool-call / reasoning parser over a saved model output, optionally fed
// in random chunks as a stream would deliver it, and prints the merged result as JSON.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "common/error.h"
#include "parsers/output_parser.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw rapid::FileError(path, "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Args {
  rapid::parsers::ParserOptions opts;
  std::string file, tools_file;
  int chunks = 0;
  uint64_t seed = 0;
  bool list = false;
};

rapid::cli::FlagTable table(Args& a) {
  using namespace rapid::cli;
  return FlagTable(
      "parse",
      {text("--parser", "NAME", "tool-call parser (--list names them)", &a.opts.tool_parser)
           .alias("--tool-call-parser").default_is("none"),
       text("--reasoning-parser", "NAME", "reasoning parser", &a.opts.reasoning_parser).default_is("none"),
       text("--tools", "FILE.json", "the tools offered (a JSON array, or an object with \"tools\")", &a.tools_file),
       integer("--chunks", "N", "feed the output in N random pieces, as a stream would (0, 1: whole)", &a.chunks, 0),
       integer("--seed", "S", "seed of the cut points and tool-call ids", &a.seed).default_is("random"),
       text("--file", "OUTPUT.txt", "the raw model output", &a.file),
       flag("--starts-in-reasoning", "the prompt already opened the reasoning block", &a.opts.starts_in_reasoning),
       flag("--list", "print the parser names and exit", &a.list)},
      "parse a raw model output into content, reasoning and tool calls",
      {"[--parser NAME] [options] --file OUTPUT.txt", "--list"});
}

int run_parse(Args& a) {
  if (a.list) {
    for (auto& n : rapid::parsers::tool_parser_names()) std::printf("tool %s\n", n.c_str());
    for (auto& n : rapid::parsers::reasoning_parser_names()) std::printf("reasoning %s\n", n.c_str());
    return 0;
  }
  if (a.file.empty()) throw rapid::cli::UsageError("--file is required");
  rapid::parsers::ParserOptions& opts = a.opts;
  const std::string &file = a.file, &tools_file = a.tools_file;
  const int chunks = a.chunks;
  const uint64_t seed = a.seed;
  if (!tools_file.empty()) {
    nlohmann::json t = nlohmann::json::parse(read_all(tools_file), nullptr, false);
    if (t.is_discarded()) throw rapid::FileError(tools_file, "not valid JSON");
    if (t.is_object() && t.contains("tools")) t = t["tools"];
    if (!t.is_array()) throw rapid::FileError(tools_file, "expected a JSON array of tools");
    opts.tools = t;
  }
  opts.id_seed = seed;
  auto parser = rapid::parsers::make_output_parser(opts);  // unknown names fail before any file is read
  std::string text = read_all(file);

  std::string content, reasoning;
  std::vector<rapid::parsers::ParsedToolCall> calls;
  auto merge = [&](const rapid::parsers::ParseDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (auto& t : d.tool_calls) {
      if (t.index >= static_cast<int>(calls.size())) calls.resize(t.index + 1);
      if (!t.id.empty()) calls[t.index].id = t.id;
      if (!t.name.empty()) calls[t.index].name = t.name;
      calls[t.index].arguments += t.arguments;
    }
  };
  if (chunks > 1 && text.size() > 1) {
    // N random cut points: the result must not depend on where the stream was cut.
    std::mt19937_64 rng(seed ? seed : std::random_device{}());
    std::vector<size_t> cuts;
    for (int i = 0; i < chunks - 1; ++i) cuts.push_back(1 + rng() % (text.size() - 1));
    std::sort(cuts.begin(), cuts.end());
    size_t prev = 0;
    for (size_t c : cuts) {
      merge(parser->feed(std::string_view(text).substr(prev, c - prev)));
      prev = c;
    }
    merge(parser->feed(std::string_view(text).substr(prev)));
  } else {
    merge(parser->feed(text));
  }
  merge(parser->finish());

  using ojson = nlohmann::ordered_json;  // keep the documented key order
  ojson out;
  out["content"] = content.empty() ? ojson(nullptr) : ojson(content);
  out["reasoning_content"] = reasoning.empty() ? ojson(nullptr) : ojson(reasoning);
  out["tool_calls"] = ojson::array();
  for (auto& c : calls) {
    ojson args = ojson::parse(c.arguments, nullptr, false);
    if (args.is_discarded()) args = c.arguments;
    ojson call;
    call["id"] = c.id;
    call["name"] = c.name;
    call["arguments"] = args;
    out["tool_calls"].push_back(call);
  }
  std::cout << out.dump(2, ' ', false, ojson::error_handler_t::replace) << "\n";
  return 0;
}

rapid::cli::Registrar reg("parse", table, run_parse);

}  // namespace
