// `rapid-mlx ps`: the servers running on this machine (cli/server_registry.h), what each serves,
// its resident memory, KV-cache use and load (from its /metrics).
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/server_registry.h"
#include "download/http_client.h"

namespace rapid::cli {
namespace {

// name -> value of a Prometheus text page's samples (a server labels them with its one model).
std::map<std::string, double> scrape(const std::string& url) {
  std::map<std::string, double> out;
  download::HttpRequest req;
  req.url = url + "/metrics";
  req.connect_timeout_s = 2;
  req.low_speed_timeout_s = 5;
  download::HttpResponse r = download::http_request(req);
  if (r.status != 200) return out;
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ "), sp = line.rfind(' ');
    if (name_end != std::string::npos && sp != std::string::npos)
      out[line.substr(0, name_end)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

double rss_mb(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

struct NoArgs {};

FlagTable ps_table(NoArgs&) {
  return FlagTable("ps", {}, "the rapid-mlx servers running on this machine: model, memory, KV use, load", {},
                   "Servers announce themselves in $XDG_RUNTIME_DIR/rapid-mlx, else ~/.cache/rapid-mlx/servers\n"
                   "(RAPID_SERVERS_DIR overrides).");
}

int run_ps(NoArgs&) {
  std::printf("%-8s %-40s %-24s %9s %14s %8s %8s  %s\n", "PID", "MODEL", "URL", "RSS", "KV USED", "RUNNING",
              "WAITING", "STARTED");
  for (const ServerEntry& s : running_servers()) {
    std::map<std::string, double> m;
    try {
      m = scrape(s.url);
    } catch (const std::exception&) {
      // Starting up or stuck: listed without its figures.
    }
    char kv[32] = "-", run[16] = "-", wait[16] = "-";
    if (m.count("rapid_kv_cache_blocks_total")) {
      double total = m["rapid_kv_cache_blocks_total"], used = total - m["rapid_kv_cache_blocks_free"];
      std::snprintf(kv, sizeof kv, "%.0f/%.0f", used, total);
      std::snprintf(run, sizeof run, "%.0f", m["rapid_num_requests_running"]);
      std::snprintf(wait, sizeof wait, "%.0f", m["rapid_num_requests_waiting"]);
    }
    std::printf("%-8d %-40s %-24s %6.0f MB %14s %8s %8s  %s\n", s.pid, s.model.c_str(), s.url.c_str(), rss_mb(s.pid), kv,
                run, wait, s.started.c_str());
  }
  return 0;
}

Registrar reg("ps", ps_table, run_ps);

}  // namespace
}  // namespace rapid::cli
