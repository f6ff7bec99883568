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

int run_parse(const std::vector<std::string>& args) {
  rapid::ParserOptions opts;
  std::string file, tools_file;
  int chunks = 0;
  uint64_t seed = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw rapid::Error(std::string(flag) + " needs a value");
      return args[++i];
    };
    const std::string& a = args[i];
    if (a == "--parser" || a == "--tool-call-parser") opts.tool_parser = value("--parser");
    else if (a == "--reasoning-parser") opts.reasoning_parser = value("--reasoning-parser");
    else if (a == "--tools") tools_file = value("--tools");
    else if (a == "--chunks") chunks = std::stoi(value("--chunks"));
    else if (a == "--seed") seed = std::stoull(value("--seed"));
    else if (a == "--file") file = value("--file");
    else if (a == "--starts-in-reasoning") opts.starts_in_reasoning = true;
    else if (a == "--list") {
      for (auto& n : rapid::tool_parser_names()) std::printf("tool %s\n", n.c_str());
      for (auto& n : rapid::reasoning_parser_names()) std::printf("reasoning %s\n", n.c_str());
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: rapid-mlx parse --parser NAME [--reasoning-parser NAME] [--tools FILE.json]\n"
          "                       [--chunks N] [--seed S] [--starts-in-reasoning] --file OUTPUT.txt\n"
          "       rapid-mlx parse --list\n");
      return 0;
    } else {
      throw rapid::Error("unknown option '" + a + "'");
    }
  }
  if (file.empty()) throw rapid::Error("--file is required");
  if (chunks < 0) throw rapid::Error("--chunks must be positive");
  if (!tools_file.empty()) {
    nlohmann::json t = nlohmann::json::parse(read_all(tools_file), nullptr, false);
    if (t.is_discarded()) throw rapid::FileError(tools_file, "not valid JSON");
    if (t.is_object() && t.contains("tools")) t = t["tools"];
    if (!t.is_array()) throw rapid::FileError(tools_file, "expected a JSON array of tools");
    opts.tools = t;
  }
  opts.id_seed = seed;
  auto parser = rapid::make_output_parser(opts);  // unknown names fail before any file is read
  std::string text = read_all(file);

  std::string content, reasoning;
  std::vector<rapid::ParsedToolCall> calls;
  auto merge = [&](const rapid::ParseDelta& d) {
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

rapid::cli::Registrar reg("parse", "parse a raw model output into content, reasoning and tool calls", run_parse);

}  // namespace
