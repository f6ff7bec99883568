// `serve`, `bench`, `pull` and `ps` in the `rapid-mlx` binary: they re-execute as rapid-mlx-http, built next to
// it from the same sources plus the HTTP server. The HTTP stack (cpp-httplib with OpenSSL, brotli
// and zlib, whose static initialisers run at load) costs ~6.5 MB of resident memory in every
// process that links it, and `run`, `tokenize`, `convert`... never use it (issue #3: resident
// memory <= weights + KV + 10 %). exec keeps the process id, so callers see one process.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/http_binary.h"
#include "common/error.h"

namespace rapid::cli {

namespace {

int exec_http(const char* cmd, const std::vector<std::string>& args) {
  const std::string path = http_binary();
  std::vector<std::string> owned{"rapid-mlx", cmd};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : owned) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  throw Error("cannot run " + path + ": " + std::strerror(errno) +
              " (`" + cmd + "` lives in rapid-mlx-http, built next to rapid-mlx; RAPID_MLX_HTTP_BIN overrides)");
}

Registrar serve("serve", "serve the OpenAI/Anthropic-compatible HTTP API",
                [](const std::vector<std::string>& a) { return exec_http("serve", a); });
Registrar bench("bench", "single-stream and concurrent throughput/latency of a model",
                [](const std::vector<std::string>& a) { return exec_http("bench", a); });
Registrar pull("pull", "download a model from the Hugging Face hub into its cache",
               [](const std::vector<std::string>& a) { return exec_http("pull", a); });
Registrar ps("ps", "the rapid-mlx servers running on this machine: model, memory, KV use, load",
             [](const std::vector<std::string>& a) { return exec_http("ps", a); });

}  // namespace
}  // namespace rapid::cli
