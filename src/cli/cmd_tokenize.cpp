// `rapid-mlx tokenize` / `rapid-mlx detokenize`: inspect how a model's tokenizer splits text.
#include <climits>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "common/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace {

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

// Both commands' --tokenizer.
rapid::cli::Flag tokenizer_flag(std::string* path) {
  return rapid::cli::text("--tokenizer", "PATH", "a model directory, tokenizer.json or .gguf", path).required();
}

struct TokenizeArgs {
  std::string path, records;
  std::optional<std::string> text;
  std::vector<std::string> files;
  bool add_special = true, parse_special = true, pieces = false;
};

rapid::cli::FlagTable tokenize_table(TokenizeArgs& a) {
  using namespace rapid::cli;
  return FlagTable(
      "tokenize",
      {tokenizer_flag(&a.path),
       text("TEXT", "", "the text to tokenize (or --file / --records)", &a.text).as_positional(),
       text("--file", "F", "tokenize this file's contents (repeatable: one output line per file)", &a.files),
       text("--records", "F", "texts stored as [u32 little-endian length][bytes]...: one output line per text",
            &a.records),
       flag("--no-add-special", "do not add BOS/EOS", &a.add_special, false),
       flag("--no-parse-special", "special-token text is plain text", &a.parse_special, false),
       flag("--pieces", "print id:piece instead of ids", &a.pieces)},
      "print the token ids of a text (space-separated)",
      {"--tokenizer PATH [options] (TEXT | --file F... | --records F)"});
}

int run_tokenize(TokenizeArgs& a) {
  int sources = (a.text ? 1 : 0) + (a.files.empty() ? 0 : 1) + (a.records.empty() ? 0 : 1);
  if (sources != 1) throw rapid::cli::UsageError("give exactly one of TEXT, --file and --records");
  const std::string &path = a.path, &records = a.records;
  const std::vector<std::string>& files = a.files;
  const bool add_special = a.add_special, parse_special = a.parse_special, pieces = a.pieces;
  std::vector<std::string> texts;
  if (a.text) texts.push_back(*a.text);
  for (auto& f : files) texts.push_back(rapid::read_file(f));
  if (!records.empty()) texts = read_records(records);
  auto tok = rapid::tok::load_tokenizer(path);
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

struct DetokenizeArgs {
  std::string path, ids_file;
  bool skip = false;
  std::vector<int32_t> ids;
};

rapid::cli::FlagTable detokenize_table(DetokenizeArgs& a) {
  using namespace rapid::cli;
  return FlagTable(
      "detokenize",
      {tokenizer_flag(&a.path),
       integer("IDS", "", "token ids", &a.ids).as_positional(),
       text("--ids-file", "F", "one line of space-separated ids per text; prints one JSON string per line",
            &a.ids_file),
       flag("--skip-special", "leave special tokens out", &a.skip)},
      "print the text of token ids", {"--tokenizer PATH [--skip-special] (IDS... | --ids-file F)"});
}

int run_detokenize(DetokenizeArgs& a) {
  const std::string &path = a.path, &ids_file = a.ids_file;
  const bool skip = a.skip;
  const std::vector<int32_t>& ids = a.ids;
  auto tok = rapid::tok::load_tokenizer(path);
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

rapid::cli::Registrar reg_tok("tokenize", tokenize_table, run_tokenize);
rapid::cli::Registrar reg_detok("detokenize", detokenize_table, run_detokenize);

}  // namespace
