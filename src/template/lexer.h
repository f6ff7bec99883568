// Splits a Jinja template into text and tag tokens exactly as jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True (whitespace control `-`/`+`, comments, raw blocks).
#pragma once
#include <string>
#include <vector>

namespace rapid::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string value;
  int line;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError(Syntax) with the line of the problem.
std::vector<Token> tokenize(const std::string& source, const LexOptions& opt = {});

}  // namespace rapid::jinja
