// Where rapid-mlx-http lives (next to this executable; RAPID_MLX_HTTP_BIN overrides).
#pragma once
#include <string>

namespace rapid::cli {
std::string http_binary();
}  // namespace rapid::cli
