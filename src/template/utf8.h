// UTF-8 helpers: Python strings index by code point, the interpreter stores UTF-8 bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::jinja {

// Decodes UTF-8; an invalid byte decodes as itself (U+0080..U+00FF) so nothing is lost or fatal.
std::u32string utf8_decode(std::string_view s);
void utf8_append(std::string& out, char32_t c);
std::string utf8_encode(std::u32string_view s);
bool is_ascii(std::string_view s);
size_t utf8_length(std::string_view s);
bool is_py_space(char32_t c);      // str.isspace()
bool is_py_printable(char32_t c);  // str.isprintable(), approximated outside Latin-1
char32_t py_lower(char32_t c);
char32_t py_upper(char32_t c);
bool is_py_alpha(char32_t c);
bool is_py_digit(char32_t c);

}  // namespace rapid::jinja
