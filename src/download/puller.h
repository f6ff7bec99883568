// `rapid-mlx pull`: a model's files from the hub into the Hugging Face cache, the way
// huggingface_hub writes them (blobs named by ETag, snapshot symlinks, refs), so either tool can
// use what the other fetched. Parallel across files, resumable (blobs/<etag>.incomplete keeps what
// arrived; the next attempt asks for the rest with Range), checked (size, and the sha256 of an LFS
// file or the git blob sha1 of a small one) before a blob gets its final name.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "download/hub_api.h"
#include "hub/model_ref.h"
#include "hub/resolve.h"

namespace rapid::download {

struct PullProgress {
  std::string file;
  uint64_t done = 0, total = 0;  // bytes of this file
  bool finished = false;
  bool cached = false;           // already in the cache, nothing fetched
};

struct PullOptions {
  std::string cache;             // the hub cache folder
  int parallel = 4;              // files at once
  int retries = 5;               // per file, after a cut connection (each resumes)
  std::function<void(const PullProgress&)> progress;  // from the worker threads, serialised
};

struct PullResult {
  hub::ResolvedModel model;
  uint64_t fetched_bytes = 0;
  int fetched_files = 0, cached_files = 0;
};

PullResult pull_model(const HubApi& api, const hub::ModelRef& ref, const PullOptions& opts);

// `--model` for serve/run/chat: an existing path as is; a hub id from the cache, pulled first
// when missing unless HF_HUB_OFFLINE is set. Throws Error saying what to do otherwise.
hub::ResolvedModel resolve_model(const std::string& spec, const std::function<void(const PullProgress&)>& progress = {});

}  // namespace rapid::download
