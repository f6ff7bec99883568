#include "download/hub_api.h"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "download/http_client.h"

namespace rapid::download {
namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  return s;
}

std::string header(const HttpResponse& r, const char* name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

// `<https://...>; rel="next"` from a Link header, or "".
std::string next_link(const HttpResponse& r) {
  std::string link = header(r, "link");
  for (size_t pos = 0; pos < link.size();) {
    size_t open = link.find('<', pos), close = link.find('>', open);
    if (open == std::string::npos || close == std::string::npos) break;
    size_t end = link.find(',', close);
    std::string params = link.substr(close + 1, end == std::string::npos ? std::string::npos : end - close - 1);
    if (params.find("rel=\"next\"") != std::string::npos) return link.substr(open + 1, close - open - 1);
    pos = end == std::string::npos ? link.size() : end + 1;
  }
  return "";
}

// The hub's refusals, in words a user can act on. X-Error-Code says which one it is.
[[noreturn]] void refuse(const HttpResponse& r, const std::string& what, const std::string& repo) {
  std::string code = header(r, "x-error-code"), msg = header(r, "x-error-message");
  std::string login = "set HF_TOKEN to a token with access (https://huggingface.co/settings/tokens) or run `huggingface-cli login`";
  if (code == "GatedRepo" || (r.status == 403 && msg.find("gated") != std::string::npos))
    throw HubError(repo + " is a gated model: accept its terms at https://huggingface.co/" + repo + " and " + login, r.status);
  if (r.status == 401)
    throw HubError(what + ": the hub asks for authentication (" + repo + " is private, gated or does not exist); " + login, r.status);
  if (r.status == 403) throw HubError(what + ": access denied by the hub (HTTP 403); " + login, r.status);
  if (code == "RevisionNotFound") throw HubError(what + ": no such revision in " + repo, r.status);
  if (code == "EntryNotFound") throw HubError(what + ": no such file in " + repo, r.status);
  if (r.status == 404) throw HubError(what + ": " + repo + " not found on the hub", r.status);
  throw HubError(what + ": the hub answered HTTP " + std::to_string(r.status) + (msg.empty() ? "" : " (" + msg + ")"), r.status);
}
}  // namespace

HubConfig HubConfig::from_env() {
  HubConfig c;
  c.endpoint = env("HF_ENDPOINT");
  if (c.endpoint.empty()) c.endpoint = "https://huggingface.co";
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  c.token = env("HF_TOKEN");
  if (c.token.empty()) c.token = env("HUGGING_FACE_HUB_TOKEN");
  if (c.token.empty()) {
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) path = (env("HF_HOME").empty() ? env("HOME") + "/.cache/huggingface" : env("HF_HOME")) + "/token";
    std::ifstream f(path);
    std::getline(f, c.token);
    c.token = trim(c.token);
  }
  return c;
}

std::vector<std::string> HubApi::auth_headers() const {
  if (cfg_.token.empty()) return {};
  return {"Authorization: Bearer " + cfg_.token};
}

std::vector<std::string> RepoInfo::paths() const {
  std::vector<std::string> out;
  for (auto& f : files) out.push_back(f.path);
  return out;
}

const RepoFile* RepoInfo::find(const std::string& path) const {
  for (auto& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

RepoInfo HubApi::repo_info(const std::string& repo, const std::string& revision) const {
  HttpRequest req;
  req.url = cfg_.endpoint + "/api/models/" + repo + "/revision/" + url_escape(revision);
  req.headers = auth_headers();
  HttpResponse r = http_request(req);
  if (r.status != 200) refuse(r, repo + "@" + revision, repo);
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string())
    throw HubError(req.url + ": not a model description (no commit sha)", r.status);
  RepoInfo info;
  info.commit = j["sha"].get<std::string>();
  // The tree of that commit; the hub pages it (a Link: <url>; rel="next" header per page).
  std::string url = cfg_.endpoint + "/api/models/" + repo + "/tree/" + info.commit + "?recursive=true&expand=false";
  for (int page = 0; !url.empty(); ++page) {
    if (page > 10000) throw HubError(repo + ": the file listing does not end", 0);
    req.url = url;
    r = http_request(req);
    if (r.status != 200) refuse(r, repo + "@" + revision, repo);
    j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_array()) throw HubError(req.url + ": not a file listing", r.status);
    for (auto& e : j) {
      if (!e.is_object() || e.value("type", "") != "file" || !e.contains("path") || !e["path"].is_string()) continue;
      RepoFile f;
      f.path = e["path"].get<std::string>();
      f.size = e.value("size", uint64_t(0));
      f.etag = e.value("oid", "");
      if (e.contains("lfs") && e["lfs"].is_object()) {
        f.lfs = true;
        f.etag = e["lfs"].value("oid", "");
        f.size = e["lfs"].value("size", f.size);
      }
      if (f.etag.empty() || f.etag.find('/') != std::string::npos || f.etag.find("..") != std::string::npos)
        throw HubError(req.url + ": no usable blob id for " + f.path, r.status);
      info.files.push_back(std::move(f));
    }
    url = next_link(r);
  }
  return info;
}

std::string HubApi::file_url(const std::string& repo, const std::string& commit, const std::string& file) const {
  std::string path;
  for (size_t start = 0; start <= file.size();) {  // keep the '/' between folders, escape the rest
    size_t slash = file.find('/', start);
    if (slash == std::string::npos) slash = file.size();
    if (start) path += '/';
    path += url_escape(file.substr(start, slash - start));
    start = slash + 1;
  }
  return cfg_.endpoint + "/" + repo + "/resolve/" + url_escape(commit) + "/" + path;
}

void HubApi::fetch(const std::string& repo, const std::string& commit, const std::string& file, uint64_t offset,
                   const std::function<void(uint64_t)>& begin,
                   const std::function<bool(const char*, size_t)>& write) const {
  HttpRequest req;
  req.url = file_url(repo, commit, file);
  req.headers = auth_headers();
  req.headers.push_back("Accept-Encoding: identity");
  if (offset > 0) req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
  req.on_start = [&](long status) { begin(status == 206 ? offset : 0); };
  req.sink = write;
  HttpResponse r = http_request(req);
  if (r.status == 416 && offset > 0) {  // asked past the end: the file is whole already
    begin(offset);
    return;
  }
  if (r.status >= 400) refuse(r, repo + "/" + file, repo);
}

}  // namespace rapid::download
