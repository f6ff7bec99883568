// The Hugging Face hub's HTTP API, the parts a download needs (the calls huggingface_hub's
// snapshot_download makes): a revision's commit, its file tree with each file's size and blob id,
// then each file's content through /resolve/, which may redirect to a file store on another host.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

namespace rapid::download {

struct HubConfig {
  std::string endpoint;  // HF_ENDPOINT, default https://huggingface.co
  std::string token;     // HF_TOKEN, else the token file huggingface_hub's login wrote
  static HubConfig from_env();
};

// A refusal by the hub, worded for the user (gated, private, missing repo/revision/file).
class HubError : public Error {
 public:
  HubError(const std::string& msg, long status) : Error(msg), status_(status) {}
  long status() const { return status_; }

 private:
  long status_;
};

struct RepoFile {
  std::string path;
  std::string etag;      // blob name in the cache: the LFS sha256, or the git blob sha1
  uint64_t size = 0;
  bool lfs = false;      // the etag is a sha256 of the content
};

struct RepoInfo {
  std::string commit;
  std::vector<RepoFile> files;
  std::vector<std::string> paths() const;
  const RepoFile* find(const std::string& path) const;
};

class HubApi {
 public:
  explicit HubApi(HubConfig cfg) : cfg_(std::move(cfg)) {}
  // The commit a revision names, then its file tree (paths, sizes, blob ids), page by page.
  RepoInfo repo_info(const std::string& repo, const std::string& revision) const;
  // Streams a file from byte `offset` to `write`. `begin` learns where the bytes really start
  // before the first one: 0 when the server ignored the range (the caller starts over).
  void fetch(const std::string& repo, const std::string& commit, const std::string& file, uint64_t offset,
             const std::function<void(uint64_t start)>& begin,
             const std::function<bool(const char*, size_t)>& write) const;
  const HubConfig& config() const { return cfg_; }

 private:
  std::string file_url(const std::string& repo, const std::string& commit, const std::string& file) const;
  std::vector<std::string> auth_headers() const;
  HubConfig cfg_;
};

}  // namespace rapid::download
