// Running servers announce themselves in a folder of small JSON files (one per process, removed
// at exit), so `rapid-mlx ps` finds every server on this machine without being told their ports.
// A file whose process is gone (killed -9) is ignored and swept by the next reader.
#pragma once
#include <string>
#include <vector>

namespace rapid::cli {

struct ServerEntry {
  int pid = 0;
  std::string url, model, started;  // started: ISO 8601 UTC
};

// $XDG_RUNTIME_DIR/rapid-mlx, else ~/.cache/rapid-mlx/servers (RAPID_SERVERS_DIR overrides).
std::string servers_dir();

class ServerAnnouncement {
 public:
  ServerAnnouncement(const std::string& url, const std::string& model);
  ~ServerAnnouncement();
  ServerAnnouncement(const ServerAnnouncement&) = delete;
  ServerAnnouncement& operator=(const ServerAnnouncement&) = delete;

 private:
  std::string path_;
};

std::vector<ServerEntry> running_servers();

}  // namespace rapid::cli
