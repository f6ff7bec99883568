// `rapid-mlx tokenize` / `rapid-mlx detokenize`: inspect how a model's tokenizer splits text.
#include <climits>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "common/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace {

int usage_tokenize() {
  std::fprintf(stderr,
               "usage: rapid-mlx tokenize --tokenizer PATH [--file F | TEXT] [--no-add-special]\n"
               "                          [--no-parse-special] [--pieces]\n"
               "PATH: model directory, tokenizer.json or .gguf. Prints ids space-separated.\n"
               "--file may be repeated (one output line per file); --records F reads texts\n"
               "stored as [u32 little-endian length][bytes]... and prints one line per text.\n");
  return 2;
}

// Texts stored back to back as [u32 LE length][bytes] (batch mode for tests and benchmarks).
std::vector<std::string> read_records(const std::string& path) {
  std::string raw = rapid::read_file(path);
  std::vector<std::string> out;
  for (size_t p = 0; p < raw.size();) {
    if (raw.size() - p < 4) throw rapid::FileError(path, "truncated record header");
    uint32_t n = static_cast<uint8_t>(raw[p]) | static_cast<uint8_t>(raw[p + 1]) << 8 |
                 static_cast<uint8_t>(raw[p + 2]) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(raw[p + 3])) << 24;
    p += 4;
    if (n > raw.size() - p) throw rapid::FileError(path, "record extends past end of file");
    out.push_back(raw.substr(p, n));
    p += n;
  }
  return out;
}

int run_tokenize(const std::vector<std::string>& args) {
  std::string path, text, records;
  std::vector<std::string> files;
  bool have_text = false, add_special = true, parse_special = true, pieces = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--tokenizer" && i + 1 < args.size()) path = args[++i];
    else if (a == "--file" && i + 1 < args.size()) files.push_back(args[++i]);
    else if (a == "--records" && i + 1 < args.size()) records = args[++i];
    else if (a == "--no-add-special") add_special = false;
    else if (a == "--no-parse-special") parse_special = false;
    else if (a == "--pieces") pieces = true;
    else if (a == "-h" || a == "--help") return usage_tokenize();
    else if (a == "--") { if (i + 1 < args.size()) { text = args[++i]; have_text = true; } }
    else if (!a.empty() && a[0] == '-' && a.size() > 1) {
      std::fprintf(stderr, "rapid-mlx tokenize: unknown option '%s'\n", a.c_str());
      return usage_tokenize();
    } else if (!have_text) { text = a; have_text = true; }
    else { std::fprintf(stderr, "rapid-mlx tokenize: more than one TEXT\n"); return usage_tokenize(); }
  }
  int sources = (have_text ? 1 : 0) + (files.empty() ? 0 : 1) + (records.empty() ? 0 : 1);
  if (path.empty() || sources != 1) return usage_tokenize();
  std::vector<std::string> texts;
  if (have_text) texts.push_back(text);
  for (auto& f : files) texts.push_back(rapid::read_file(f));
  if (!records.empty()) texts = read_records(records);
  auto tok = rapid::load_tokenizer(path);
  std::string out;
  for (auto& t : texts) {
    auto ids = tok->encode(t, add_special, parse_special);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
      if (pieces) out += ":" + tok->id_to_piece(ids[i]);
    }
    out += '\n';
    if (out.size() > (1 << 20)) { std::fwrite(out.data(), 1, out.size(), stdout); out.clear(); }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_detokenize(const std::vector<std::string>& args) {
  std::string path, ids_file;
  bool skip = false;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--tokenizer" && i + 1 < args.size()) { path = args[++i]; continue; }
    if (args[i] == "--ids-file" && i + 1 < args.size()) { ids_file = args[++i]; continue; }
    if (args[i] == "--skip-special") { skip = true; continue; }
    try {
      size_t used = 0;
      long long v = std::stoll(args[i], &used);
      if (used != args[i].size() || v < INT32_MIN || v > INT32_MAX) throw std::exception();
      ids.push_back(static_cast<int32_t>(v));
    } catch (...) {
      std::fprintf(stderr, "rapid-mlx detokenize: '%s' is not a token id\n", args[i].c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: rapid-mlx detokenize --tokenizer PATH [--skip-special] (IDS... | --ids-file F)\n");
    return 2;
  }
  auto tok = rapid::load_tokenizer(path);
  if (!ids_file.empty()) {
    // Batch mode: one line of ids in, one JSON string out (texts may contain newlines).
    std::istringstream in(rapid::read_file(ids_file));
    std::string line, out;
    while (std::getline(in, line)) {
      std::vector<int32_t> v;
      std::istringstream ls(line);
      for (long long x; ls >> x;) v.push_back(static_cast<int32_t>(x));
      out += nlohmann::json(tok->decode(v, skip)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= tok->vocab_size())
      throw rapid::Error("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                         std::to_string(tok->vocab_size()) + ")");
  std::string s = tok->decode(ids, skip);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

rapid::cli::Registrar reg_tok("tokenize", "print the token ids of a text", run_tokenize);
rapid::cli::Registrar reg_detok("detokenize", "print the text of token ids", run_detokenize);

}  // namespace
