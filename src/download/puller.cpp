#include "download/puller.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "download/blob_check.h"
#include "download/http_client.h"
#include "hub/hf_cache.h"
#include "hub/model_files.h"

namespace rapid::download {
namespace fs = std::filesystem;

namespace {
// huggingface_hub's lock per blob (.locks/models--org--name/<etag>.lock, flock): two pulls of the
// same file, by either tool, take turns instead of writing one .incomplete together.
class BlobLock {
 public:
  BlobLock(const std::string& cache, const std::string& repo_path, const std::string& etag) {
    fs::path dir = fs::path(cache) / ".locks" / fs::path(repo_path).filename();
    fs::create_directories(dir);
    path_ = (dir / (etag + ".lock")).string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw FileError(path_, std::string("cannot lock: ") + std::strerror(errno));
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Appends to blobs/<etag>.incomplete, surfacing write errors (a full disk) with their cause.
class PartFile {
 public:
  explicit PartFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw FileError(path_, std::string("cannot open for writing: ") + std::strerror(errno));
  }
  ~PartFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void restart() {
    if (::ftruncate(fd_, 0) != 0) fail("cannot truncate");
  }
  bool write(const char* d, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, d, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = std::strerror(errno);
        return false;
      }
      d += w;
      n -= size_t(w);
    }
    return true;
  }
  void finish() {
    if (::fsync(fd_) != 0) fail("cannot sync");
  }
  const std::string& error() const { return error_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(path_, what + ": " + (error_.empty() ? std::strerror(errno) : error_) +
                               " (what arrived is kept: pulling again resumes)");
  }

 private:
  std::string path_, error_;
  int fd_ = -1;
};

uint64_t size_or_zero(const std::string& p) {
  std::error_code ec;
  uint64_t n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

struct FileJob {
  const HubApi& api;
  const hub::ModelRef& ref;
  const RepoInfo& info;
  const std::string& repo_path;
  const PullOptions& opts;
  std::mutex& progress_mu;
};

void report(FileJob& j, const PullProgress& p) {
  if (!j.opts.progress) return;
  std::lock_guard lk(j.progress_mu);
  j.opts.progress(p);
}

// One request for the rest of a file, appended to `part`. True when the answer ended cleanly
// (the caller then checks the size); false after a network error (the caller retries).
bool fetch_part(FileJob& j, const std::string& file, const std::string& part, uint64_t have, PullProgress& p,
                uint64_t& fetched) {
  PartFile out(part);
  p.done = have;
  try {
    j.api.fetch(j.ref.repo, j.info.commit, file, have,
                [&](uint64_t start) {
                  if (start == 0 && have > 0) out.restart(), p.done = 0;
                },
                [&](const char* d, size_t n) {
                  if (!out.write(d, n)) return false;
                  p.done += n, fetched += n;
                  report(j, p);
                  return true;
                });
  } catch (const NetworkError&) {
    return false;
  } catch (const std::runtime_error&) {
    if (!out.error().empty()) out.fail("write failed");  // the disk, not the network
    throw;
  }
  if (!out.error().empty()) out.fail("write failed");
  out.finish();
  return true;
}

// One file: cached blob, or fetched (resuming) into .incomplete, checked, renamed, linked.
// Returns the bytes fetched.
uint64_t pull_file(FileJob& j, const std::string& file) {
  const RepoFile* found = j.info.find(file);
  if (!found) throw Error(j.ref.str() + ": " + file + " is not in the repo's file listing");
  const RepoFile& meta = *found;
  std::string blob = hub::blob_path(j.repo_path, meta.etag);
  PullProgress p{file, 0, meta.size};
  fs::create_directories(fs::path(blob).parent_path());
  BlobLock lock(j.opts.cache, j.repo_path, meta.etag);
  if (fs::exists(blob) && (meta.size == 0 || size_or_zero(blob) == meta.size)) {
    hub::link_snapshot_file(j.repo_path, j.info.commit, file, meta.etag);
    p.done = p.total, p.finished = p.cached = true;
    report(j, p);
    return 0;
  }
  std::string part = blob + ".incomplete";
  uint64_t fetched = 0;
  // A retry budget for attempts that bring nothing: a flaky link that keeps making progress
  // keeps being resumed, a dead one is given up on (what arrived stays for the next pull).
  for (int idle = 0;;) {
    uint64_t have = size_or_zero(part);
    if (meta.size > 0 && have > meta.size) {
      fs::remove(part);
      have = 0;
    }
    if (meta.size > 0 && have == meta.size) break;
    if (fetch_part(j, file, part, have, p, fetched)) break;
    if (size_or_zero(part) > have) idle = 0;
    else if (++idle > j.opts.retries) throw NetworkError(j.ref.str() + ": " + file + ": the connection keeps failing; what arrived is kept, pull again to resume");
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(idle, 5)));
  }
  if (meta.size > 0 && size_or_zero(part) != meta.size)
    throw FileError(part, "size " + std::to_string(size_or_zero(part)) + " differs from the hub's " + std::to_string(meta.size));
  try {
    verify_blob(part, meta.etag, meta.lfs);
  } catch (const FileError&) {
    fs::remove(part);  // a wrong byte anywhere: resuming cannot mend it
    throw;
  }
  fs::rename(part, blob);
  hub::link_snapshot_file(j.repo_path, j.info.commit, file, meta.etag);
  p.done = p.total = size_or_zero(blob);
  p.finished = true;
  report(j, p);
  return fetched;
}
}  // namespace

PullResult pull_model(const HubApi& api, const hub::ModelRef& ref, const PullOptions& opts) {
  RepoInfo info = api.repo_info(ref.repo, ref.revision);
  hub::ModelFiles want = hub::select_model_files(info.paths(), ref.quant);
  std::string repo_path = hub::repo_dir(opts.cache, ref.repo);
  hub::ensure_cachedir_tag(opts.cache);
  std::mutex progress_mu;
  FileJob job{api, ref, info, repo_path, opts, progress_mu};
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> fetched{0};
  std::atomic<int> fetched_files{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&] {
    for (size_t i; (i = next++) < want.files.size();) {
      {
        std::lock_guard lk(error_mu);
        if (error) return;
      }
      try {
        uint64_t n = pull_file(job, want.files[i]);
        fetched += n;
        if (n > 0) ++fetched_files;
      } catch (...) {
        std::lock_guard lk(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  for (auto& f : want.files)  // the whole plan first, so progress has its total from the start
    if (const RepoFile* rf = info.find(f); rf && opts.progress) opts.progress(PullProgress{f, 0, rf->size});
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min<int>(opts.parallel, int(want.files.size()))); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  if (!hub::is_commit_hash(ref.revision)) hub::write_ref(repo_path, ref.revision, info.commit);
  hub::ModelRef pinned = ref;
  pinned.revision = info.commit;
  std::optional<hub::ResolvedModel> m = hub::resolve_cached(pinned, opts.cache);
  if (!m) throw Error(ref.str() + ": pulled, but the snapshot is incomplete (the repo's index names files it does not list?)");
  PullResult r;
  r.model = *m;
  r.fetched_bytes = fetched;
  r.fetched_files = fetched_files;
  r.cached_files = int(want.files.size()) - fetched_files;
  return r;
}

hub::ResolvedModel resolve_model(const std::string& spec, const std::function<void(const PullProgress&)>& progress) {
  std::error_code ec;
  if (fs::exists(spec, ec)) return hub::ResolvedModel{spec, "", "", ""};
  std::optional<hub::ModelRef> ref = hub::parse_model_ref(spec);
  if (!ref) throw FileError(spec, "no such file or directory (nor a hub model id such as org/name)");
  std::string cache = hub::default_cache_dir();
  if (auto m = hub::resolve_cached(*ref, cache)) return *m;
  if (hub::hub_offline())
    throw Error(spec + ": not in the Hugging Face cache (" + cache + ") and HF_HUB_OFFLINE is set; pull it first");
  PullOptions opts;
  opts.cache = cache;
  opts.progress = progress;
  return pull_model(HubApi(HubConfig::from_env()), *ref, opts).model;
}

}  // namespace rapid::download
