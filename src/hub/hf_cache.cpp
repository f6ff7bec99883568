#include "hub/hf_cache.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace rapid::hub {
namespace fs = std::filesystem;

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string read_small(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

void write_atomic(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f.flush()) throw FileError(tmp.string(), "cannot write");
  }
  fs::rename(tmp, p);
}
}  // namespace

std::string default_cache_dir() {
  if (std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return v;  // the older spelling
  if (std::string v = env("HF_HOME"); !v.empty()) return v + "/hub";
  if (std::string v = env("XDG_CACHE_HOME"); !v.empty()) return v + "/huggingface/hub";
  return env("HOME") + "/.cache/huggingface/hub";
}

std::string repo_dir(const std::string& cache, const std::string& repo) {
  std::string name = "models--" + repo;
  for (size_t p; (p = name.find('/')) != std::string::npos;) name.replace(p, 1, "--");
  return (fs::path(cache) / name).string();
}

std::optional<std::string> cached_commit(const std::string& cache, const ModelRef& ref) {
  fs::path dir = repo_dir(cache, ref.repo);
  if (is_commit_hash(ref.revision)) return ref.revision;
  std::error_code ec;
  fs::path r = dir / "refs" / ref.revision;
  if (!fs::is_regular_file(r, ec)) return std::nullopt;
  std::string commit = read_small(r);
  if (!is_commit_hash(commit)) return std::nullopt;
  return commit;
}

std::vector<std::string> snapshot_files(const std::string& snapshot_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot_dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (fs::is_regular_file(it->path(), e2))  // follows the link: a dangling one is no file
      out.push_back(it->path().lexically_relative(snapshot_dir).generic_string());  // not relative(): it resolves links
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<CachedRepo> scan_cache(const std::string& cache) {
  std::vector<CachedRepo> repos;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(cache, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("models--", 0) != 0 || !e.is_directory()) continue;
    CachedRepo r;
    r.path = e.path().string();
    r.repo = name.substr(8);
    if (size_t p = r.repo.find("--"); p != std::string::npos) r.repo.replace(p, 2, "/");
    std::error_code e2;
    for (auto& b : fs::directory_iterator(e.path() / "blobs", e2))
      if (b.is_regular_file(e2)) r.size_on_disk += b.file_size(e2);
    std::vector<std::pair<std::string, std::string>> refs;  // (name, commit)
    for (auto it = fs::recursive_directory_iterator(e.path() / "refs", e2); !e2 && it != fs::recursive_directory_iterator(); it.increment(e2))
      if (it->is_regular_file()) refs.emplace_back(fs::relative(it->path(), e.path() / "refs").generic_string(), read_small(it->path()));
    for (auto& s : fs::directory_iterator(e.path() / "snapshots", e2)) {
      CachedRevision rev;
      rev.commit = s.path().filename().string();
      rev.path = s.path().string();
      rev.files = snapshot_files(rev.path);
      for (auto& [ref, commit] : refs)
        if (commit == rev.commit) rev.refs.push_back(ref);
      std::sort(rev.refs.begin(), rev.refs.end());
      r.revisions.push_back(std::move(rev));
    }
    std::sort(r.revisions.begin(), r.revisions.end(), [](auto& a, auto& b) { return a.commit < b.commit; });
    repos.push_back(std::move(r));
  }
  std::sort(repos.begin(), repos.end(), [](auto& a, auto& b) { return a.repo < b.repo; });
  return repos;
}

bool remove_repo(const std::string& cache, const std::string& repo) {
  fs::path dir = repo_dir(cache, repo);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  fs::remove_all(dir, ec);
  if (ec) throw FileError(dir.string(), "cannot remove: " + ec.message());
  return true;
}

std::string blob_path(const std::string& repo_path, const std::string& etag) {
  return (fs::path(repo_path) / "blobs" / etag).string();
}

void link_snapshot_file(const std::string& repo_path, const std::string& commit, const std::string& file,
                        const std::string& etag) {
  fs::path link = fs::path(repo_path) / "snapshots" / commit / file;
  fs::create_directories(link.parent_path());
  std::string target;
  for (size_t depth = std::count(file.begin(), file.end(), '/') + 2; depth > 0; --depth) target += "../";
  target += "blobs/" + etag;
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec) throw FileError(link.string(), "cannot create the snapshot link: " + ec.message());
}

void ensure_cachedir_tag(const std::string& cache) {
  fs::path tag = fs::path(cache) / "CACHEDIR.TAG";
  std::error_code ec;
  if (fs::exists(tag, ec)) return;
  write_atomic(tag, "Signature: 8a477f597d28d172789f06886806bc55\n"
                    "# This file is a cache directory tag created by rapid-mlx (a Hugging Face cache).\n"
                    "# For information about cache directory tags, see https://bford.info/cachedir/\n");
}

void write_ref(const std::string& repo_path, const std::string& revision, const std::string& commit) {
  write_atomic(fs::path(repo_path) / "refs" / revision, commit);
}

}  // namespace rapid::hub
