#include "cli/server_registry.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/log.h"

namespace rapid::cli {
namespace fs = std::filesystem;

std::string servers_dir() {
  if (const char* d = std::getenv("RAPID_SERVERS_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d && *d) return std::string(d) + "/rapid-mlx";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/rapid-mlx/servers";
}

ServerAnnouncement::ServerAnnouncement(const std::string& url, const std::string& model) {
  try {
    fs::path dir = servers_dir();
    fs::create_directories(dir);
    char when[32];
    std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    nlohmann::json j = {{"pid", int(::getpid())}, {"url", url}, {"model", model}, {"started", when}};
    fs::path tmp = dir / (std::to_string(::getpid()) + ".json.tmp");
    std::ofstream(tmp) << j.dump() << "\n";
    fs::rename(tmp, dir / (std::to_string(::getpid()) + ".json"));
    path_ = (dir / (std::to_string(::getpid()) + ".json")).string();
  } catch (const std::exception& e) {
    log::warn(std::string("`rapid-mlx ps` will not list this server: ") + e.what());  // serving goes on
  }
}

ServerAnnouncement::~ServerAnnouncement() {
  std::error_code ec;
  if (!path_.empty()) fs::remove(path_, ec);
}

std::vector<ServerEntry> running_servers() {
  std::vector<ServerEntry> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(servers_dir(), ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer()) continue;
    ServerEntry s{j["pid"].get<int>(), j.value("url", ""), j.value("model", ""), j.value("started", "")};
    if (s.pid <= 0 || (::kill(s.pid, 0) != 0 && errno == ESRCH)) {
      std::error_code e2;
      fs::remove(e.path(), e2);  // its server died without cleaning up
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rapid::cli
