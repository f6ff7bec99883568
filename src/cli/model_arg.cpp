#include "cli/model_arg.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/http_binary.h"
#include "common/error.h"
#include "hub/hf_cache.h"
#include "hub/resolve.h"

namespace rapid::cli {
namespace fs = std::filesystem;

namespace {
// Runs `rapid-mlx-http pull SPEC` (its progress goes to our stderr) and waits for it.
void pull_in_child(const std::string& spec) {
  std::string bin = http_binary();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start the download: ") + std::strerror(errno));
  if (pid == 0) {
    std::vector<std::string> owned{"rapid-mlx", "pull", spec};
    std::vector<char*> argv;
    for (auto& s : owned) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::dup2(2, 1);  // the child's report is progress for us, not our output
    ::execv(bin.c_str(), argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", bin.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Error(spec + ": the download did not complete (see above)");
}
}  // namespace

ModelArg resolve_model_arg(const std::string& spec) {
  std::error_code ec;
  if (fs::exists(spec, ec)) {
    fs::path p = fs::path(spec).lexically_normal();
    std::string name = (p.has_filename() ? p : p.parent_path()).filename().string();
    return {spec, name};
  }
  std::optional<hub::ModelRef> ref = hub::parse_model_ref(spec);
  if (!ref) throw FileError(spec, "no such file or directory (nor a Hugging Face model id such as org/name)");
  const std::string cache = hub::default_cache_dir();
  std::optional<hub::ResolvedModel> m = hub::resolve_cached(*ref, cache);
  if (!m && hub::hub_offline())
    throw Error(spec + ": not in the Hugging Face cache (" + cache + ") and HF_HUB_OFFLINE is set: pull it while online");
  if (!m) {
    pull_in_child(spec);
    m = hub::resolve_cached(*ref, cache);
    if (!m) throw Error(spec + ": pulled, yet not found in " + cache);
  }
  return {m->path, ref->quant.empty() ? ref->repo : ref->repo + ":" + ref->quant};
}

}  // namespace rapid::cli
