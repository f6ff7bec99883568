#include "cli/http_binary.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace rapid::cli {

std::string http_binary() {
  if (const char* env = std::getenv("RAPID_MLX_HTTP_BIN"); env && *env) return env;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw Error(std::string("cannot locate this executable: ") + std::strerror(errno));
  std::string self(buf, static_cast<size_t>(n));
  size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/rapid-mlx-http";
}

}  // namespace rapid::cli
