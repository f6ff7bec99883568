// Parses jinja2 template syntax (statements and expressions, with transformers' `generation`
// block and the loopcontrols extension) into a syntax tree.
#pragma once
#include <string>

#include "template/ast.h"

namespace rapid::jinja {

// Throws TemplateError(Syntax) with the line and reason when the source does not parse.
Body parse_template(const std::string& source);

}  // namespace rapid::jinja
