// The Hugging Face cache exactly as `huggingface_hub` lays it out, so models it downloaded serve
// here and models pulled here load there:
//   <cache>/models--org--name/blobs/<etag>                  file contents, named by their ETag
//                            /refs/<revision>               the commit a branch or tag points to
//                            /snapshots/<commit>/<path>     relative symlinks into ../../blobs
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hub/model_ref.h"

namespace rapid::hub {

// HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string default_cache_dir();
std::string repo_dir(const std::string& cache, const std::string& repo);

// The commit a revision names in the cache (a commit id names itself), if known.
std::optional<std::string> cached_commit(const std::string& cache, const ModelRef& ref);
// Files of a snapshot, relative paths, sorted (symlinks followed; dangling links left out).
std::vector<std::string> snapshot_files(const std::string& snapshot_dir);

struct CachedRevision {
  std::string commit;
  std::vector<std::string> refs;   // branches/tags pointing at it
  std::vector<std::string> files;
  std::string path;                // the snapshot folder
};
struct CachedRepo {
  std::string repo;                // "org/name"
  std::string path;
  uint64_t size_on_disk = 0;       // the blobs (what removing the repo frees)
  std::vector<CachedRevision> revisions;
};
// Every model repo in the cache, sorted by name (datasets and spaces are not models: skipped).
std::vector<CachedRepo> scan_cache(const std::string& cache);
// Deletes a repo's folder; false when it was not there.
bool remove_repo(const std::string& cache, const std::string& repo);

// Writing, as huggingface_hub does (used by the downloader).
std::string blob_path(const std::string& repo_path, const std::string& etag);
// snapshots/<commit>/<file> -> ../../blobs/<etag> (one more ../ per folder level in `file`).
void link_snapshot_file(const std::string& repo_path, const std::string& commit, const std::string& file,
                        const std::string& etag);
// CACHEDIR.TAG (bford.info/cachedir) at the cache's root, so backup tools skip it, unless present.
void ensure_cachedir_tag(const std::string& cache);
// refs/<revision> = commit, replaced atomically.
void write_ref(const std::string& repo_path, const std::string& revision, const std::string& commit);

}  // namespace rapid::hub
