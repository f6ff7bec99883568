// The models one server can serve, by name: which are loaded, loading the others on first use
// through a loader the caller supplies (so this module is tested with fake backends), and
// unloading the least recently used beyond a count or a memory budget. A request holds its
// model through a shared_ptr: an unloaded model lives on until its last request has finished.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/backend.h"

namespace rapid::server {

struct ServedModel {
  std::string name;                  // its id in the APIs
  std::vector<std::string> aliases;  // other exact names for it
  std::string source;                // what the loader opens (a path or a hub id)
};

struct LoadedModel {
  std::shared_ptr<Backend> backend;
  uint64_t bytes = 0;  // what it holds in memory (weights + KV pool), for the memory budget
};

using ModelLoader = std::function<LoadedModel(const ServedModel&)>;

struct RegistryLimits {
  size_t max_loaded = 0;   // 0: no limit
  uint64_t max_bytes = 0;  // 0: no limit
};

struct ModelStatus {
  std::string name;
  std::vector<std::string> aliases;
  bool loaded = false;
  uint64_t bytes = 0;
  int64_t context_length = 0;  // 0 while not loaded
};

class ModelRegistry {
 public:
  // `models` in order: the first is the default (a request that names no model). `patterns` are
  // the --model-alias globs, each mapping to a model's name.
  ModelRegistry(std::vector<ServedModel> models, ModelLoader loader, RegistryLimits limits = {},
                std::vector<std::pair<std::string, std::string>> patterns = {});
  // One backend loaded already and never unloaded (the single-model server, tests).
  static std::shared_ptr<ModelRegistry> single(Backend& backend,
                                               std::vector<std::pair<std::string, std::string>> patterns = {});

  // The backend serving `name` ("": the default model), loaded first when it is not (unless
  // !load: then 404 model_not_loaded). Throws ApiError 404 model_not_found (listing what exists)
  // for an unknown name, 503 when loading fails.
  std::shared_ptr<Backend> acquire(const std::string& name, bool load = true);
  // Whether `name` names a servable model (by name, alias or pattern); "" always does.
  bool knows(const std::string& name) const;
  // The served name `name` refers to (itself when unknown).
  std::string canonical(const std::string& name) const;
  ApiError not_found(const std::string& name) const;
  // Adds an already loaded backend for a listed model (cmd_serve loads the first one eagerly).
  void put_loaded(const std::string& name, LoadedModel m);

  std::vector<ModelStatus> status() const;
  // The default model when it is loaded, else the most recently used loaded one, else null.
  std::shared_ptr<Backend> any_loaded() const;
  std::string default_name() const;
  uint64_t loads() const;
  uint64_t unloads() const;

 private:
  struct Entry {
    ServedModel spec;
    LoadedModel loaded;
    uint64_t last_used = 0;
    std::shared_future<LoadedModel> loading;  // valid while a load is under way
    bool pinned = false;                       // never unloaded (single())
  };
  int find(const std::string& name) const;  // index into entries_, -1 when unknown; mu_ held
  std::shared_ptr<Backend> load(int i, std::unique_lock<std::mutex>& lk);
  std::vector<std::shared_ptr<Backend>> evict_for(int keep);  // mu_ held

  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> patterns_;
  ModelLoader loader_;
  RegistryLimits limits_;
  mutable std::mutex mu_;
  std::mutex load_mu_;  // one load at a time: each may need the memory the last one freed
  uint64_t clock_ = 0, loads_ = 0, unloads_ = 0;
};

// Shell-style match: `*` any run of characters, `?` any one character.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace rapid::server
